"""A drop-in for horovod.torch on CPU PyTorch: `import collective.torch as hvd`.

Runs on libcollective's Horovod-style engine (tensor fusion, negotiation, compression,
process sets) through its C interface. Launch one process per rank:

    collectiverun -np 4 /usr/bin/python3 train.py

See doc/python.md for the API and how it differs from horovod.torch.
"""
from .. import CollectiveError, __version__
from .basics import (ProcessSet, add_process_set, cross_rank, cross_size, global_process_set,
                     init, is_initialized, local_rank, local_size, rank, remove_process_set,
                     shutdown, size)
from . import elastic
from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .mpi_ops import (Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                      allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                      barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                      grouped_allreduce_async_, join, poll, reducescatter, reducescatter_async,
                      synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm

__all__ = [
    "CollectiveError", "__version__",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "Sum", "Average", "Min", "Max", "Product", "Compression",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "poll", "synchronize", "barrier", "join",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "SyncBatchNorm",
]
