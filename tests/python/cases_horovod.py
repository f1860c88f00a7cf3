"""Conformance with horovod.torch where behaviour is not obvious from the names: gradient
scaling, received splits, process-set roots, exception types, integer scaling, Adasum,
sparse gradients, a rank failing alone. Expected values are computed here from every
rank's input (a function of the rank)."""
import warnings

import torch


def rank_rows(r):
    return 1 + r  # rank r's first dimension where ranks differ


def case_join_allreduce_of_growing_tensors(ctx):
    # The last rank joins at once; the others all-reduce tensors of growing sizes in one
    # go (joined ranks send zeros, which must be zeros whatever the order).
    hvd = ctx.hvd
    last = ctx.size - 1
    if ctx.rank != last:
        hs = [hvd.allreduce_async(torch.full((8 << (2 * k),), float(ctx.rank + 1)), op=hvd.Sum,
                                  name=f"join.grow.{k}") for k in range(5)]
        want = sum(r + 1 for r in range(ctx.size - 1))
        for k, h in enumerate(hs):
            got = hvd.synchronize(h)
            assert torch.all(got == want), (k, got.unique())
    assert hvd.join() in range(ctx.size)


def case_join_keeps_generated_names_in_step(ctx):
    # Each rank in turn joins first while the others try an unnamed allgather (refused
    # with a joined rank): the joined rank made one unnamed call fewer, and after join()
    # every rank's generated names must agree again.
    hvd = ctx.hvd
    for first in range(ctx.size):
        if ctx.rank != first:
            try:
                hvd.allgather(torch.ones(2))
            except hvd.CollectiveError:
                pass
            else:
                raise AssertionError("allgather ran with a joined rank")
        ret = hvd.join()
        assert hvd.allgather_object(ret, name=f"join.ret.{first}") == [ret] * ctx.size
    got = hvd.allreduce(torch.ones(2), op=hvd.Sum)  # unnamed: the same name everywhere
    assert torch.all(got == ctx.size)


def case_alltoall_backward_without_splits_uses_received_splits(ctx):
    hvd = ctx.hvd
    n = ctx.size
    # Even split forward, then a backward whose gradient depends on the position: each
    # rank's gradient must be the rows it sent, coming back from where they went.
    x = (torch.arange(2 * n, dtype=torch.float64) + 100 * ctx.rank).view(2 * n, 1)
    x.requires_grad_()
    y = hvd.alltoall(x, name="a2a.nosplit")
    assert isinstance(y, torch.Tensor)
    (y * y).sum().backward()
    assert torch.equal(x.grad, 2 * x.detach()), x.grad.view(-1)
    # Uneven splits given by the caller: rank r sends r + 1 rows to every rank.
    rows = rank_rows(ctx.rank)
    x = torch.full((rows * n, 2), float(ctx.rank), dtype=torch.float64, requires_grad=True)
    y, received = hvd.alltoall(x, splits=[rows] * n, name="a2a.splits")
    assert received.tolist() == [rank_rows(r) for r in range(n)], received
    (y * (1 + torch.arange(y.shape[0], dtype=torch.float64)).view(-1, 1)).sum().backward()
    assert x.grad.shape == x.shape
    # The rows this rank sent to rank d came back as rows of d's output starting at
    # sum(rank_rows(r) for r < this rank).
    start = sum(rank_rows(r) for r in range(ctx.rank))
    want = (1 + torch.arange(start, start + rows, dtype=torch.float64)).repeat(n).view(-1, 1)
    assert torch.equal(x.grad, want.expand(-1, 2)), x.grad


def _ps_for(ctx, hvd):
    """The global set, and a set of the first two ranks (size 2 on 2 and 3 ranks)."""
    sets = [(hvd.global_process_set, list(range(ctx.size)))]
    if ctx.size >= 3:
        sets.append((hvd.add_process_set([0, 1]), [0, 1]))
    return sets


