"""A drop-in for horovod.torch on CPU PyTorch: `import collective.torch as hvd`.

Runs on libcollective's Horovod-style engine (tensor fusion, negotiation, compression,
process sets) through its C interface. Launch one process per rank:

    collectiverun -np 4 /usr/bin/python3 train.py

See doc/python.md for the API and how it differs from horovod.torch.
"""
from .. import CollectiveError, CollectiveValueError, __version__
from .basics import (ProcessSet, add_process_set, ccl_built, cross_rank, cross_size,
                     cuda_built, ddl_built, global_process_set, gloo_built, gloo_enabled, init,
                     is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
                     mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set,
                     rocm_built, shutdown, size)
from . import elastic
from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .mpi_ops import (Adasum, Average, AverageReproducible, Max, Min, Product, Sum,
                      SumReproducible, allgather, allgather_async,
                      allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall,
                      alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
                      broadcast_async_, grouped_allgather, grouped_allgather_async,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                      grouped_allreduce_async_, grouped_reducescatter,
                      grouped_reducescatter_async, join, poll, reducescatter,
                      reducescatter_async, sparse_allreduce_async, synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm
from .timeline import start_timeline, stop_timeline

# horovod's name for a failed collective operation: catching it catches ours.
HorovodInternalError = CollectiveError

__all__ = [
    "CollectiveError", "CollectiveValueError", "HorovodInternalError", "__version__",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "is_homogeneous",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "gloo_built", "gloo_enabled",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "Sum", "Average", "Min", "Max", "Product", "SumReproducible", "AverageReproducible", "Adasum",
    "Compression",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "grouped_allgather", "grouped_allgather_async", "grouped_reducescatter",
    "grouped_reducescatter_async", "sparse_allreduce_async",
    "poll", "synchronize", "barrier", "join",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "SyncBatchNorm",
    "start_timeline", "stop_timeline",
]
