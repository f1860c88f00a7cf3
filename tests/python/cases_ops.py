"""Every collective against a reference computed locally from every rank's input (each
rank can build any rank's input: they are functions of the rank)."""
import os
import time

import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int16, torch.uint8, torch.int8]
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def data(r, shape, dtype):
    """Rank r's input: small positive integers (1..5), so that sums and products of up to
    3 ranks are exact in every type."""
    n = 1
    for d in shape:
        n *= d
    return ((torch.arange(n) * 7 + r * 3) % 5 + 1).to(dtype).view(shape)


def reference(ctx, op, shape, dtype, offset=0):
    """The reduction over the ranks of data(r + offset) (offset: a round of cases_sequences)."""
    hvd = ctx.hvd
    xs = torch.stack([data(r + offset, shape, dtype).double() for r in range(ctx.size)])
    if op == hvd.Sum:
        return xs.sum(0)
    if op == hvd.Average:
        s = xs.sum(0)
        return s / ctx.size if dtype in FLOATS else torch.div(s, ctx.size, rounding_mode="trunc")
    if op == hvd.Min:
        return xs.min(0).values
    if op == hvd.Max:
        return xs.max(0).values
    return xs.prod(0)


def close(got, want, dtype, what):
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}.get(dtype, 1e-6)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype}, expected {dtype}"
    assert torch.allclose(got.double(), want, rtol=tol, atol=tol), f"{what}: got {got}, want {want}"


def case_topology(ctx):
    hvd = ctx.hvd
    assert ctx.size == int(os.environ["COLL_SIZE"]) and ctx.rank == int(os.environ["COLL_RANK"])
    assert (hvd.local_rank(), hvd.local_size()) == (ctx.rank, ctx.size)  # one host
    assert (hvd.cross_rank(), hvd.cross_size()) == (0, 1)
    assert hvd.global_process_set.size() == ctx.size and hvd.global_process_set.rank() == ctx.rank
    assert hvd.global_process_set.ranks == list(range(ctx.size))
    ranks = hvd.allgather(torch.tensor([ctx.rank]))
    assert ranks.tolist() == list(range(ctx.size))


def case_allreduce_every_op_and_dtype(ctx):
    hvd = ctx.hvd
    shape = (3, 5)
    for dtype in DTYPES:
        for op in (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product):
            what = f"{dtype} op {op}"
            want = reference(ctx, op, shape, dtype)
            x = data(ctx.rank, shape, dtype)
            got = hvd.allreduce(x, op=op, name=f"ar.{dtype}.{op}")
            close(got, want, dtype, what + " out of place")
            assert torch.equal(x, data(ctx.rank, shape, dtype)), what + ": the input changed"
            y = x.clone()
            res = hvd.allreduce_(y, op=op, name=f"ar_.{dtype}.{op}")
            assert res is y
            close(y, want, dtype, what + " in place")