def case_gradient_scaling_as_horovod(ctx):
    hvd = ctx.hvd
    sets = _ps_for(ctx, hvd)
    for ps, ranks in sets:
        if ctx.rank not in ranks:
            continue
        n = len(ranks)
        me = ranks.index(ctx.rank)
        tag = f"{n}.{ps.process_set_id}"
        # allgather: the average of the output gradients, this rank's rows (horovod: 1,
        # not the sum n).
        x = torch.ones(rank_rows(me), 3, requires_grad=True)
        hvd.allgather(x, name=f"g.ag.{tag}", process_set=ps).sum().backward()
        assert torch.all(x.grad == 1), x.grad
        # grouped_allgather alike.
        xs = [torch.ones(rank_rows(me), requires_grad=True), torch.ones(2, 2, requires_grad=True)]
        outs = hvd.grouped_allgather(xs, name=f"g.gag.{tag}", process_set=ps)
        sum(o.sum() for o in outs).backward()
        assert all(torch.all(t.grad == 1) for t in xs)
        # broadcast: the average on the root (a global rank), zero elsewhere.
        root = ranks[-1]
        x = torch.ones(4, requires_grad=True)
        (hvd.broadcast(x, root, name=f"g.bc.{tag}", process_set=ps) * (me + 1)).sum().backward()
        want = sum(k + 1 for k in range(n)) / n if ctx.rank == root else 0.0
        assert torch.allclose(x.grad, torch.full((4,), want)), (x.grad, want)
        # reducescatter: Sum multiplies by the set's size, Average does not, and both
        # scale factors apply.
        for op, mult in ((hvd.Sum, n), (hvd.Average, 1)):
            for pre, post in ((1.0, 1.0), (2.0, 0.5), (3.0, 1.0)):
                x = torch.ones(2 * n, 2, requires_grad=True)
                hvd.reducescatter(x, name=f"g.rs.{op}.{pre}.{tag}", op=op, process_set=ps,
                                  prescale_factor=pre, postscale_factor=post).sum().backward()
                assert torch.allclose(x.grad, torch.full_like(x, mult * pre * post)), \
                    (op, pre, post, x.grad.unique())
        xs = [torch.ones(n, requires_grad=True), torch.ones(2 * n, 3, requires_grad=True)]
        outs = hvd.grouped_reducescatter(xs, name=f"g.grs.{tag}", op=hvd.Sum, process_set=ps)
        sum(o.sum() for o in outs).backward()
        assert all(torch.all(t.grad == n) for t in xs)
    hvd.barrier()
    for ps, _ in sets[1:]:
        hvd.remove_process_set(ps)


