"""Elastic training, as horovod.torch.elastic: `hvd.elastic.run`, `hvd.elastic.TorchState`.

Under `collectiverun --elastic` (COLL_ELASTIC_DIR in the environment) `hvd.init()` starts
the engine on a communicator of this module's own. When a rank dies, the operations of the
survivors fail; `run` then restores the state of the last `commit()`, revokes the
communicator, shrinks it to the survivors (doc/recovery.md), asks the launcher for
replacement ranks up to COLL_ELASTIC_MAX_NP and grows back, restarts the engine on the
result, calls the reset callbacks and `sync()`s the state from rank 0 before calling the
training function again. The replacement processes run the same script: their
`hvd.init()` joins the grown communicator (COLL_JOIN_ID) and their `run` starts with the
same `sync()`.
"""
import copy
import ctypes
import functools
import os
import time

from .. import CollectiveError
from ._lib import check, lib

REMOTE_ERROR, TIMEOUT, REVOKED = 4, 5, 9


class HorovodInternalError(RuntimeError):
    """A collective failed because a rank was lost; `run` recovers from it."""


class HostsUpdatedInterrupt(RuntimeError):
    """Ranks are to be added or removed; `run` resets and carries on."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync


_comm_t = ctypes.c_void_p
_ID = ctypes.c_char * 128
for _name, (_res, _args) in {
        "collCommInitFromEnv": (ctypes.c_int, [ctypes.POINTER(_comm_t)]),
        "collCommDestroy": (ctypes.c_int, [_comm_t]),
        "collCommRevoke": (ctypes.c_int, [_comm_t]),
        "collCommCount": (ctypes.c_int, [_comm_t, ctypes.POINTER(ctypes.c_int)]),
        "collCommUserRank": (ctypes.c_int, [_comm_t, ctypes.POINTER(ctypes.c_int)]),
        "collCommGetFailedRanks": (ctypes.c_int, [_comm_t, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                                  ctypes.POINTER(ctypes.c_int)]),
        "collCommShrink": (ctypes.c_int, [_comm_t, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                          ctypes.POINTER(_comm_t)]),
        "collCommGrow": (ctypes.c_int, [_comm_t, ctypes.c_int, ctypes.POINTER(_comm_t)]),
        "collCommGetGrowId": (ctypes.c_int, [_comm_t, ctypes.POINTER(_ID)]),
        "collGetLastError": (ctypes.c_char_p, [_comm_t]),
        "collHvdInitComm": (ctypes.c_int, [_comm_t]),
}.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args

_comm = None  # the engine's communicator in elastic mode


def _ccheck(rc, what, comm=None):
    if rc != 0:
        msg = lib.collGetLastError(comm)
        raise CollectiveError(rc, f"{what}: {msg.decode('utf-8', 'replace') if msg else rc}")


def _enabled():
    return bool(os.environ.get("COLL_ELASTIC_DIR") or os.environ.get("COLL_JOIN_ID"))


def _init_engine():
    """hvd.init() under collectiverun --elastic (or as a joining rank)."""
    global _comm
    c = _comm_t()
    _ccheck(lib.collCommInitFromEnv(ctypes.byref(c)), "collCommInitFromEnv")
    try:
        check(lib.collHvdInitComm(c), "init")
    except Exception:
        lib.collCommDestroy(c)
        raise
    _comm = c


def _destroy_comm():
    global _comm
    if _comm is not None:
        lib.collCommDestroy(_comm)
        _comm = None


def _size(comm):
    n = ctypes.c_int()
    _ccheck(lib.collCommCount(comm, ctypes.byref(n)), "collCommCount", comm)
    return n.value


def _failed(comm, settle_s=0.1, limit_s=10.0):
    """The failed ranks, once the answer has held still for settle_s."""
    last, since, t0 = None, time.time(), time.time()
    while True:
        ranks, n = (ctypes.c_int * 1024)(), ctypes.c_int()
        _ccheck(lib.collCommGetFailedRanks(comm, ranks, 1024, ctypes.byref(n)), "collCommGetFailedRanks", comm)
        now = list(ranks[:min(n.value, 1024)])
        if now != last:
            last, since = now, time.time()
        elif now and time.time() - since >= settle_s:
            return now
        if time.time() - t0 > limit_s:
            return now
        time.sleep(0.02)


def _stop_engine():
    from . import basics, mpi_ops
    if lib.collHvdIsInitialized():
        lib.collHvdShutdown()  # fails fast on a revoked communicator; nothing to report
    basics._topology = None
    mpi_ops._drain_handles()


def _recover():
    """Shrinks the engine's communicator to the survivors and grows it back."""
    global _comm
    if _comm is None:
        raise HorovodInternalError("collective.torch: elastic recovery needs collectiverun --elastic "
                                   "(COLL_ELASTIC_DIR): the engine's communicator is not elastic")
    lib.collCommRevoke(_comm)
    _stop_engine()
    comm = _comm
    for _ in range(5):
        dead = _failed(comm)
        arr = (ctypes.c_int * max(1, len(dead)))(*dead)
        shrunk = _comm_t()
        if lib.collCommShrink(comm, arr, len(dead), ctypes.byref(shrunk)) == 0:
            break
    else:
        _ccheck(lib.collCommShrink(comm, arr, len(dead), ctypes.byref(shrunk)), "collCommShrink", comm)
    lib.collCommDestroy(comm)
    _comm = shrunk
    want = int(os.environ.get("COLL_ELASTIC_MAX_NP", "0"))
    n = _size(shrunk)
    if want > n and os.environ.get("COLL_ELASTIC_DIR"):
        rank = ctypes.c_int()
        lib.collCommUserRank(shrunk, ctypes.byref(rank))
        if rank.value == 0:  # ask the launcher for the replacements
            gid = _ID()
            _ccheck(lib.collCommGetGrowId(shrunk, ctypes.byref(gid)), "collCommGetGrowId", shrunk)
            d = os.environ["COLL_ELASTIC_DIR"]
            tmp = os.path.join(d, ".grow-%d" % os.getpid())
            with open(tmp, "w") as f:
                f.write("%d %d %s\n" % (want - n, want, bytes(gid).hex()))
            os.rename(tmp, os.path.join(d, "grow-%d-%d" % (os.getpid(), time.monotonic_ns())))
        grown = _comm_t()
        _ccheck(lib.collCommGrow(shrunk, want - n, ctypes.byref(grown)), "collCommGrow", shrunk)
        lib.collCommDestroy(shrunk)
        _comm = grown
    check(lib.collHvdInitComm(_comm), "init")


