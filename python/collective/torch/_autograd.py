"""The differentiable forms of the blocking collectives (horovod.torch's autograd
functions): each forward pass is the collective itself, each backward pass the
collective that carries the gradient back, named `<name>.grad`."""
import torch

from .mpi_ops import (Average, AverageReproducible, Sum, _scale, allgather_async, allreduce_async, alltoall_async,
                      broadcast_async, grouped_allreduce_async, reducescatter_async,
                      synchronize)


def _grad_name(name):
    """Backward passes run in the same order on every rank, so unnamed ones can take
    generated names; named ones derive theirs."""
    return None if name is None else name + ".grad"


class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set,
                compression):
        ctx.spec = (name, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, process_set, compression))

    @staticmethod
    def backward(ctx, grad):
        name, op, pre, post, ps = ctx.spec
        g = synchronize(allreduce_async(grad, None, _grad_name(name), op, pre, post, ps))
        return g, None, None, None, None, None, None


class _GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, compression,
                *tensors):
        ctx.spec = (name, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), None, name, op,
                                                         prescale_factor, postscale_factor,
                                                         process_set, compression)))

    @staticmethod
    def backward(ctx, *grads):
        name, op, pre, post, ps = ctx.spec
        gs = synchronize(grouped_allreduce_async(list(grads), None, _grad_name(name), op, pre,
                                                 post, ps))
        return (None,) * 6 + tuple(gs)


class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.spec = (root_rank, name, process_set)
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        root, name, ps = ctx.spec
        g = synchronize(allreduce_async(grad, None, _grad_name(name), Sum, process_set=ps))
        if ps.rank() != root:
            g.zero_()
        return g, None, None, None


class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.spec = (name, process_set, tensor.shape)
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        name, ps, shape = ctx.spec
        g = synchronize(allreduce_async(grad, None, _grad_name(name), Sum, process_set=ps))
        rows = shape[0] if len(shape) else 1
        dims_name = None if name is None else name + ".grad.rows"
        dims = synchronize(allgather_async(torch.tensor([rows], dtype=torch.int64), dims_name, ps))
        start = int(dims[:ps.rank()].sum())
        return g.narrow(0, start, rows).reshape(shape), None, None


class _AlltoallFn(torch.autograd.Function):
    """Rows that went from rank a to rank b come back from b to a: the backward pass is the
    all-to-all of the gradient with the splits this rank received (which are what every
    sender used for it)."""
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.spec = (name, process_set, tensor.shape)
        if splits is None:
            out = synchronize(alltoall_async(tensor, None, name, process_set))
            received = None
        else:
            out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        if received is None:  # autograd needs a tensor in every output slot
            received = torch.empty(0, dtype=torch.int64)
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        name, ps, shape = ctx.spec
        g = synchronize(alltoall_async(grad.contiguous(), ctx.received, _grad_name(name), ps))
        if ctx.received is not None:
            g = g[0]
        return g.reshape(shape), None, None, None


class _ReducescatterFn(torch.autograd.Function):
    """Rank r's output is post * sum over ranks k of pre * (k's rows of r's share), over the
    set's size for Average (the engine makes every rank pass the same factors). So each
    rank's gradient is the all-gather of the output gradients, times the same scale."""
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        scale = _scale(prescale_factor, "reducescatter", "prescale_factor") * \
            _scale(postscale_factor, "reducescatter", "postscale_factor")
        if op in (Average, AverageReproducible):
            scale /= process_set.size()
        ctx.spec = (name, process_set, tensor.shape, scale)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad):
        name, ps, shape, scale = ctx.spec
        g = synchronize(allgather_async(grad.contiguous(), _grad_name(name), ps))
        if scale != 1.0:
            g = g * scale
        return g.reshape(shape), None, None, None, None, None