def case_horovod_names(ctx):
    hvd = ctx.hvd
    for name in ("grouped_allgather", "grouped_allgather_async", "grouped_reducescatter",
                 "grouped_reducescatter_async", "sparse_allreduce_async", "HorovodInternalError",
                 "Adasum", "mpi_built", "mpi_enabled", "gloo_built", "gloo_enabled", "nccl_built",
                 "ddl_built", "ccl_built", "cuda_built", "rocm_built", "mpi_threads_supported",
                 "is_homogeneous"):
        assert hasattr(hvd, name), name
    # The build queries answer for this package: no MPI, Gloo, NCCL, oneCCL, DDL, CUDA.
    assert (hvd.mpi_built(), hvd.mpi_enabled(), hvd.gloo_built(), hvd.gloo_enabled(),
            hvd.nccl_built(), hvd.ddl_built(), hvd.ccl_built(), hvd.cuda_built(),
            hvd.rocm_built()) == (False, False, False, False, 0, False, False, False, False)
    try:
        hvd.mpi_threads_supported()
    except ValueError:
        pass
    else:
        raise AssertionError("mpi_threads_supported() answered without MPI")
    assert issubclass(hvd.CollectiveError, hvd.HorovodInternalError)
    # Horovod's compressor objects.
    for dtype in (torch.float32, torch.float64):
        t = torch.full((3,), 1.5, dtype=dtype)
        c, cctx = hvd.Compression.fp16.compress(t)
        assert c.dtype == torch.float16
        d = hvd.Compression.fp16.decompress(c, cctx)
        assert d.dtype == dtype and torch.equal(d, t)
    for dtype in (torch.int32, torch.uint8):
        t = torch.ones(3, dtype=dtype)
        c, cctx = hvd.Compression.fp16.compress(t)
        assert c.dtype == dtype and hvd.Compression.fp16.decompress(c, cctx).dtype == dtype
    t = torch.ones(2)
    assert hvd.Compression.none.decompress(*hvd.Compression.none.compress(t)) is t
    # grouped allgather / reducescatter values, async forms.
    xs = [torch.full((rank_rows(ctx.rank), 2), float(ctx.rank)), torch.tensor([ctx.rank])]
    outs = hvd.synchronize(hvd.grouped_allgather_async(xs, name="n.gag"))
    assert outs[1].tolist() == list(range(ctx.size))
    assert outs[0].shape == (sum(rank_rows(r) for r in range(ctx.size)), 2)
    xs = [torch.ones(ctx.size * 2), torch.full((ctx.size, 3), 2.0)]
    h = hvd.grouped_reducescatter_async(xs, name="n.grs", op=hvd.Sum)
    outs = hvd.synchronize(h)
    assert torch.all(outs[0] == ctx.size) and outs[0].shape == (2,)
    assert torch.all(outs[1] == 2 * ctx.size) and outs[1].shape == (1, 3)
    # sparse_allreduce_async against the dense average.
    g = torch.Generator().manual_seed(5)
    dense = [torch.where(torch.rand(7, 3, generator=g) < 0.6, 0.0, torch.rand(7, 3, generator=g))
             for _ in range(ctx.size)]
    got = hvd.sparse_allreduce_async(dense[ctx.rank].to_sparse(), name="n.sparse", op=hvd.Average)()
    assert got.is_sparse
    assert torch.allclose(got.to_dense(), sum(dense) / ctx.size, atol=1e-6)
    # The optimizer attributes scripts read.
    model = torch.nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2, sparse_as_dense=True)
    assert opt.backward_passes_per_step == 2 and opt.op == hvd.Average
    assert opt.sparse_as_dense is True and opt.process_set is hvd.global_process_set
    assert opt.gradient_predivide_factor == 1.0
    assert set(opt._parameter_names.values()) == {"weight", "bias"}
    opt.set_backward_passes_per_step(1)
    assert opt.backward_passes_per_step == 1
    # step() after synchronize() without skip_synchronize() warns in horovod's words.
    model(torch.ones(1, 3)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        opt.step()
    assert any("optimizer.step() called without optimizer.skip_synchronize()" in str(w.message)
               for w in ws), [str(w.message) for w in ws]


def case_sparse_gradients_in_optimizer(ctx):
    hvd = ctx.hvd
    for sparse_as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 3, sparse=True)
        idx = torch.tensor([[1, 2, 4], [4, 3, 2]]) if ctx.rank == 0 else torch.tensor([[1, 7, 9]])
        before = emb.weight.detach().clone()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       named_parameters=emb.named_parameters(),
                                       sparse_as_dense=sparse_as_dense)
        emb(idx).sum().backward()
        opt.step()
        # The step applied the average over ranks of each row's count of lookups.
        counts = torch.zeros(10)
        for r in range(ctx.size):
            rix = torch.tensor([[1, 2, 4], [4, 3, 2]]) if r == 0 else torch.tensor([[1, 7, 9]])
            counts += torch.bincount(rix.view(-1), minlength=10).float()
        want = before - (counts / ctx.size).view(-1, 1)
        assert torch.allclose(emb.weight.detach(), want, atol=1e-6), sparse_as_dense


def case_adasum(ctx):
    hvd = ctx.hvd
    n = ctx.size
    x = torch.arange(1, 6, dtype=torch.float64) * (ctx.rank + 1) + torch.tensor(
        [0.0, 1.0, -2.0, 0.5, 3.0], dtype=torch.float64) * ctx.rank
    if n & (n - 1):
        try:
            hvd.allreduce(x, op=hvd.Adasum, name="adasum.np")
        except NotImplementedError as e:
            assert "power-of-two" in str(e), str(e)
        else:
            raise AssertionError("Adasum ran on a rank count that is not a power of two")
        return
    vs = [torch.arange(1, 6, dtype=torch.float64) * (r + 1) + torch.tensor(
        [0.0, 1.0, -2.0, 0.5, 3.0], dtype=torch.float64) * r for r in range(n)]

    def pair(a, b):  # Horovod's Adasum of two vectors
        dot = float(a @ b)
        ac = 1 - dot / (2 * float(a @ a))
        bc = 1 - dot / (2 * float(b @ b))
        return ac * a + bc * b

    while len(vs) > 1:
        vs = [pair(vs[i], vs[i + 1]) for i in range(0, len(vs), 2)]
    got = hvd.allreduce(x, op=hvd.Adasum, name="adasum.v")
    assert torch.allclose(got, vs[0], rtol=1e-12, atol=1e-12), (got, vs[0])
    # Identical vectors: Adasum gives the vector itself; orthogonal ones: their sum.
    same = hvd.allreduce(torch.tensor([1.0, 2.0]), op=hvd.Adasum, name="adasum.same")
    assert torch.allclose(same, torch.tensor([1.0, 2.0]))
    e = torch.zeros(n * 2)
    e[ctx.rank] = 1.0
    assert torch.allclose(hvd.allreduce(e, op=hvd.Adasum, name="adasum.orth"),
                          (torch.arange(n * 2) < n).float())
    try:
        hvd.reducescatter(x, op=hvd.Adasum, name="adasum.rs")
    except NotImplementedError:
        pass
    else:
        raise AssertionError("reducescatter took Adasum")


