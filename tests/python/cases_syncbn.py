"""SyncBatchNorm against torch's BatchNorm over the concatenated global batch, with a
different batch size on every rank."""
import torch
import torch.nn as nn


def rows(r):
    return 2 + 3 * r  # rank r's batch size


def global_batch(size, shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    n = sum(rows(r) for r in range(size))
    x = (torch.randn((n,) + shape, generator=g) * 2 + 0.5).to(dtype)
    grad = torch.randn((n,) + shape, generator=g).to(dtype)
    return x, grad


def check(ctx, ref_cls, shape, dtype=torch.float32, momentum=0.1, affine=True, track=True,
          iters=2, tol=1e-5):
    hvd = ctx.hvd
    channels = shape[0]
    lo = sum(rows(r) for r in range(ctx.rank))
    hi = lo + rows(ctx.rank)
    ref = ref_cls(channels, momentum=momentum, affine=affine, track_running_stats=track).to(dtype)
    sbn = hvd.SyncBatchNorm(channels, momentum=momentum, affine=affine,
                            track_running_stats=track).to(dtype)
    if affine:
        with torch.no_grad():
            w = torch.linspace(0.5, 1.5, channels, dtype=dtype)
            b = torch.linspace(-0.2, 0.3, channels, dtype=dtype)
            ref.weight.copy_(w), ref.bias.copy_(b)
            sbn.weight.copy_(w), sbn.bias.copy_(b)
    what = f"{ref_cls.__name__} {shape} {dtype} momentum={momentum} affine={affine} track={track}"
    for it in range(iters):
        x, gout = global_batch(ctx.size, shape, dtype, seed=7 + it)
        xr = x.clone().requires_grad_()
        out_ref = ref(xr)
        (out_ref * gout).sum().backward()
        xl = x[lo:hi].clone().requires_grad_()
        out = sbn(xl)
        (out * gout[lo:hi]).sum().backward()
        assert torch.allclose(out, out_ref[lo:hi], atol=tol, rtol=tol), \
            f"{what}: output differs by {(out - out_ref[lo:hi]).abs().max()}"
        assert torch.allclose(xl.grad, xr.grad[lo:hi], atol=tol, rtol=tol), \
            f"{what}: input gradient differs by {(xl.grad - xr.grad[lo:hi]).abs().max()}"
        if affine:
            # Each rank's parameter gradients are its own share; their sum is the global one.
            gw = hvd.allreduce(sbn.weight.grad, op=hvd.Sum, name="bn.check.gw")
            gb = hvd.allreduce(sbn.bias.grad, op=hvd.Sum, name="bn.check.gb")
            assert torch.allclose(gw, ref.weight.grad, atol=tol * 10, rtol=tol), f"{what}: weight grad"
            assert torch.allclose(gb, ref.bias.grad, atol=tol * 10, rtol=tol), f"{what}: bias grad"
            ref.weight.grad = ref.bias.grad = sbn.weight.grad = sbn.bias.grad = None
        if track:
            assert torch.allclose(sbn.running_mean, ref.running_mean, atol=tol), f"{what}: running_mean"
            assert torch.allclose(sbn.running_var, ref.running_var, atol=tol, rtol=tol), f"{what}: running_var"
            assert int(sbn.num_batches_tracked) == int(ref.num_batches_tracked)
    # Eval mode: the running statistics (or the batch's own when not tracked).
    ref.eval(), sbn.eval()
    x, _ = global_batch(ctx.size, shape, dtype, seed=99)
    with torch.no_grad():
        if track:
            assert torch.allclose(sbn(x[lo:hi]), ref(x)[lo:hi], atol=tol, rtol=tol), f"{what}: eval"


def case_batch_norm_2d(ctx):
    check(ctx, nn.BatchNorm2d, (3, 4, 5))


def case_batch_norm_1d_and_3d(ctx):
    check(ctx, nn.BatchNorm1d, (4,))
    check(ctx, nn.BatchNorm1d, (4, 6))
    check(ctx, nn.BatchNorm3d, (2, 3, 2, 4), iters=1)


def case_float64_tight(ctx):
    check(ctx, nn.BatchNorm2d, (3, 4, 5), dtype=torch.float64, tol=1e-10)


def case_options(ctx):
    check(ctx, nn.BatchNorm2d, (3, 2, 2), momentum=None, iters=3)  # cumulative average
    check(ctx, nn.BatchNorm2d, (3, 2, 2), affine=False)
    check(ctx, nn.BatchNorm1d, (5,), track=False)


def case_convert_sync_batchnorm(ctx):
    hvd = ctx.hvd
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Sequential(nn.Flatten(), nn.BatchNorm1d(16)))
    with torch.no_grad():
        model[1].weight.fill_(2.0)
        model[1].running_mean.fill_(0.25)
    conv = hvd.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(conv[1], hvd.SyncBatchNorm) and isinstance(conv[3][1], hvd.SyncBatchNorm)
    assert torch.all(conv[1].weight == 2.0) and torch.all(conv[1].running_mean == 0.25)
    out = conv(torch.randn(rows(ctx.rank), 1, 4, 4))
    assert out.shape == (rows(ctx.rank), 16)
    out.sum().backward()
    assert conv[1].weight.grad is not None


def case_bad_input(ctx):
    hvd = ctx.hvd
    bn = hvd.SyncBatchNorm(3)
    for bad in (torch.randn(3), torch.randn(2, 4)):
        try:
            bn(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"SyncBatchNorm(3) accepted shape {list(bad.shape)}")