def case_reproducible_sum_and_average(ctx):
    # Every rank builds the same set of inputs and takes one by an assignment that changes
    # between calls: SumReproducible's bits must not change; Average divides that sum.
    hvd = ctx.hvd
    gen = torch.Generator().manual_seed(5)
    n = 20001
    inputs = [(torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1).float() * 10 ** (i % 5)
              for i in range(ctx.size)]
    exact = torch.stack([x.double() for x in inputs]).sum(0)
    results = []
    for shift in range(ctx.size):
        mine = inputs[(ctx.rank + shift) % ctx.size]
        results.append(hvd.allreduce(mine, op=hvd.SumReproducible, name=f"repro.{shift}"))
        avg = hvd.allreduce(mine, op=hvd.AverageReproducible, name=f"repro_avg.{shift}")
        assert torch.equal(avg, (results[-1].double() / ctx.size).float()), "average is not the sum / n"
    for r in results[1:]:
        assert torch.equal(r, results[0]), "the reproducible sum changed with the assignment"
    # The documented bound: half an ulp of the result plus n * 2^(E - 51), E above every |x|.
    biggest = torch.stack([x.double().abs() for x in inputs]).max(0).values
    bound = exact.abs() * 2 ** -24 + ctx.size * biggest * 2 ** -50 + 1e-300
    assert torch.all((results[0].double() - exact).abs() <= bound), "beyond the error bound"

    ints = hvd.allreduce(torch.tensor([ctx.rank + 1] * 4, dtype=torch.int32), op=hvd.SumReproducible)
    assert ints.tolist() == [ctx.size * (ctx.size + 1) // 2] * 4


def case_allreduce_shapes(ctx):
    hvd = ctx.hvd
    # A scalar, an empty tensor, a non-contiguous input, a large one (several fusion
    # buffers' worth), unnamed (generated names).
    s = hvd.allreduce(torch.tensor(float(ctx.rank + 1)), op=hvd.Sum)
    assert s.dim() == 0 and s.item() == ctx.size * (ctx.size + 1) / 2
    e = hvd.allreduce(torch.empty(0, 4), op=hvd.Sum)
    assert e.shape == (0, 4)
    base = data(ctx.rank, (4, 6), torch.float32)
    got = hvd.allreduce(base.t(), op=hvd.Sum)
    assert torch.equal(got, reference(ctx, hvd.Sum, (4, 6), torch.float32).float().t())
    n = 3_000_001
    big = torch.full((n,), float(ctx.rank + 1))
    got = hvd.allreduce(big, op=hvd.Sum, name="big")
    assert torch.all(got == ctx.size * (ctx.size + 1) / 2)


def case_allreduce_scaling_and_average_flag(ctx):
    hvd = ctx.hvd
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        x = data(ctx.rank, (7,), dtype)
        s = reference(ctx, hvd.Sum, (7,), dtype)
        got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
        close(got, s * 1.5, dtype, f"{dtype} scaled sum")
        got = hvd.allreduce(x, op=hvd.Average, postscale_factor=2.0)
        close(got, s / ctx.size * 2.0, dtype, f"{dtype} scaled average")
    x = data(ctx.rank, (5,), torch.float32)
    assert torch.allclose(hvd.allreduce(x, average=True), reference(ctx, hvd.Average, (5,), torch.float32).float())
    assert torch.equal(hvd.allreduce(x, average=False), reference(ctx, hvd.Sum, (5,), torch.float32).float())
    assert torch.allclose(hvd.allreduce(x), reference(ctx, hvd.Average, (5,), torch.float32).float())


def case_grouped_allreduce(ctx):
    hvd = ctx.hvd
    shapes = [(3,), (2, 4), (1,), (5, 1, 2)]
    xs = [data(ctx.rank, s, torch.float32) for s in shapes]
    wants = [reference(ctx, hvd.Sum, s, torch.float32).float() for s in shapes]
    outs = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grp")
    assert len(outs) == len(xs)
    for o, w in zip(outs, wants):
        assert torch.equal(o, w)
    h = hvd.grouped_allreduce_async_(xs, op=hvd.Max)
    res = hvd.synchronize(h)
    for got, x, s in zip(res, xs, shapes):
        assert got is x
        assert torch.equal(x, reference(ctx, hvd.Max, s, torch.float32).float())
    ints = [data(ctx.rank, s, torch.int64) for s in shapes]
    for o, s in zip(hvd.grouped_allreduce(ints, op=hvd.Average), shapes):
        assert torch.equal(o, reference(ctx, hvd.Average, s, torch.int64).long())


def case_broadcast_from_each_root(ctx):
    hvd = ctx.hvd
    for root in range(ctx.size):
        for dtype in DTYPES:
            x = data(ctx.rank, (2, 3), dtype) + ctx.rank
            want = data(root, (2, 3), dtype) + root
            got = hvd.broadcast(x, root, name=f"bc.{root}.{dtype}")
            assert torch.equal(got, want), f"root {root} {dtype}: {got} vs {want}"
            assert torch.equal(x, data(ctx.rank, (2, 3), dtype) + ctx.rank)
            y = x.clone()
            assert hvd.broadcast_(y, root) is y
            assert torch.equal(y, want)
        h = hvd.broadcast_async(torch.tensor([ctx.rank * 10]), root)
        assert hvd.synchronize(h).item() == root * 10


def case_allgather_uneven(ctx):
    hvd = ctx.hvd
    for dtype in (torch.float32, torch.int64, torch.uint8, torch.bfloat16):
        # rank r contributes r rows (rank 0 none)
        def rows(r):
            return (torch.arange(r * 3).view(r, 3) + 10 * r).to(dtype)
        got = hvd.allgather(rows(ctx.rank), name=f"ag.{dtype}")
        want = torch.cat([rows(r) for r in range(ctx.size)])
        assert got.dtype == dtype and torch.equal(got, want), f"{dtype}: {got} vs {want}"
    got = hvd.allgather(torch.tensor(float(ctx.rank)))  # a scalar gathers as one row each
    assert got.tolist() == [float(r) for r in range(ctx.size)]
    h = hvd.allgather_async(torch.full((ctx.rank + 1, 2), ctx.rank))
    got = hvd.synchronize(h)
    assert got.shape == (ctx.size * (ctx.size + 1) // 2, 2)


def case_alltoall_uneven(ctx):
    hvd = ctx.hvd
    n = ctx.size

    def split(src, dst):
        return (src + 2 * dst) % 3  # some zero

    def rows(src, dst):  # what src sends dst: rows tagged (src, dst, i)
        k = split(src, dst)
        return torch.tensor([[src, dst, i] for i in range(k)], dtype=torch.int64).view(k, 3)

    x = torch.cat([rows(ctx.rank, d) for d in range(n)])
    splits = [split(ctx.rank, d) for d in range(n)]
    out, received = hvd.alltoall(x, splits=splits, name="a2a")
    want = torch.cat([rows(s, ctx.rank) for s in range(n)])
    assert torch.equal(out, want), f"{out} vs {want}"
    assert received.tolist() == [split(s, ctx.rank) for s in range(n)]
    out, received = hvd.alltoall(x.float(), splits=torch.tensor(splits, dtype=torch.int32))
    assert torch.equal(out, want.float())
    # Even split, no splits given: the output alone.
    y = torch.arange(2 * n, dtype=torch.float32) + 100 * ctx.rank
    out = hvd.alltoall(y)
    assert isinstance(out, torch.Tensor)
    assert out.tolist() == [100.0 * s + 2 * ctx.rank + i for s in range(n) for i in range(2)]


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def case_engine_outputs_are_owned(ctx):
    """Allgather, alltoall and reducescatter results are the engine's memory taken over
    without a copy: views outlive the tensor, writes stick, and the memory goes when the
    last view does."""
    import gc
    hvd = ctx.hvd
    n, r = ctx.size, ctx.rank
    y = hvd.allgather(torch.full((4, 3), float(r)), name="owned.ag")
    tail = y[4:]
    del y
    gc.collect()
    filler = [torch.full((1 << 16,), -1.0) for _ in range(8)]  # reuse freed memory, if any
    assert torch.equal(tail, torch.cat([torch.full((4, 3), float(k)) for k in range(1, n)])), tail
    tail.add_(1)
    assert tail[0, 0].item() == 2.0
    del filler
    # 64 outputs of 4 MiB each: without freeing, the process would grow by 256 MiB.
    x = torch.ones((1 << 20) // n)
    before = _rss_bytes()
    for i in range(64):
        out = hvd.allgather(x, name=f"owned.loop.{i % 2}")
        assert out.numel() == x.numel() * n
        del out
    grown = _rss_bytes() - before
    assert grown < (96 << 20), f"RSS grew by {grown >> 20} MiB over 64 outputs of 4 MiB"


def case_reducescatter_uneven(ctx):
    hvd = ctx.hvd
    n = ctx.size
    dim0 = 2 * n + 1
    base, extra = divmod(dim0, n)
    start = ctx.rank * base + min(ctx.rank, extra)
    count = base + (1 if ctx.rank < extra else 0)
    for op in (hvd.Average, hvd.Sum, hvd.Max):
        for dtype in (torch.float32, torch.int32):
            want = reference(ctx, op, (dim0, 4), dtype)[start:start + count]
            got = hvd.reducescatter(data(ctx.rank, (dim0, 4), dtype), op=op, name=f"rs.{op}.{dtype}")
            close(got, want, dtype, f"reducescatter op {op} {dtype}")
    got = hvd.reducescatter(data(ctx.rank, (dim0, 4), torch.float32))  # default: Average
    close(got, reference(ctx, hvd.Average, (dim0, 4), torch.float32)[start:start + count],
          torch.float32, "reducescatter default op")


def case_async_and_poll(ctx):
    hvd = ctx.hvd
    xs = [torch.full((1000,), float(ctx.rank + i)) for i in range(8)]
    handles = [hvd.allreduce_async_(x, op=hvd.Sum, name=f"async.{i}") for i, x in enumerate(xs)]
    deadline = time.monotonic() + 30
    while not hvd.poll(handles[0]):
        assert time.monotonic() < deadline, "poll never reported completion"
        time.sleep(0.001)
    for i in reversed(range(8)):  # any order
        assert hvd.synchronize(handles[i]) is xs[i]
        assert torch.all(xs[i] == sum(r + i for r in range(ctx.size)))
    try:
        hvd.synchronize(handles[0])
    except ValueError:
        pass
    else:
        raise AssertionError("a spent handle was accepted")
    try:
        hvd.poll(handles[0])
    except ValueError:
        pass
    else:
        raise AssertionError("poll accepted a spent handle")


def case_compression(ctx):
    hvd = ctx.hvd
    C = hvd.Compression
    x = data(ctx.rank, (64,), torch.float32)
    want = reference(ctx, hvd.Sum, (64,), torch.float32).float()
    for comp in (C.fp16, C.bf16):  # small integers are exact in 16 bits
        assert torch.equal(hvd.allreduce(x, op=hvd.Sum, compression=comp), want), comp
    got = hvd.allreduce(x, op=hvd.Sum, name="cmp.int8", compression=C.int8(block_size=16, stochastic=False))
    assert torch.allclose(got, want, rtol=0.05, atol=0.1), got
    got = hvd.allreduce(x, op=hvd.Sum, name="cmp.topk", compression=C.topk(density=1.0))
    assert torch.allclose(got, want), got
    got = hvd.allreduce(x, op=hvd.Sum, name="cmp.int8d", compression=C.int8)
    assert torch.allclose(got, want, rtol=0.05, atol=0.1), got
    # Not float32: sent uncompressed.
    i = data(ctx.rank, (64,), torch.int32)
    assert torch.equal(hvd.allreduce(i, op=hvd.Sum, compression=C.fp16),
                       reference(ctx, hvd.Sum, (64,), torch.int32).int())
    # Error feedback keeps a residual per name: an unnamed tensor is refused.
    try:
        hvd.allreduce(x, compression=C.int8)
    except ValueError as e:
        assert "name" in str(e)
    else:
        raise AssertionError("int8 with error feedback and no name was accepted")


def case_objects(ctx):
    hvd = ctx.hvd
    obj = {"rank": ctx.rank, "list": list(range(ctx.rank + 2)), "t": torch.arange(3) * ctx.rank}
    for root in range(ctx.size):
        got = hvd.broadcast_object(obj if ctx.rank == root else None, root_rank=root)
        assert got["rank"] == root and got["list"] == list(range(root + 2))
        assert torch.equal(got["t"], torch.arange(3) * root)
    all_ = hvd.allgather_object(obj)
    assert [o["rank"] for o in all_] == list(range(ctx.size))
    assert [o["list"] for o in all_] == [list(range(r + 2)) for r in range(ctx.size)]


def case_barrier(ctx):
    hvd = ctx.hvd
    token = hvd.broadcast_object(os.urandom(8).hex() if ctx.rank == 0 else None)
    path = f"/tmp/coll-pytest-barrier-{token}"
    try:
        if ctx.rank == 0:
            time.sleep(0.2)
            with open(path, "w") as f:
                f.write("x")
        hvd.barrier()
        assert os.path.exists(path), "barrier returned before rank 0 reached it"
        hvd.barrier()
    finally:
        if ctx.rank == 0 and os.path.exists(path):
            os.unlink(path)


def case_join(ctx):
    hvd = ctx.hvd
    last = ctx.size - 1
    if ctx.rank == last:
        got = hvd.join()
    else:
        # The joined rank takes part with zeros.
        s = hvd.allreduce(torch.ones(4), op=hvd.Sum, name="join.sum")
        assert torch.all(s == ctx.size - 1), s
        got = hvd.join()
    everyone = hvd.allgather(torch.tensor([got]))
    assert len(set(everyone.tolist())) == 1, everyone
    assert 0 <= got < last, got
    # The engine works as before afterwards.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [ctx.size] * 2


def case_autograd(ctx):
    hvd = ctx.hvd
    n, r = ctx.size, ctx.rank
    weight_sum = n * (n + 1) / 2  # every rank's loss weighs its output by rank + 1
    for op, factor in ((hvd.Sum, 1.0), (hvd.Average, 1.0 / n)):
        x = data(r, (3, 2), torch.float32).requires_grad_()
        y = hvd.allreduce(x, op=op, name=f"grad.ar.{op}")
        assert y.requires_grad
        (y * (r + 1)).sum().backward()
        assert torch.allclose(x.grad, torch.full((3, 2), weight_sum * factor)), x.grad
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, 1, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    ((ya * (r + 1)).sum() + (yb * 2 * (r + 1)).sum()).backward()
    assert torch.all(a.grad == weight_sum) and torch.all(b.grad == 2 * weight_sum), (a.grad, b.grad)
    # allgather: rank r's gradient is its rows of the averaged gradient (as horovod)
    x = torch.ones(r + 1, 2, requires_grad=True)
    y = hvd.allgather(x, name="grad.ag")
    rows = torch.arange(y.shape[0], dtype=torch.float32).view(-1, 1)
    (y * rows * (r + 1)).sum().backward()
    offset = r * (r + 1) // 2
    want = (torch.arange(offset, offset + r + 1, dtype=torch.float32).view(-1, 1) * weight_sum / n).expand(r + 1, 2)
    assert torch.equal(x.grad, want), (x.grad, want)
    # broadcast: the root gets the averaged gradient, the others zero (as horovod)
    x = torch.ones(4, requires_grad=True)
    y = hvd.broadcast(x, 0)
    (y * (r + 1)).sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), weight_sum / n if r == 0 else 0.0)), x.grad
    # Min is not differentiable: the result has no gradient function
    x = torch.ones(2, requires_grad=True)
    assert not hvd.allreduce(x, op=hvd.Min).requires_grad
    x = torch.ones(n + 1, 2, requires_grad=True)
    assert not hvd.reducescatter(x, op=hvd.Max).requires_grad