def case_exception_types_and_a_rank_failing_alone(ctx):
    hvd = ctx.hvd
    t = torch.ones(4)
    h = hvd.allreduce_async(t, name="exc.dup")
    try:
        hvd.allreduce_async(t, name="exc.dup")
    except ValueError as e:
        assert isinstance(e, hvd.CollectiveError) and "exc.dup" in str(e), e
    else:
        raise AssertionError("a duplicate name was accepted")
    hvd.synchronize(h)
    for bad in (torch.ones(2, dtype=torch.float32), [1, 2.5]):
        try:
            hvd.alltoall(torch.ones(ctx.size), splits=bad)
        except (ValueError, TypeError) as e:
            assert isinstance(e, ValueError) or isinstance(bad, list), type(e)
        else:
            raise AssertionError("bad splits accepted")
    # Rank 0 fails locally (splits that do not add up), the others submit a good call of
    # the same name: they get an error instead of waiting, and everyone goes on.
    n = ctx.size
    splits = [1] * n if ctx.rank else [2] * n
    try:
        hvd.alltoall(torch.ones(n), splits=splits, name="exc.alone")
    except ValueError:
        assert ctx.rank == 0
    except hvd.CollectiveError as e:
        assert ctx.rank != 0 and "exc.alone" in str(e), e
    else:
        raise AssertionError("the call of a rank that failed alone completed elsewhere")
    # An unnamed call that fails on one rank keeps the generated names in step.
    try:
        hvd.allreduce(torch.ones(3) if ctx.rank else "not a tensor", op=hvd.Sum)
    except TypeError:
        assert ctx.rank == 0
    except hvd.CollectiveError:
        assert ctx.rank != 0
    got = hvd.allreduce(torch.ones(3), op=hvd.Sum)
    assert torch.all(got == n)


def case_process_set_root_is_global_and_outsider_steps_locally(ctx):
    hvd = ctx.hvd
    if ctx.size < 3:
        return
    ps = hvd.add_process_set([1, 2])
    if ctx.rank in (1, 2):
        x = torch.full((3,), float(ctx.rank))
        assert torch.all(hvd.broadcast(x, 2, name="ps.root", process_set=ps) == 2.0)
        y = torch.full((2,), float(ctx.rank))
        hvd.broadcast_(y, 1, name="ps.root_", process_set=ps)
        assert torch.all(y == 1.0)
        try:
            hvd.broadcast(x, 0, name="ps.notmember", process_set=ps)
        except ValueError as e:
            assert "not a member" in str(e), e
        else:
            raise AssertionError("a root outside the set was accepted")
        assert hvd.broadcast_object({"r": ctx.rank}, root_rank=2, process_set=ps) == {"r": 2}
    # Rank 0 is outside: its optimizer of that set steps locally, without waiting.
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=ps)
    model(torch.full((1, 2), float(ctx.rank + 1))).sum().backward()
    opt.step()
    if ctx.rank == 0:
        assert torch.allclose(model.weight, torch.zeros(1, 2)), model.weight
    else:
        assert torch.allclose(model.weight, torch.full((1, 2), 1.0 - 2.5)), model.weight
    hvd.barrier()
    hvd.remove_process_set(ps)


