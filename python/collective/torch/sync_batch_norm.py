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


# SyncBatchNorm reproduces the arithmetic of PyTorch's CPU batch_norm kernels (ATen's
# Normalization.cpp and cpu/batch_norm_kernel.cpp) over the global batch, so that each rank
# gets the values that BatchNorm would give for its rows of the concatenated batch:
#  - mean = float(sum(x) / N), the sum accumulated in float64;
#  - var_sum = float(sum of float32 (x - mean)^2, accumulated in float64), a second pass
#    around the global mean (a one-pass sum of squares rounds differently);
#  - invstd = float(1 / sqrt(double(var_sum / N) + eps)), var_sum / N in float32;
#  - output = x * alpha + beta with alpha = invstd * w, beta = b - mean * alpha, the
#    multiply-add of beta fused where the kernel's build fuses it;
#  - running_mean = m * mean + (1 - m) * running_mean in float32, running_var =
#    m * double(var_sum / (N - 1)) + (1 - m) * running_var, m the momentum as float32;
#  - backward: per (sample, channel) row the kernel's own float32 reductions of dy and of
#    (x - mean) * dy, summed in float64 over rows and ranks; k = dotp * invstd^2 / N and
#    grad_mean = sum / N as the kernel rounds them; dx = (dy - grad_mean - (x - mean) * k)
#    * invstd * w, fused as the kernel is.
# The reductions are exact replays only where torch's kernel accumulates in float64: input
# with more than one value per sample and channel (N, C, L...). For (N, C) input torch sums
# the batch in float32 (and in a split that depends on its thread count), which no split
# over ranks can replay; there the results agree to float32 rounding of those sums.

def _fma(a, b, c):
    """a * b + c rounded once to float32 (the product of two float32 is exact in float64)."""
    return torch.addcmul(c.double(), a.double(), b.double()).float()