class State:
    """What survives a reset: commit() saves, restore() goes back, sync() shares rank 0's."""

    def __init__(self):
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for cb in self._reset_callbacks:
            cb()

    def commit(self):
        self.save()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """Plain attributes (epoch=0, batch=0, ...), synced with broadcast_object."""

    def __init__(self, **kwargs):
        super().__init__()
        self._keys = list(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, v)
        self._saved = None
        ObjectState.save(self)

    def save(self):
        self._saved = {k: copy.deepcopy(getattr(self, k)) for k in self._keys}

    def restore(self):
        for k, v in self._saved.items():
            setattr(self, k, copy.deepcopy(v))

    def sync(self):
        from .functions import broadcast_object
        if self._keys:
            values = broadcast_object({k: getattr(self, k) for k in self._keys}, root_rank=0,
                                      name="elastic.state")
            for k, v in values.items():
                setattr(self, k, v)
        self.save()


class TorchState(ObjectState):
    """A model and an optimizer (either may be None) plus plain attributes."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        self._model_saved = self._opt_saved = None
        super().__init__(**kwargs)

    def save(self):
        if self.model is not None:
            self._model_saved = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._opt_saved = copy.deepcopy(self.optimizer.state_dict())
        ObjectState.save(self)

    def restore(self):
        if self.model is not None and self._model_saved is not None:
            self.model.load_state_dict(self._model_saved)
        if self.optimizer is not None and self._opt_saved is not None:
            self.optimizer.load_state_dict(self._opt_saved)
        ObjectState.restore(self)

    def sync(self):
        from .functions import broadcast_optimizer_state, broadcast_parameters
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0)
        ObjectState.sync(self)


def _is_lost_rank(e):
    if isinstance(e, HorovodInternalError):
        return True
    if not isinstance(e, CollectiveError) or _comm is None:
        return False
    if e.code in (REMOTE_ERROR, TIMEOUT, REVOKED):
        return True
    # The engine may report a lost peer in its own words (it stopped): ask.
    ranks, n = (ctypes.c_int * 1)(), ctypes.c_int()
    return lib.collCommGetFailedRanks(_comm, ranks, 1, ctypes.byref(n)) == 0 and n.value > 0


def run(func):
    """Decorates `func(state, ...)`: on a lost rank, restore, shrink, grow, reset, sync, retry."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        reset = False
        while True:
            if reset:
                state.on_reset()
            try:
                state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                reset = True
                if e.skip_sync:
                    continue
            except Exception as e:  # noqa: BLE001 - only lost ranks are recovered
                if not _is_lost_rank(e):
                    raise
                state.restore()
                _recover()
                reset = True

    return wrapper