def case_autograd_alltoall(ctx):
    hvd = ctx.hvd
    n, r = ctx.size, ctx.rank

    def split(src, dst):
        return (src + 2 * dst) % 3 + (1 if src == dst else 0)

    def weight(src, dst, i):  # what rank dst weighs row i from src by in its loss
        return 100.0 * src + 10.0 * dst + i + 1

    splits = [split(r, d) for d in range(n)]
    x = torch.zeros(sum(splits), 2, requires_grad=True)
    y, received = hvd.alltoall(x, splits=splits, name="grad.a2a")
    assert y.requires_grad and not received.requires_grad
    w = torch.tensor([weight(s, r, i) for s in range(n) for i in range(split(s, r))]).view(-1, 1)
    (y * w).sum().backward()
    want = torch.tensor([weight(r, d, i) for d in range(n) for i in range(split(r, d))])
    assert torch.equal(x.grad, want.view(-1, 1).expand(-1, 2)), (x.grad, want)
    # Even split: rows sent to rank d come back weighted by d + 1.
    x = torch.zeros(2 * n, 3, requires_grad=True)
    y = hvd.alltoall(x)
    assert isinstance(y, torch.Tensor) and y.requires_grad
    (y * (r + 1)).sum().backward()
    want = torch.arange(n, dtype=torch.float32).repeat_interleave(2).add(1).view(-1, 1)
    assert torch.equal(x.grad, want.expand(-1, 3)), x.grad


def case_autograd_reducescatter(ctx):
    hvd = ctx.hvd
    n, r = ctx.size, ctx.rank
    dim0 = 2 * n + 1
    base, extra = divmod(dim0, n)
    owner = torch.tensor([k for k in range(n) for _ in range(base + (1 if k < extra else 0))],
                         dtype=torch.float32).view(-1, 1)
    # horovod's scaling: the set's size for Sum, 1 for Average, times both factors
    for op, pre, post, scale in ((hvd.Sum, 1.0, 1.0, n), (hvd.Average, 1.0, 1.0, 1.0),
                                 (hvd.Sum, 2.0, 0.25, 0.5 * n), (hvd.Average, 3.0, 0.5, 1.5)):
        x = data(r, (dim0, 2), torch.float32).requires_grad_()
        y = hvd.reducescatter(x, op=op, name=f"grad.rs.{op}.{pre}", prescale_factor=pre,
                              postscale_factor=post)
        assert y.requires_grad
        (y * (r + 1)).sum().backward()
        want = (owner + 1) * scale  # row j reaches rank owner(j), whose loss weighs it
        assert torch.allclose(x.grad, want.expand(-1, 2)), (op, x.grad, want)
