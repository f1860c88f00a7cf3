"""DistributedOptimizer and the state broadcasts: ranks training on their share of a
fixed batch end bit-identical, and close to one process training on the whole batch."""
import torch
import torch.nn as nn

STEPS = 5
PER_RANK = 8


def make_model(seed=0, hvd=None, sync_bn=False):
    torch.manual_seed(seed)
    layers = [nn.Linear(6, 10)]
    if sync_bn:
        layers.append(hvd.SyncBatchNorm(10) if hvd else nn.BatchNorm1d(10))
    layers += [nn.Tanh(), nn.Linear(10, 3)]
    return nn.Sequential(*layers)


def batch(step, size):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(PER_RANK * size, 6, generator=g)
    y = torch.randn(PER_RANK * size, 3, generator=g)
    return x, y


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def assert_identical_across_ranks(hvd, model, what):
    rows = hvd.allgather(flat(model).unsqueeze(0), name=f"identical.{what}")
    for r in range(1, rows.shape[0]):
        assert torch.equal(rows[0], rows[r]), f"{what}: rank {r}'s parameters differ from rank 0's"


def train_reference(size, passes=1, sync_bn=False):
    model = make_model(sync_bn=sync_bn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(STEPS):
        x, y = batch(s, size)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return flat(model)


def train_distributed(ctx, passes=1, sync_bn=False, **kwargs):
    hvd = ctx.hvd
    model = make_model(hvd=hvd, sync_bn=sync_bn)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    assert isinstance(opt, torch.optim.SGD)
    lo = ctx.rank * PER_RANK
    micro = PER_RANK // passes
    for s in range(STEPS):
        x, y = batch(s, ctx.size)
        opt.zero_grad()
        for p in range(passes):
            a = lo + p * micro
            loss = nn.functional.mse_loss(model(x[a:a + micro]), y[a:a + micro]) / passes
            loss.backward()
        opt.step()
    return model


def case_distributed_optimizer_matches_one_process(ctx):
    model = train_distributed(ctx)
    assert_identical_across_ranks(ctx.hvd, model, "plain")
    want = train_reference(ctx.size)
    assert torch.allclose(flat(model), want, atol=1e-5), (flat(model) - want).abs().max()
    assert not torch.equal(want, flat(make_model())), "training did not move the parameters"


def case_backward_passes_per_step(ctx):
    model = train_distributed(ctx, passes=2)
    assert_identical_across_ranks(ctx.hvd, model, "bpps2")
    want = train_reference(ctx.size)
    assert torch.allclose(flat(model), want, atol=1e-5), (flat(model) - want).abs().max()


def case_fp16_compression(ctx):
    model = train_distributed(ctx, compression=ctx.hvd.Compression.fp16)
    assert_identical_across_ranks(ctx.hvd, model, "fp16")
    want = train_reference(ctx.size)
    err = (flat(model) - want).abs().max()
    assert err < 5e-3, err


def case_predivide_and_sync_batch_norm(ctx):
    # With SyncBatchNorm, equal per-rank batches train like one process with BatchNorm
    # on the whole batch.
    model = train_distributed(ctx, sync_bn=True, gradient_predivide_factor=2.0)
    assert_identical_across_ranks(ctx.hvd, model, "syncbn")
    want = train_reference(ctx.size, sync_bn=True)
    assert torch.allclose(flat(model), want, atol=5e-5), (flat(model) - want).abs().max()


def case_unused_parameter_and_skip_synchronize(ctx):
    hvd = ctx.hvd
    torch.manual_seed(0)
    a, b = nn.Linear(4, 2), nn.Linear(4, 2)
    params = list(a.named_parameters(prefix="a")) + list(b.named_parameters(prefix="b"))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=0.5),
                                   named_parameters=params, op=hvd.Sum)
    x = torch.ones(3, 4) * (ctx.rank + 1)
    for _ in range(2):
        opt.zero_grad()
        out = a(x).sum()
        if ctx.rank == 0:  # only rank 0 uses b: the others send zeros for it
            out = out + b(x).sum()
        out.backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(a.parameters(), 100.0)
        with opt.skip_synchronize():
            opt.step()
    m = nn.Module()
    m.a, m.b = a, b
    assert_identical_across_ranks(hvd, m, "unused")
    # b's bias gradient summed over ranks is rank 0's alone: 3 (rows) per step
    torch.manual_seed(0)
    nn.Linear(4, 2)
    b0 = nn.Linear(4, 2)
    assert torch.allclose(b.bias, b0.bias - 2 * 0.5 * 3.0), (b.bias, b0.bias)