def case_integer_scaling_optimizer_state_and_scalar_reducescatter(ctx):
    hvd = ctx.hvd
    n = ctx.size
    for dtype in (torch.int32, torch.int64):
        x = torch.tensor([7, -7, 3, 100], dtype=dtype) + ctx.rank
        for pre, post in ((0.35, 1.0), (1.0, 0.35), (2.5, 1.5)):
            # Horovod: each input scaled in float64 and truncated, summed, then the postscale.
            scaled = [((torch.tensor([7, -7, 3, 100], dtype=dtype) + r).double() * pre).to(dtype)
                      for r in range(n)]
            want = (sum(scaled).double() * post).to(dtype)
            got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=pre, postscale_factor=post,
                                name=f"int.{dtype}.{pre}.{post}")
            assert torch.equal(got, want), (dtype, pre, post, got, want)
            y = x.clone()
            hvd.allreduce_(y, op=hvd.Sum, prescale_factor=pre, postscale_factor=post,
                           name=f"int_.{dtype}.{pre}.{post}")
            assert torch.equal(y, want)
        avg = hvd.allreduce(x, op=hvd.Average, postscale_factor=2.0, name=f"int.avg.{dtype}")
        want = (sum(torch.tensor([7, -7, 3, 100], dtype=dtype) + r for r in range(n)).double()
                * (2.0 / n)).to(dtype)
        assert torch.equal(avg, want), (avg, want)
        rs = hvd.reducescatter(torch.full((n, 2), 3, dtype=dtype), op=hvd.Sum,
                               prescale_factor=0.5, name=f"int.rs.{dtype}")
        assert torch.equal(rs, torch.full((1, 2), n * 1, dtype=dtype)), rs
    # broadcast_optimizer_state: a parameter without a gradient keeps none, the others get
    # (zero) gradients and the optimizer its state, as horovod does.
    class NoGrad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor([1, 3], dtype=torch.int32), requires_grad=False)
            self.b = torch.nn.Parameter(torch.rand(4))

    model = NoGrad()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, nesterov=True)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert model.a.grad is None
    assert model.b.grad is not None and torch.equal(hvd.broadcast(model.b.grad, 0), model.b.grad)
    assert "momentum_buffer" in opt.state[model.b]
    # A 0-dim tensor has nothing to scatter: ValueError as in horovod, on every rank.
    try:
        hvd.reducescatter(torch.tensor(float(ctx.rank)), op=hvd.Average)
    except ValueError as e:
        assert "0-dim" in str(e), e
    else:
        raise AssertionError("reducescatter took a 0-dim tensor")
    assert torch.all(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.scalar") == n)


def case_sync_batch_norm_matches_single_process_reference(ctx):
    """horovod's SyncBatchNorm check (one sample per rank, small integers) and a random
    batch of another size per rank, against torch's BatchNorm over the whole batch, within
    torch.testing.assert_close's default tolerances for the type. (Where the exact value is
    0, the reference itself is off by an ulp of its O(1) terms, about 6e-8: a bound of 1e-8
    there would ask every rank to round as the single process does.)"""
    hvd = ctx.hvd
    batches = [
        torch.stack([torch.tensor([[r, r + 1], [r * 2, r * 2 + 1], [r * 3, r * 3 + 1],
                                   [r * 4, r * 4 + 1]]) for r in range(ctx.size)]).float(),
        torch.stack([torch.tensor([[r + 1], [r * 2 + 1], [r * 3 + 1], [r * 4 + 1]])
                     for r in range(ctx.size)]).float(),
    ]
    g = torch.Generator().manual_seed(11)
    rows = [2 + r for r in range(ctx.size)]
    batches.append(torch.randn(sum(rows), 3, 5, generator=g) * 4 - 1)
    for k, ts in enumerate(batches):
        if k < 2:
            lo, hi = ctx.rank, ctx.rank + 1
        else:
            lo = sum(rows[:ctx.rank])
            hi = lo + rows[ctx.rank]
        channels = ts.shape[1]
        sync_bn = hvd.SyncBatchNorm(num_features=channels)
        bn = torch.nn.BatchNorm1d(num_features=channels)
        ts1 = ts[lo:hi].clone().requires_grad_()
        ts2 = ts.clone().requires_grad_()
        out = sync_bn(ts1)
        ref = bn(ts2)
        torch.testing.assert_close(out, ref[lo:hi], msg=lambda m: f"batch {k} output: {m}")
        torch.testing.assert_close(sync_bn.running_mean, bn.running_mean)
        torch.testing.assert_close(sync_bn.running_var, bn.running_var)
        gout = torch.linspace(-1, 2, ts.numel()).view(ts.shape)
        (out * gout[lo:hi]).sum().backward()
        (ref * gout).sum().backward()
        torch.testing.assert_close(ts1.grad, ts2.grad[lo:hi], msg=lambda m: f"batch {k} input grad: {m}")
        for what, mine, theirs in (("weight", sync_bn.weight.grad, bn.weight.grad),
                                   ("bias", sync_bn.bias.grad, bn.bias.grad)):
            got = hvd.allreduce(mine, op=hvd.Sum, name=f"sbn.{k}.{what}")
            torch.testing.assert_close(got, theirs, msg=lambda m: f"batch {k} {what} grad: {m}")
