"""Last: handles nobody synchronized, then shutdown."""
import gc

import torch

from collective.torch import mpi_ops


def case_dropped_handle_then_shutdown(ctx):
    hvd = ctx.hvd
    hvd.barrier()
    before = len(mpi_ops._handles)
    # Dropped at once: the handle map keeps the tensors alive for the engine.
    hvd.allreduce_async(torch.ones(100000) * ctx.rank, name="dropped.out_of_place")
    hvd.allreduce_async_(torch.ones(1000), name="dropped.in_place")
    gc.collect()
    assert len(mpi_ops._handles) == before + 2
    hvd.shutdown()
    assert not hvd.is_initialized()
    assert len(mpi_ops._handles) == 0
    try:
        hvd.allreduce(torch.ones(2))
    except ValueError:
        pass
    else:
        raise AssertionError("allreduce after shutdown was accepted")
