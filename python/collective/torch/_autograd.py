"""The differentiable forms of the blocking collectives (horovod.torch's autograd
functions): each forward pass is the collective itself, each backward pass the
collective that carries the gradient back, named `<name>.grad`."""
import torch

from .basics import rank
from .mpi_ops import (Average, AverageReproducible, Sum, SumReproducible, _scale, allgather_async,
                      allreduce_async, alltoall_async, broadcast_async, grouped_allgather_async,
                      grouped_allreduce_async, grouped_reducescatter_async, reducescatter_async,
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
    """As horovod.torch: the gradient is the average of every rank's output gradient on
    the root (root_rank is a global rank) and zero elsewhere."""
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.spec = (root_rank, name, process_set)
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        root, name, ps = ctx.spec
        g = synchronize(allreduce_async(grad.contiguous(), None, _grad_name(name), Average,
                                        process_set=ps))
        if rank() != root:
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
        # As horovod.torch: this rank's rows of the average of every rank's output gradient.
        g = synchronize(allreduce_async(grad.contiguous(), None, _grad_name(name), Average,
                                        process_set=ps))
        rows = shape[0] if len(shape) else 1
        dims_name = None if name is None else name + ".grad.rows"
        dims = synchronize(allgather_async(torch.tensor([rows], dtype=torch.int64), dims_name, ps))
        start = int(dims[:ps.rank()].sum())
        return g.narrow(0, start, rows).reshape(shape), None, None


class _AlltoallFn(torch.autograd.Function):
    """Rows that went from rank a to rank b come back from b to a: the backward pass is the
    all-to-all of the gradient with the splits this rank received (which are what every
    sender used for it), also when the forward pass split evenly."""
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.spec = (name, process_set, tensor.shape)
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set,
                                                   _received_splits=True))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        name, ps, shape = ctx.spec
        g, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received, _grad_name(name), ps))
        return g.reshape(shape), None, None, None


def _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor):
    """horovod.torch's factor on a reduce-scatter's output gradient before it is
    all-gathered back: the set's size for Sum, 1 for Average, times both scale factors."""
    scale = _scale(prescale_factor, "reducescatter", "prescale_factor") * \
        _scale(postscale_factor, "reducescatter", "postscale_factor")
    if op in (Sum, SumReproducible):
        scale *= process_set.size()
    return scale


class _ReducescatterFn(torch.autograd.Function):
    """The gradient is the all-gather of every rank's output gradient, scaled as
    horovod.torch scales it (_reducescatter_grad_scale)."""
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.spec = (name, process_set, tensor.shape,
                    _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor))
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad):
        name, ps, shape, scale = ctx.spec
        if scale != 1.0:
            grad = grad * scale
        g = synchronize(allgather_async(grad.contiguous(), _grad_name(name), ps))
        return g.reshape(shape), None, None, None, None, None


def _offsets(rows, name, process_set):
    """Every rank's first-dimension length for each all-gathered tensor: this rank's start row
    in each gathered gradient."""
    dims_name = None if name is None else name + ".grad.rows"
    dims = synchronize(allgather_async(torch.tensor(rows, dtype=torch.int64).view(1, -1),
                                       dims_name, process_set))
    return dims[:process_set.rank()].sum(0).tolist()


class _GroupedAllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.spec = (name, process_set, [t.shape for t in tensors])
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        name, ps, shapes = ctx.spec
        # As horovod.torch: this rank's rows of the average of the output gradients.
        gs = synchronize(grouped_allreduce_async([g.contiguous() for g in grads], None,
                                                 _grad_name(name), Average, process_set=ps))
        rows = [s[0] if len(s) else 1 for s in shapes]
        starts = _offsets(rows, name, ps)
        return (None, None) + tuple(g.narrow(0, int(a), n).reshape(s)
                                    for g, a, n, s in zip(gs, starts, rows, shapes))


class _GroupedReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.spec = (name, process_set, [t.shape for t in tensors],
                    _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor))
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set,
                                                             prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        name, ps, shapes, scale = ctx.spec
        gs = [(g * scale if scale != 1.0 else g).contiguous() for g in grads]
        outs = synchronize(grouped_allgather_async(gs, _grad_name(name), ps))
        return (None,) * 5 + tuple(o.reshape(s) for o, s in zip(outs, shapes))
