"""The engine's timeline switched at run time, as horovod.torch's start_timeline."""
import ctypes
import os

from ._lib import check, lib
from .basics import _require_init

_start = lib.collHvdStartTimeline
_start.restype, _start.argtypes = ctypes.c_int, [ctypes.c_char_p, ctypes.c_int]
_stop = lib.collHvdStopTimeline
_stop.restype, _stop.argtypes = ctypes.c_int, []


def start_timeline(file_path, mark_cycles=False):
    """Records the engine's timeline (Chrome trace JSON, for Perfetto or chrome://tracing)
    into file_path until stop_timeline(). "%r" in file_path becomes the rank; without it
    only rank 0 writes. mark_cycles adds a marker for every engine round that ran
    operations. Raises CollectiveError while a timeline is being written (COLL_TIMELINE's
    included) or when the file cannot be created."""
    _require_init("start_timeline")
    if not isinstance(file_path, (str, bytes, os.PathLike)):
        raise TypeError(f"start_timeline: file_path must be a path, not {type(file_path).__name__}")
    check(_start(os.fsencode(file_path), 1 if mark_cycles else 0), "start_timeline")


def stop_timeline():
    """Closes the timeline file; does nothing when none is being written."""
    _require_init("stop_timeline")
    check(_stop(), "stop_timeline")
