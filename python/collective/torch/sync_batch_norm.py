"""SyncBatchNorm: batch normalisation with statistics over every rank's batch (CPU)."""
import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from .basics import ProcessSet, add_process_set, global_process_set, size
from .mpi_ops import Sum, allreduce_

_instances = itertools.count()
_own_set = None


def _sync_set(process_set):
    """The process set SyncBatchNorm's all-reduces go through. They are small and block
    forward and backward; on the global set they would queue behind the gradients that
    DistributedOptimizer has in flight during backward. So for the global set they use a
    set of the same ranks with its own engine, made (collectively, on every rank) at the
    first synchronised forward, and made again after a shutdown and init."""
    global _own_set
    if process_set is not global_process_set:
        return process_set
    if _own_set is None or _own_set.process_set_id is None:
        _own_set = add_process_set(ProcessSet(range(size())))
    return _own_set


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


def _per_channel(v, x):
    return v.view([1, -1] + [1] * (x.dim() - 2))


def _local_moments(x):
    """This rank's per-channel mean and biased variance (one pass, PyTorch's own kernel)."""
    try:
        return torch.batch_norm_update_stats(x, None, None, 0.0)
    except (AttributeError, RuntimeError):  # not in every PyTorch build
        var, mean = torch.var_mean(x, _reduce_dims(x), unbiased=False)
        return mean, var


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, name, process_set):
        compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        xc = x.contiguous().to(compute)
        channels = xc.shape[1]
        # One all-reduce of [count, sum, sum of squares] per channel, in float64, built from
        # this rank's mean and variance (more exact than summing squares in float32);
        # ranks may hold different numbers of samples.
        n = xc.numel() // max(channels, 1)
        stats = torch.empty(1 + 2 * channels, dtype=torch.float64)
        stats[0] = n
        if n > 0:
            mean_l, var_l = (t.double() for t in _local_moments(xc))
            torch.mul(mean_l, n, out=stats[1:1 + channels])
            torch.mul(var_l + mean_l * mean_l, n, out=stats[1 + channels:])
        else:
            stats[1:].zero_()
        allreduce_(stats, name=name + ".stats", op=Sum, process_set=process_set)
        count = stats[0].item()
        if count <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel over all "
                             f"ranks in training, got input of shape {list(x.shape)} and {count:.0f} in all")
        mean64 = stats[1:1 + channels] / count
        var64 = (stats[1 + channels:] / count - mean64 * mean64).clamp_(min=0)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean64.to(running_mean.dtype), alpha=momentum)
        if running_var is not None:
            unbiased = var64 * (count / (count - 1))
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        mean, var = mean64.to(compute), var64.to(compute)
        w = weight.to(compute) if weight is not None else None
        b = bias.to(compute) if bias is not None else None
        out = F.batch_norm(xc, mean, var, w, b, False, 0.0, eps)
        ctx.save_for_backward(xc, w, mean, var)
        ctx.eps = eps
        ctx.count = count
        ctx.name = name
        ctx.process_set = process_set
        ctx.in_dtype = x.dtype
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        xc, w, mean, var = ctx.saved_tensors
        g = grad_out.to(xc.dtype)
        channels = xc.shape[1]
        # PyTorch's eval-mode kernel, given the global statistics, yields in one pass
        # g * w * invstd and this rank's sum(g) and sum(g * xhat); the input's gradient
        # then needs the global sums of the latter two.
        gi, sum_dy_xhat, sum_dy = torch.ops.aten.native_batch_norm_backward(
            g, xc, w, mean, var, None, None, False, ctx.eps,
            [ctx.needs_input_grad[0], True, True])
        grad_weight = sum_dy_xhat if ctx.needs_input_grad[1] else None
        grad_bias = sum_dy if ctx.needs_input_grad[2] else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            sums = torch.cat([sum_dy, sum_dy_xhat]).double()
            allreduce_(sums, name=ctx.name + ".grad", op=Sum, process_set=ctx.process_set)
            invstd = torch.rsqrt(var.double() + ctx.eps)
            scale = invstd if w is None else invstd * w.double()
            mean_dy = sums[:channels] / ctx.count
            mean_dy_xhat = sums[channels:] / ctx.count
            # w * invstd * (g - mean_dy - xhat * mean_dy_xhat) = gi - x * alpha - beta
            alpha = scale * invstd * mean_dy_xhat
            beta = scale * mean_dy - mean.double() * alpha
            gi.sub_(_per_channel(beta.to(xc.dtype), xc))
            gi.addcmul_(xc, _per_channel(alpha.to(xc.dtype), xc), value=-1)
            grad_input = gi.to(ctx.in_dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Drop-in for torch.nn.BatchNorm1d/2d/3d whose training-mode statistics cover the
    batches of every rank of `process_set` (which may differ in size). Running statistics
    are updated as PyTorch does (unbiased variance over the global count); eval mode uses
    them; with one rank it is plain batch normalisation.

    Each instance's all-reduces are named after the order of construction
    ('sync_batch_norm.<k>'): build the model the same way on every rank."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set, device=None,
                 dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device=device, dtype=dtype)
        if not isinstance(process_set, ProcessSet):
            raise TypeError(f"SyncBatchNorm: process_set must be a ProcessSet, not {process_set!r}")
        self.process_set = process_set
        self._coll_name = f"sync_batch_norm.{next(_instances)}"

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2-D input (N, C, ...), got {x.dim()}-D")

    def forward(self, x):
        self._check_input_dim(x)
        if x.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: input has {x.shape[1]} channels, the module "
                             f"{self.num_features}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        tracked = not self.training or self.track_running_stats
        running_mean = self.running_mean if tracked else None
        running_var = self.running_var if tracked else None
        if not batch_stats or self.process_set.size() == 1:
            return F.batch_norm(x, running_mean, running_var, self.weight, self.bias, batch_stats,
                                factor, self.eps)
        return _SyncBatchNormFunction.apply(x, self.weight, self.bias, running_mean, running_var,
                                            self.eps, factor, self._coll_name,
                                            _sync_set(self.process_set))

    @classmethod
    def convert_sync_batchnorm(cls, module, process_set=global_process_set):
        """Returns `module` with every torch BatchNorm*d replaced by a SyncBatchNorm holding
        the same parameters and running statistics."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_set=process_set)
            with torch.no_grad():
                if module.affine:
                    out.weight = module.weight
                    out.bias = module.bias
                out.running_mean = module.running_mean
                out.running_var = module.running_var
                out.num_batches_tracked = module.num_batches_tracked
            out.train(module.training)
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_set))
        return out


__all__ = ["SyncBatchNorm"]