def _kernel_fuses():
    """Whether this PyTorch's CPU batch_norm kernel fuses its multiply-adds (FMA), found
    once by replaying a small forward and backward both ways."""
    global _fuses
    if _fuses is None:
        g = torch.Generator().manual_seed(12345)
        x = torch.randn(3, 2, 11, generator=g) * 2 + 0.5
        dy = torch.randn(3, 2, 11, generator=g)
        w = torch.tensor([0.7, 1.3])
        b = torch.tensor([-0.2, 0.3])
        out, mean, invstd = torch.native_batch_norm(x, w, b, None, None, True, 0.0, 1e-5)
        alpha = invstd * w
        beta = _fma(-mean, alpha, b)
        fused_out = torch.equal(_apply_affine(x, alpha, beta), out)
        gi = torch.ops.aten.native_batch_norm_backward(
            dy, x, w, None, None, mean, invstd, True, 1e-5, [True, False, False])[0]
        sum_dy, dotp = _row_sums(x, dy, mean)
        ref = _input_grad(x, dy, w, mean, invstd, sum_dy, dotp, x.numel() // 2, True)
        _fuses = fused_out and torch.equal(ref, gi)
    return _fuses


_fuses = None


def _apply_affine(x, alpha, beta):
    """x * alpha + beta per channel, by the batch_norm kernel itself (its eval path with
    mean 0, variance 1 and eps 0 has alpha and beta as they are)."""
    c = x.shape[1]
    return F.batch_norm(x, torch.zeros(c, dtype=x.dtype), torch.ones(c, dtype=x.dtype),
                        alpha, beta, False, 0.0, 0.0)


def _row_sums(x, dy, mean):
    """Per channel sum(dy) and sum((x - mean) * dy) in float64, from the kernel's own
    per-row reductions: viewed as one sample whose channels are this rank's (sample,
    channel) rows, the backward kernel returns each row's sums (invstd 1) as it computes
    them for the batch."""
    n, c = x.shape[0], x.shape[1]
    rows = n * c
    _, dotp_rows, sum_rows = torch.ops.aten.native_batch_norm_backward(
        dy.reshape(1, rows, -1), x.reshape(1, rows, -1), None, None, None,
        mean.repeat(n), torch.ones(rows, dtype=x.dtype), True, 0.0, [False, True, True])
    return (sum_rows.view(n, c).double().sum(0), dotp_rows.view(n, c).double().sum(0))


def _input_grad(x, dy, w, mean, invstd, sum_dy, dotp, count, fused):
    count = int(count)
    k = dotp.to(x.dtype) * invstd * invstd / count
    grad_mean = (sum_dy / count).to(x.dtype)
    xm = x - _per_channel(mean, x)
    t = dy - _per_channel(grad_mean, x)
    if fused:
        d = _fma(-xm, _per_channel(k, x).expand_as(xm), t)
    else:
        d = t - xm * _per_channel(k, x)
    d = d * _per_channel(invstd, x)
    if w is not None:
        d = d * _per_channel(w, x)
    return d


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, name, process_set):
        compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        fused = compute == torch.float32 and _kernel_fuses()
        xc = x.contiguous().to(compute)
        channels = xc.shape[1]
        dims = _reduce_dims(xc)
        # Two all-reduces in float64: [count, sum] per channel, then the sum of squared
        # deviations from the global mean. Ranks may hold different numbers of samples.
        n = xc.numel() // max(channels, 1)
        stats = torch.zeros(1 + channels, dtype=torch.float64)
        stats[0] = n
        if n > 0:
            torch.sum(xc.double(), dims, out=stats[1:])
        allreduce_(stats, name=name + ".stats", op=Sum, process_set=process_set)
        count = int(stats[0].item())
        if count <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel over all "
                             f"ranks in training, got input of shape {list(x.shape)} and {count} in all")
        mean = (stats[1:] / count).to(compute)
        var_sum = torch.zeros(channels, dtype=torch.float64)
        if n > 0:
            dev = xc - _per_channel(mean, xc)
            torch.sum((dev * dev).double(), dims, out=var_sum)
        allreduce_(var_sum, name=name + ".var", op=Sum, process_set=process_set)
        var_sum = var_sum.to(compute)
        var = (var_sum / count).double()
        invstd = 1 / torch.sqrt(var + eps)
        if eps == 0:  # as torch: 0, not inf, for a channel of equal values
            invstd = torch.where(var != 0, invstd, torch.zeros_like(var))
        invstd = invstd.to(compute)
        if running_mean is not None:
            m = torch.tensor(momentum, dtype=running_mean.dtype)
            running_mean.copy_(m * mean.to(running_mean.dtype) + (1 - m) * running_mean)
        if running_var is not None:
            m = torch.tensor(momentum, dtype=running_var.dtype)
            unbiased = (var_sum / (count - 1)).double()
            running_var.copy_(m.double() * unbiased + ((1 - m) * running_var).double())
        w = weight.to(compute) if weight is not None else None
        alpha = invstd * w if w is not None else invstd
        b = bias.to(compute) if bias is not None else torch.zeros_like(alpha)
        beta = _fma(-mean, alpha, b) if fused else b - mean * alpha
        out = _apply_affine(xc, alpha, beta)
        ctx.save_for_backward(xc, w, mean, invstd)
        ctx.count = count
        ctx.fused = fused
        ctx.name = name
        ctx.process_set = process_set
        ctx.in_dtype = x.dtype
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        xc, w, mean, invstd = ctx.saved_tensors
        g = grad_out.contiguous().to(xc.dtype)
        channels = xc.shape[1]
        if xc.shape[0] > 0:
            sum_dy, dotp = _row_sums(xc, g, mean)
        else:
            sum_dy = dotp = torch.zeros(channels, dtype=torch.float64)
        # This rank's share of the parameters' gradients (the optimizer sums the shares).
        grad_weight = (dotp * invstd.double()).to(xc.dtype) if ctx.needs_input_grad[1] else None
        grad_bias = sum_dy.to(xc.dtype) if ctx.needs_input_grad[2] else None
        grad_input = None
        if ctx.needs_input_grad[0]:
            sums = torch.cat([sum_dy, dotp])
            allreduce_(sums, name=ctx.name + ".grad", op=Sum, process_set=ctx.process_set)
            grad_input = _input_grad(xc, g, w, mean, invstd, sums[:channels], sums[channels:],
                                     ctx.count, ctx.fused).to(ctx.in_dtype)
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
