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
          iters=2, tol=1e-5, rtol=None):
    """rtol: compare everything by torch.allclose(a, b, rtol=rtol) with its default atol
    (1e-8) instead of atol=rtol=tol: the replay of torch's own float32 arithmetic."""
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
    if rtol is not None:
        def close(a, b, loose=False):
            return torch.allclose(a, b, rtol=rtol)
    else:
        def close(a, b, loose=False):
            return torch.allclose(a, b, atol=tol * 10 if loose else tol, rtol=tol)
    for it in range(iters):
        x, gout = global_batch(ctx.size, shape, dtype, seed=7 + it)
        xr = x.clone().requires_grad_()
        out_ref = ref(xr)
        (out_ref * gout).sum().backward()
        xl = x[lo:hi].clone().requires_grad_()
        out = sbn(xl)
        (out * gout[lo:hi]).sum().backward()
        assert close(out, out_ref[lo:hi]), \
            f"{what}: output differs by {(out - out_ref[lo:hi]).abs().max()}"
        assert close(xl.grad, xr.grad[lo:hi]), \
            f"{what}: input gradient differs by {(xl.grad - xr.grad[lo:hi]).abs().max()}"
        if affine:
            # Each rank's parameter gradients are its own share; their sum is the global one.
            gw = hvd.allreduce(sbn.weight.grad, op=hvd.Sum, name="bn.check.gw")
            gb = hvd.allreduce(sbn.bias.grad, op=hvd.Sum, name="bn.check.gb")
            assert close(gw, ref.weight.grad, loose=True), \
                f"{what}: weight grad differs by {(gw - ref.weight.grad).abs().max()}"
            assert close(gb, ref.bias.grad, loose=True), \
                f"{what}: bias grad differs by {(gb - ref.bias.grad).abs().max()}"
            ref.weight.grad = ref.bias.grad = sbn.weight.grad = sbn.bias.grad = None
        if track:
            assert close(sbn.running_mean, ref.running_mean), \
                f"{what}: running_mean differs by {(sbn.running_mean - ref.running_mean).abs().max()}"
            assert close(sbn.running_var, ref.running_var), \
                f"{what}: running_var differs by {(sbn.running_var - ref.running_var).abs().max()}"
            assert int(sbn.num_batches_tracked) == int(ref.num_batches_tracked)
    # Eval mode: the running statistics (or the batch's own when not tracked).
    ref.eval(), sbn.eval()
    x, _ = global_batch(ctx.size, shape, dtype, seed=99)
    with torch.no_grad():
        if track:
            assert close(sbn(x[lo:hi]), ref(x)[lo:hi]), f"{what}: eval"


def case_batch_norm_2d(ctx):
    check(ctx, nn.BatchNorm2d, (3, 4, 5))


def case_batch_norm_1d_and_3d(ctx):
    check(ctx, nn.BatchNorm1d, (4,))
    check(ctx, nn.BatchNorm1d, (4, 6))
    check(ctx, nn.BatchNorm3d, (2, 3, 2, 4), iters=1)


def case_float64_tight(ctx):
    check(ctx, nn.BatchNorm2d, (3, 4, 5), dtype=torch.float64, tol=1e-10)


def case_float32_as_torch(ctx):
    # torch's CPU kernel accumulates in float64 where a sample has more than one value per
    # channel; SyncBatchNorm replays its float32 arithmetic over the global batch, so the
    # results agree to rtol 1e-6 (atol 1e-8), near-zero values included. Lengths below,
    # at and above the kernel's vector width, and batches of different sizes per rank.
    for shape in ((3, 4, 5), (2, 7, 3)):
        check(ctx, nn.BatchNorm2d, shape, rtol=1e-6)
    for shape in ((4, 2), (4, 6), (3, 8), (2, 19), (5, 33)):
        check(ctx, nn.BatchNorm1d, shape, rtol=1e-6)
    check(ctx, nn.BatchNorm3d, (2, 3, 2, 4), iters=1, rtol=1e-6)
    check(ctx, nn.BatchNorm2d, (3, 4, 5), momentum=None, iters=3, rtol=1e-6)
    check(ctx, nn.BatchNorm1d, (4, 6), affine=False, rtol=1e-6)


def horovod_rows(r, cols):
    """Rank r's sample of Horovod's SyncBatchNorm test: 4 features of 2 values, or 1."""
    if cols == 2:
        return [[r, r + 1], [2 * r, 2 * r + 1], [3 * r, 3 * r + 1], [4 * r, 4 * r + 1]]
    return [[r + 1], [2 * r + 1], [3 * r + 1], [4 * r + 1]]


def case_horovod_pattern(ctx):
    # One sample per rank; the reference sees all of them. Its loss is the mean over the
    # batch of the summed outputs, each rank's the sum of its own; rank r's input gradient
    # lies in row r of an otherwise zero tensor and the ranks average those.
    hvd = ctx.hvd
    for cols in (2, 1):
        ts = torch.tensor([horovod_rows(r, cols) for r in range(ctx.size)], dtype=torch.float32)
        sbn = hvd.SyncBatchNorm(4)
        ref = nn.BatchNorm1d(4)
        for it in range(2):
            ts1 = ts.clone().requires_grad_()
            ts2 = ts.clone().requires_grad_()
            out = sbn(ts1[ctx.rank].unsqueeze(0))
            out_ref = ref(ts2)
            what = f"Horovod's pattern, {cols} column(s), iteration {it}"
            for name, a, b in (("output", out, out_ref[ctx.rank].unsqueeze(0)),
                               ("running_mean", sbn.running_mean, ref.running_mean),
                               ("running_var", sbn.running_var, ref.running_var)):
                assert torch.allclose(a, b, rtol=1e-6), f"{what}: {name} {a} against {b}"
            out.sum().backward()
            out_ref.mean(dim=0).sum().backward()
            # With one value per sample and channel torch sums the batch in float32: where
            # the exact weight gradient is 0 (feature 3 at 3 ranks) it gives 1.2e-8, the
            # float64 sums 0. That comparison alone gets an atol of float32's rounding.
            atol_gw = 1e-8 if cols == 2 else 5e-8
            for name, a, b, atol in (
                    ("weight grad", hvd.allreduce(sbn.weight.grad, name="hp.gw"), ref.weight.grad, atol_gw),
                    ("bias grad", hvd.allreduce(sbn.bias.grad, name="hp.gb"), ref.bias.grad, 1e-8),
                    ("input grad", hvd.allreduce(ts1.grad, name="hp.gx"), ts2.grad, 1e-8)):
                assert torch.allclose(a, b, rtol=1e-6, atol=atol), f"{what}: {name} {a} against {b}"
            sbn.weight.grad = sbn.bias.grad = ref.weight.grad = ref.bias.grad = None


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
