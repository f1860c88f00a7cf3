"""Starting and stopping the engine, topology, process sets."""
import atexit
import ctypes

from ._lib import check, lib

_topology = None  # (rank, size, local_rank, local_size, cross_rank, cross_size)


def _require_init(what):
    if not lib.collHvdIsInitialized():
        raise ValueError(f"collective.torch: {what} was called before init() (or after shutdown()); "
                         "call collective.torch.init() first")


def init(process_sets=None):
    """Starts the engine from the launcher's environment (collectiverun, mpirun, Slurm).

    A second call while it runs does nothing. `process_sets`: ProcessSet objects (or
    lists of ranks) to register right away, as add_process_set() would (every rank must
    pass the same ones)."""
    global _topology
    if not lib.collHvdIsInitialized():
        from . import elastic
        if elastic._enabled():  # collectiverun --elastic: a communicator that can shrink and grow
            elastic._init_engine()
        else:
            check(lib.collHvdInit(), "init")
        _topology = None
    for ps in process_sets or []:
        add_process_set(ps)


def shutdown():
    """Stops the engine on every rank (at their next round). Operations still pending fail;
    their handles can still be synchronized (raising) or dropped. Safe to call twice."""
    global _topology
    if lib.collHvdIsInitialized():
        check(lib.collHvdShutdown(), "shutdown")
    from . import elastic
    elastic._destroy_comm()
    _topology = None
    from . import mpi_ops  # the handle map lives there; import late to avoid a cycle
    mpi_ops._drain_handles()
    for ps in list(_registered.values()):
        ps.process_set_id = None
    _registered.clear()


def is_initialized():
    return bool(lib.collHvdIsInitialized())


def _topo(what):
    global _topology
    _require_init(what + "()")
    if _topology is None:
        vals = [ctypes.c_int() for _ in range(6)]
        check(lib.collHvdTopology(*[ctypes.byref(v) for v in vals]), what)
        _topology = tuple(v.value for v in vals)
    return _topology


def rank():
    return _topo("rank")[0]


def size():
    return _topo("size")[1]


def local_rank():
    return _topo("local_rank")[2]


def local_size():
    return _topo("local_size")[3]


def cross_rank():
    return _topo("cross_rank")[4]


def cross_size():
    return _topo("cross_size")[5]


# What horovod's build queries ask, answered for this package: its operations run on
# libcollective's engine over its own transports (shared memory, TCP), started by
# collectiverun, mpirun or Slurm; neither MPI, Gloo, NCCL, oneCCL nor DDL carries them, and
# the package handles CPU tensors only.
def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    raise ValueError("collective.torch does not run on MPI (mpi_enabled() is False), so MPI "
                     "multi-threading does not apply")


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return local_size() * cross_size() == size()


class ProcessSet:
    """A subset of the global ranks with its own engine queue. Build one from a list of
    global ranks and register it with add_process_set() (or init(process_sets=...)).
    Operations take it as `process_set=`; their root_rank is a global rank (a member)."""

    def __init__(self, ranks):
        try:
            self.ranks = sorted(int(r) for r in ranks)
        except (TypeError, ValueError):
            raise TypeError(f"ProcessSet: expected a list of ranks, not {ranks!r}") from None
        if len(set(self.ranks)) != len(self.ranks):
            raise ValueError(f"ProcessSet: ranks {list(ranks)} contain duplicates")
        self.process_set_id = None

    def _info(self):
        if self.process_set_id is None:
            raise ValueError(f"{self!r} is not registered: pass it to add_process_set() first")
        _require_init("ProcessSet")
        r, s = ctypes.c_int(), ctypes.c_int()
        check(lib.collHvdProcessSetInfo(self.process_set_id, ctypes.byref(r), ctypes.byref(s)),
              f"process set {self.process_set_id}")
        return r.value, s.value

    def size(self):
        """Number of ranks in the set."""
        return self._info()[1]

    def rank(self):
        """This process's rank within the set, -1 when it is not a member."""
        return self._info()[0]

    def included(self):
        return self._info()[0] >= 0

    def _id(self):
        if self.process_set_id is None:
            raise ValueError(f"{self!r} is not registered (add_process_set) or was removed")
        return self.process_set_id

    def __repr__(self):
        who = "global" if self.process_set_id == 0 else f"ranks={self.ranks}"
        return f"ProcessSet({who}, id={self.process_set_id})"


class _GlobalProcessSet(ProcessSet):
    def __init__(self):  # pylint: disable=super-init-not-called -- no ranks of its own
        self.process_set_id = 0

    @property
    def ranks(self):
        """Every rank of the job (needs init())."""
        return list(range(size()))


global_process_set = _GlobalProcessSet()
_registered = {}  # id -> ProcessSet (not the global one)


def add_process_set(process_set):
    """Registers a process set (a ProcessSet or a list of global ranks). Collective: every
    rank calls it with the same ranks, also the ranks outside the set. Returns the
    ProcessSet."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if isinstance(ps, _GlobalProcessSet):
        raise ValueError("the global process set is always registered")
    if ps.process_set_id is not None:
        raise ValueError(f"{ps!r} is already registered")
    _require_init("add_process_set()")
    arr = (ctypes.c_int * len(ps.ranks))(*ps.ranks)
    ident = ctypes.c_int()
    check(lib.collHvdAddProcessSet(arr, len(ps.ranks), ctypes.byref(ident)),
          f"add_process_set({ps.ranks})")
    ps.process_set_id = ident.value
    _registered[ident.value] = ps
    return ps


def remove_process_set(process_set):
    """Unregisters a process set (collective over all ranks). Returns False when it was not
    registered (or is the global one), True once removed."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"remove_process_set expects a ProcessSet, not {type(process_set).__name__}")
    if process_set.process_set_id in (None, 0):
        return False
    _require_init("remove_process_set()")
    check(lib.collHvdRemoveProcessSet(process_set.process_set_id),
          f"remove_process_set({process_set.ranks})")
    _registered.pop(process_set.process_set_id, None)
    process_set.process_set_id = None
    return True


def _at_exit():
    try:
        shutdown()
    except Exception:  # noqa: BLE001 -- nothing left to report to at interpreter exit
        pass


atexit.register(_at_exit)

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "cross_rank", "cross_size", "ProcessSet", "global_process_set", "add_process_set",
           "remove_process_set", "mpi_built", "mpi_enabled", "mpi_threads_supported",
           "gloo_built", "gloo_enabled", "nccl_built", "ddl_built", "ccl_built", "cuda_built",
           "rocm_built", "is_homogeneous"]
