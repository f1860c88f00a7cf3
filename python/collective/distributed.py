"""libcollective as a torch.distributed backend.

Importing this module registers the backend name "collective" with
torch.distributed.Backend.register_backend; then

    import collective.distributed
    torch.distributed.init_process_group("collective")

works with every init method c10d has (env:// as torchrun sets it, tcp://, file://, an
explicit store=). The ranks exchange the library's unique id through the c10d store they
are given; the process group's timeout bounds every wait of the library.

Under collectiverun, mpirun or srun (no MASTER_ADDR in the environment),
collective.distributed.init_process_group() makes the store itself from the launcher's
environment; with MASTER_ADDR set it is torch.distributed.init_process_group.

torch.distributed.monitored_barrier refuses every backend but Gloo;
collective.distributed.monitored_barrier takes groups of this backend (and hands Gloo
groups to torch's).
"""
import datetime
import importlib.util
import os
import socket

import torch
import torch.distributed as dist

BACKEND = "collective"


def _load_extension():
    # $COLL_C10D_MODULE names the built module in a build tree (the tests set it); an
    # installed package has it beside this file.
    path = os.environ.get("COLL_C10D_MODULE")
    if path:
        spec = importlib.util.spec_from_file_location("collective._c10d", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    from . import _c10d  # noqa: WPS433 (a compiled module)
    return _c10d


_ext = _load_extension()


def _create(store, rank, size, timeout):
    return _ext.create_process_group(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)


def _launcher_rank_size():
    for rank_var, size_var in (("COLL_RANK", "COLL_SIZE"),
                               ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMI_RANK", "PMI_SIZE"),
                               ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return None


def _address_toward(host):
    """This host's address on the route toward `host` (or its name's address)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def _store_from_launcher(rank, size, timeout):
    """A TCPStore served by rank 0, whose address the ranks learn through the library's own
    rendezvous (a communicator of the launcher's job, for one broadcast)."""
    store = None
    text = ""
    if rank == 0:
        root = os.environ.get("COLL_ROOT_ADDR", "")
        host = root.rsplit(":", 1)[0].strip("[]") if root else ""
        addr = _address_toward(host) if host else socket.gethostbyname(socket.gethostname())
        store = dist.TCPStore(addr, 0, size, True, timeout, wait_for_workers=False)
        text = "%s:%d" % (addr, store.port)
    text = _ext.broadcast_from_launcher_root(text)
    if rank != 0:
        addr, port = text.rsplit(":", 1)
        store = dist.TCPStore(addr, int(port), size, False, timeout)
    return store


def init_process_group(timeout=datetime.timedelta(minutes=30), **kwargs):
    """torch.distributed.init_process_group("collective", ...), also under a launcher that
    sets no MASTER_ADDR (collectiverun, mpirun, srun)."""
    kwargs.setdefault("backend", BACKEND)
    if ("store" not in kwargs and "init_method" not in kwargs and "MASTER_ADDR" not in os.environ
            and _launcher_rank_size() is not None):
        rank, size = _launcher_rank_size()
        kwargs["store"] = _store_from_launcher(rank, size, timeout)
        kwargs["rank"] = rank
        kwargs["world_size"] = size
    dist.init_process_group(timeout=timeout, **kwargs)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for groups of the "collective" backend (groups
    of the "gloo" backend go to torch's own).

    Every rank other than 0 checks in with rank 0 and waits for its release; rank 0 waits
    at most `timeout` (a datetime.timedelta; None: the group's timeout) for the check-ins
    and raises RuntimeError naming the first rank that did not arrive ("Rank 2 failed to
    pass monitoredBarrier in 5000 ms"), or with wait_all_ranks=True every such rank
    ("Ranks 1, 2 failed to pass ..."). The other ranks raise RuntimeError when rank 0's
    release does not come within `timeout`. After a failure the group is unusable on
    every rank: its operations raise RuntimeError; destroy it and make a new one.

    group: a process group this rank belongs to (None: the default group). A group this
    rank is not in, or a timeout that is not a positive timedelta, raises at once.
    """
    if timeout is not None:
        if not isinstance(timeout, datetime.timedelta):
            raise TypeError("monitored_barrier: timeout must be a datetime.timedelta or None, got %r" % (timeout,))
        if timeout < datetime.timedelta(milliseconds=1):
            raise ValueError("monitored_barrier: timeout must be at least 1 ms, got %s" % (timeout,))
    if group is not None and group == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("monitored_barrier: rank %d is not a member of the given group" % dist.get_rank())
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError("monitored_barrier: group must be a process group or None, got %r" % (group,))
    pg = dist.distributed_c10d._get_default_group() if group is None else group
    if pg not in dist.distributed_c10d._pg_map:
        raise ValueError("monitored_barrier: the group is not a live process group of torch.distributed "
                         "(destroyed, or made outside it)")
    backend = str(dist.get_backend(pg)).lower()
    if backend == dist.Backend.GLOO:
        return dist.monitored_barrier(group=pg, timeout=timeout, wait_all_ranks=wait_all_ranks)
    if backend != BACKEND:
        raise RuntimeError("monitored_barrier: the group's backend is %r; this takes groups of the %r and "
                           "'gloo' backends" % (backend, BACKEND))
    if timeout is None:
        return pg.monitored_barrier(wait_all_ranks=bool(wait_all_ranks))
    return pg.monitored_barrier(timeout, wait_all_ranks=bool(wait_all_ranks))