def case_optimizer_arguments(ctx):
    hvd = ctx.hvd
    model = make_model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    named = list(model.named_parameters())
    for bad, exc in (({"named_parameters": named[:1]}, ValueError),
                     ({"named_parameters": [named[0], (named[0][0], named[1][1])] + named[2:]}, ValueError),
                     ({"backward_passes_per_step": 0}, ValueError),
                     ({"op": hvd.Max}, ValueError),
                     ({"op": hvd.Sum, "gradient_predivide_factor": 2.0}, ValueError),
                     ({"compression": "fp16"}, TypeError)):
        try:
            hvd.DistributedOptimizer(sgd, **bad)
        except exc:
            pass
        else:
            raise AssertionError(f"DistributedOptimizer accepted {bad}")
    try:
        hvd.DistributedOptimizer(model)
    except TypeError:
        pass
    else:
        raise AssertionError("DistributedOptimizer accepted a module")
    # Any optimizer class: Adam.
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters()),
                                   named_parameters=model.named_parameters())
    assert isinstance(opt, torch.optim.Adam)
    x, y = batch(0, ctx.size)
    for _ in range(2):
        opt.zero_grad()
        nn.functional.mse_loss(model(x[ctx.rank::ctx.size]), y[ctx.rank::ctx.size]).backward()
        opt.step()
    assert_identical_across_ranks(hvd, model, "adam")
    # Gradients computed twice with backward_passes_per_step=1: refused.
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    nn.functional.mse_loss(model(x), y).backward()
    try:
        nn.functional.mse_loss(model(x), y).backward()
    except (AssertionError, RuntimeError) as e:
        assert "backward_passes_per_step" in str(e), str(e)
    else:
        raise AssertionError("a second backward before step() was accepted")
    try:
        opt.zero_grad()
    except AssertionError as e:
        assert "zero_grad" in str(e)
    else:
        raise AssertionError("zero_grad with gradients in flight was accepted")
    opt.synchronize()


def case_broadcast_parameters(ctx):
    hvd = ctx.hvd
    model = make_model(seed=ctx.rank + 10)
    root_params = flat(make_model(seed=10))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    assert torch.equal(flat(model), root_params)
    last = ctx.size - 1
    model = make_model(seed=ctx.rank + 10)
    hvd.broadcast_parameters(model.named_parameters(), root_rank=last)
    assert torch.equal(flat(model), flat(make_model(seed=last + 10)))
    bn = nn.BatchNorm1d(3)
    bn.running_mean.fill_(ctx.rank)
    hvd.broadcast_parameters(bn.state_dict(), root_rank=last)
    assert torch.all(bn.running_mean == last)


def case_broadcast_optimizer_state(ctx):
    hvd = ctx.hvd
    model = make_model(seed=ctx.rank)
    lr = 0.1 if ctx.rank == 0 else 0.5
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if ctx.rank == 0:  # only the root has momentum buffers
        for s in range(2):
            x, y = batch(s, 1)
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.1
    bufs = torch.cat([opt.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()])
    assert bufs.abs().sum() > 0
    rows = hvd.allgather(bufs.unsqueeze(0))
    for r in range(ctx.size):
        assert torch.equal(rows[r], rows[0]), f"rank {r}'s momentum buffers differ"
    # The optimizer still works on the broadcast state.
    x, y = batch(3, 1)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    assert_identical_across_ranks(hvd, model, "after.state.broadcast")
