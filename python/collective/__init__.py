"""libcollective's Python bindings.

`collective.torch` is a drop-in for `horovod.torch` on CPU PyTorch tensors, driving
libcollective's Horovod-style engine through its C interface (<collective/hvd.h>).
"""

__version__ = "0.1.0"


class CollectiveError(RuntimeError):
    """A libcollective call failed. `code` is its collResult_t (an int), the message the
    library's reason (collHvdLastError)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = int(code)


__all__ = ["CollectiveError", "__version__"]
