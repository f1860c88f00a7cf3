"""Loading libcollective and declaring the C interface of <collective/hvd.h> for ctypes.

The library is looked for, in order: the path in $COLL_LIBRARY; the path recorded when
this package was installed (collective/_install_paths.py, written by meson); the system's
search (ctypes.util.find_library('collective')).
"""
import ctypes
import ctypes.util
import os

from .. import CollectiveError, CollectiveValueError

COLL_HVD_MAX_DIMS = 16

# collResult_t
SUCCESS = 0
INVALID_ARGUMENT = 1
INVALID_USAGE = 2


class HvdTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("deviceType", ctypes.c_int),
        ("deviceIndex", ctypes.c_int),
    ]


class HvdCompression(ctypes.Structure):
    _fields_ = [
        ("compressor", ctypes.c_int),
        ("blockSize", ctypes.c_int),
        ("stochastic", ctypes.c_int),
        ("density", ctypes.c_double),
        ("errorFeedback", ctypes.c_int),
    ]


_c_int_p = ctypes.POINTER(ctypes.c_int)
_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_tensor_p = ctypes.POINTER(HvdTensor)
_compression_p = ctypes.POINTER(HvdCompression)
_R = ctypes.c_int  # collResult_t

# name: (restype, argtypes)
_SIGNATURES = {
    "collGetErrorString": (ctypes.c_char_p, [ctypes.c_int]),
    "collHvdLastError": (ctypes.c_char_p, []),
    "collHvdInit": (_R, []),
    "collHvdShutdown": (_R, []),
    "collHvdIsInitialized": (ctypes.c_int, []),
    "collHvdTopology": (_R, [_c_int_p] * 6),
    "collHvdAddProcessSet": (_R, [_c_int_p, ctypes.c_int, _c_int_p]),
    "collHvdRemoveProcessSet": (_R, [ctypes.c_int]),
    "collHvdProcessSetInfo": (_R, [ctypes.c_int, _c_int_p, _c_int_p]),
    "collHvdAllreduceAsync": (_R, [_tensor_p, _tensor_p, ctypes.c_char_p, ctypes.c_int,
                                   ctypes.c_double, ctypes.c_double, _compression_p,
                                   ctypes.c_int, _c_int64_p]),
    "collHvdGroupedAllreduceAsync": (_R, [ctypes.c_int, _tensor_p, _tensor_p, ctypes.c_char_p,
                                          ctypes.c_int, ctypes.c_double, ctypes.c_double,
                                          _compression_p, ctypes.c_int, _c_int64_p]),
    "collHvdBroadcastAsync": (_R, [_tensor_p, _tensor_p, ctypes.c_int, ctypes.c_char_p,
                                   ctypes.c_int, _c_int64_p]),
    "collHvdAllgatherAsync": (_R, [_tensor_p, ctypes.c_char_p, ctypes.c_int, _c_int64_p]),
    "collHvdAlltoallAsync": (_R, [_tensor_p, _c_int64_p, ctypes.c_int, ctypes.c_char_p,
                                  ctypes.c_int, _c_int64_p]),
    "collHvdReducescatterAsync": (_R, [_tensor_p, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.c_double, ctypes.c_double, ctypes.c_int,
                                       _c_int64_p]),
    "collHvdPoll": (_R, [ctypes.c_int64, _c_int_p]),
    "collHvdWait": (_R, [ctypes.c_int64]),
    "collHvdOutputShape": (_R, [ctypes.c_int64, _c_int_p, _c_int64_p]),
    "collHvdOutputCopy": (_R, [ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t]),
    "collHvdOutputTake": (_R, [ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]),
    "collHvdOutputFree": (_R, [ctypes.c_void_p]),
    "collHvdReceivedSplits": (_R, [ctypes.c_int64, _c_int64_p, ctypes.c_int]),
    "collHvdRelease": (_R, [ctypes.c_int64]),
    "collHvdBarrier": (_R, [ctypes.c_int]),
    "collHvdJoin": (_R, [ctypes.c_int, _c_int_p]),
}

_HINT = ("set COLL_LIBRARY to the path of libcollective.so (in a build tree: "
         "build/libcollective.so), or install libcollective where the dynamic loader finds it")


def _candidates():
    env = os.environ.get("COLL_LIBRARY")
    if env:
        return [("$COLL_LIBRARY", env)], True
    found = []
    try:
        from .. import _install_paths  # written by meson at install time
        for path in _install_paths.LIBRARIES:
            found.append(("the installed library", path))
    except ImportError:
        pass
    name = ctypes.util.find_library("collective")
    if name:
        found.append(("find_library('collective')", name))
    return found, False


def _load():
    tried = []
    candidates, from_env = _candidates()
    for origin, path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{origin} = {path}: {e}")
            if from_env:
                break
            continue
        missing = [f for f in _SIGNATURES if not hasattr(lib, f)]
        if missing:
            tried.append(f"{origin} = {path}: lacks {', '.join(missing[:3])} "
                         f"(a libcollective without the C interface of <collective/hvd.h>)")
            if from_env:
                break
            continue
        for fname, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, fname)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    detail = "; ".join(tried) if tried else "no candidate found"
    raise ImportError(f"collective.torch cannot load libcollective ({detail}): {_HINT}")


lib = _load()


def last_error():
    msg = lib.collHvdLastError()
    return msg.decode("utf-8", "replace") if msg else ""


def check(result, what=None, submit=False):
    """Raises CollectiveError for a collResult_t other than collSuccess; with `submit`
    (the engine refused to start the call) CollectiveValueError for an invalid argument or
    usage, as horovod raises ValueError there."""
    if result == SUCCESS:
        return
    msg = last_error()
    code_name = lib.collGetErrorString(result)
    code_name = code_name.decode("utf-8", "replace") if code_name else f"error {result}"
    text = msg or code_name
    if what and what not in text:
        text = f"{what}: {text}"
    if submit and result in (INVALID_ARGUMENT, INVALID_USAGE):
        raise CollectiveValueError(result, text)
    raise CollectiveError(result, text)
