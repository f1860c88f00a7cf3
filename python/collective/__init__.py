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


class CollectiveValueError(CollectiveError, ValueError):
    """A CollectiveError for a call refused as invalid before it ran (bad argument,
    duplicate name in flight): also a ValueError, as horovod raises for these."""


__all__ = ["CollectiveError", "CollectiveValueError", "__version__"]
