"""One rank of the torch.distributed "collective" backend tests (test_c10d.py starts it).

    c10d_cases.py LAUNCH CASE...

LAUNCH: "env" (torchrun's environment), "launcher" (collectiverun: collective.distributed's
init_process_group), or "tcp:ADDR:PORT", "file:PATH", "store:ADDR:PORT" with RANK and
WORLD_SIZE in the environment. Every case checks values against a reference computed
locally; any failure raises, so the rank exits non-zero.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import collective.distributed as cdist

TIMEOUT = datetime.timedelta(seconds=int(os.environ.get("C10D_TEST_TIMEOUT", "60")))
INT_TYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
FLOAT_TYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def init(launch):
    if launch == "env":
        dist.init_process_group("collective", timeout=TIMEOUT)
    elif launch == "launcher":
        cdist.init_process_group(timeout=TIMEOUT)
    else:
        kind, rest = launch.split(":", 1)
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if kind == "tcp":
            dist.init_process_group("collective", init_method="tcp://" + rest, rank=rank, world_size=size,
                                    timeout=TIMEOUT)
        elif kind == "file":
            dist.init_process_group("collective", init_method="file://" + rest, rank=rank, world_size=size,
                                    timeout=TIMEOUT)
        elif kind == "store":
            addr, port = rest.rsplit(":", 1)
            store = dist.TCPStore(addr, int(port), size, rank == 0, TIMEOUT)
            dist.init_process_group("collective", store=store, rank=rank, world_size=size, timeout=TIMEOUT)
        else:
            raise SystemExit("unknown launch " + launch)
    assert dist.get_backend() == "collective" or dist.get_backend().lower() == "collective", dist.get_backend()


def data(rank, n, dtype, salt=0):
    """Small integer values (exact in every dtype, also summed over a few ranks)."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    lo, hi = (0, 4) if dtype == torch.uint8 else (-3, 4)
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def expect(what, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what} on rank {dist.get_rank()}: got {got} want {want}")


def reference(op, ins):
    out = ins[0].clone()
    for t in ins[1:]:
        if op == dist.ReduceOp.SUM:
            out = (out | t) if out.dtype == torch.bool else out + t
        elif op == dist.ReduceOp.PRODUCT:
            out = (out & t) if out.dtype == torch.bool else out * t
        elif op == dist.ReduceOp.MIN:
            out = torch.minimum(out, t)
        elif op == dist.ReduceOp.MAX:
            out = torch.maximum(out, t)
        elif op == dist.ReduceOp.BAND:
            out = out & t
        elif op == dist.ReduceOp.BOR:
            out = out | t
        elif op == dist.ReduceOp.BXOR:
            out = out ^ t
    return out.to(ins[0].dtype)


def case_allreduce():
    rank, size = dist.get_rank(), dist.get_world_size()
    for dtype in FLOAT_TYPES + INT_TYPES + [torch.bool]:
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
        if not dtype.is_floating_point:
            ops += [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
        for k, op in enumerate(ops):
            for n in (0, 1, 1001):
                ins = [data(r, n, dtype, salt=k) for r in range(size)]
                if op == dist.ReduceOp.PRODUCT and dtype != torch.bool:
                    lo = 1 if dtype == torch.uint8 else -2  # products stay exact and in range
                    ins = [torch.clamp(torch.where(t == 0, torch.ones_like(t), t).double(), lo, 2).to(dtype)
                           for t in ins]
                t = ins[rank].clone()
                dist.all_reduce(t, op=op)
                expect(f"all_reduce {op} {dtype} n={n}", t, reference(op, ins))
    # AVG (floats) and PREMUL_SUM.
    ins = [data(r, 64, torch.float32) * 2 for r in range(size)]
    t = ins[rank].clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    want = sum(ins) / size
    if not torch.allclose(t, want):
        raise AssertionError(f"all_reduce AVG: {t} vs {want}")
    t = ins[rank].clone()
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    expect("all_reduce PREMUL_SUM(0.5)", t, sum(x * 0.5 for x in ins))
    # Non-contiguous: every other column of a matrix.
    base = torch.stack([data(rank, 10, torch.float32, salt=c) for c in range(6)], dim=1)
    view = base[:, ::2]
    assert not view.is_contiguous()
    dist.all_reduce(view)
    want = sum(torch.stack([data(r, 10, torch.float32, salt=c) for c in range(6)], dim=1) for r in range(size))
    expect("all_reduce non-contiguous", base[:, ::2], want[:, ::2])
    expect("all_reduce non-contiguous (untouched columns)", base[:, 1::2],
           torch.stack([data(rank, 10, torch.float32, salt=c) for c in range(6)], dim=1)[:, 1::2])
    # Coalesced.
    a, b = data(rank, 5, torch.float64, 1), data(rank, 7, torch.float64, 2)
    dist.all_reduce_coalesced([a, b])
    expect("all_reduce_coalesced a", a, sum(data(r, 5, torch.float64, 1) for r in range(size)))
    expect("all_reduce_coalesced b", b, sum(data(r, 7, torch.float64, 2) for r in range(size)))


def case_rooted():
    rank, size = dist.get_rank(), dist.get_world_size()
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64):
        root = size - 1
        n = 33
        src = data(root, n, torch.float32).to(dtype)
        t = src.clone() if rank == root else torch.zeros(n, dtype=dtype)
        dist.broadcast(t, src=root)
        expect(f"broadcast {dtype}", t, src)
    for dtype in (torch.float32, torch.int32):
        root = 1 % size
        ins = [data(r, 17, dtype) for r in range(size)]
        t = ins[rank].clone()
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if rank == root:
            expect(f"reduce {dtype}", t, reference(dist.ReduceOp.SUM, ins))
        # gather / scatter
        g = [torch.zeros(17, dtype=dtype) for _ in range(size)] if rank == root else None
        dist.gather(ins[rank], gather_list=g, dst=root)
        if rank == root:
            for r in range(size):
                expect(f"gather {dtype} part {r}", g[r], ins[r])
        out = torch.zeros(17, dtype=dtype)
        dist.scatter(out, scatter_list=[x.clone() for x in ins] if rank == root else None, src=root)
        expect(f"scatter {dtype}", out, ins[rank])


def case_gathers():
    rank, size = dist.get_rank(), dist.get_world_size()
    for dtype in (torch.float16, torch.int8, torch.float64):
        ins = [data(r, 9, dtype) for r in range(size)]
        outs = [torch.zeros(9, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, ins[rank])
        for r in range(size):
            expect(f"all_gather {dtype} part {r}", outs[r], ins[r])
        flat = torch.zeros(9 * size, dtype=dtype)
        dist.all_gather_into_tensor(flat, ins[rank])
        expect(f"all_gather_into_tensor {dtype}", flat, torch.cat(ins))
        # reduce-scatter: each rank's input is size parts
        parts = [[data(r, 4, dtype, salt=p) for p in range(size)] for r in range(size)]
        out = torch.zeros(4, dtype=dtype)
        dist.reduce_scatter(out, [p.clone() for p in parts[rank]])
        expect(f"reduce_scatter {dtype}", out, sum(parts[r][rank] for r in range(size)))
        out2 = torch.zeros(4, dtype=dtype)
        dist.reduce_scatter_tensor(out2, torch.cat(parts[rank]))
        expect(f"reduce_scatter_tensor {dtype}", out2, sum(parts[r][rank] for r in range(size)))
    # all_gather_coalesced: two tensors of two dtypes
    a, b = data(rank, 3, torch.float32), data(rank, 5, torch.float32, 1).reshape(5, 1)
    out_lists = [[torch.zeros(3), torch.zeros(5, 1)] for _ in range(size)]
    dist.all_gather_coalesced(out_lists, [a, b])
    for r in range(size):
        expect("all_gather_coalesced a", out_lists[r][0], data(r, 3, torch.float32))
        expect("all_gather_coalesced b", out_lists[r][1], data(r, 5, torch.float32, 1).reshape(5, 1))
    # zero-element
    z = [torch.zeros(0) for _ in range(size)]
    dist.all_gather(z, torch.zeros(0))
    # Large lists (1 MiB or more in all: each part goes straight into its tensor), also of
    # a type without a reduction, and with one non-contiguous output (staged instead).
    for dtype in (torch.float32, torch.complex64):
        ins = [data(r, 1 << 17, torch.float32).to(dtype) for r in range(size)]
        outs = [torch.zeros(1 << 17, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, ins[rank])
        for r in range(size):
            expect(f"large all_gather {dtype} part {r}", outs[r], ins[r])
    ins = [data(r, 1 << 18, torch.float32) for r in range(size)]
    wide = torch.zeros(1 << 18, 2)
    outs = [torch.zeros(1 << 18) for _ in range(size - 1)] + [wide[:, 1]]
    dist.all_gather(outs, ins[rank])
    for r in range(size):
        expect(f"large all_gather, last output strided, part {r}", outs[r], ins[r])


def case_alltoall():
    rank, size = dist.get_rank(), dist.get_world_size()

    def rows(frm, to):
        return (frm + 2 * to) % 4  # uneven, some empty

    def part(frm, to, dtype):
        return (torch.arange(rows(frm, to) * 3).reshape(-1, 3) + 100 * frm + 10 * to).to(dtype)

    for dtype in (torch.float32, torch.int16, torch.float64):
        inp = torch.cat([part(rank, p, dtype) for p in range(size)])
        in_splits = [rows(rank, p) for p in range(size)]
        out_splits = [rows(p, rank) for p in range(size)]
        out = torch.zeros(sum(out_splits), 3, dtype=dtype)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        expect(f"all_to_all_single uneven {dtype}", out, torch.cat([part(p, rank, dtype) for p in range(size)]))
        # even split
        even_in = torch.arange(size * 4, dtype=dtype) + 1000 * rank
        even_out = torch.zeros(size * 4, dtype=dtype)
        dist.all_to_all_single(even_out, even_in)
        expect(f"all_to_all_single even {dtype}", even_out,
               torch.cat([(torch.arange(size * 4, dtype=dtype) + 1000 * p)[4 * rank:4 * rank + 4]
                          for p in range(size)]))
        # list form
        outs = [torch.zeros(rows(p, rank), 3, dtype=dtype) for p in range(size)]
        dist.all_to_all(outs, [part(rank, p, dtype) for p in range(size)])
        for p in range(size):
            expect(f"all_to_all list {dtype} from {p}", outs[p], part(p, rank, dtype))


def case_p2p():
    rank, size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    for n in (1, 1000, 300000):
        mine = data(rank, n, torch.float32, salt=n)
        got = torch.zeros(n)
        # both directions in flight at once
        reqs = [dist.isend(mine, right, tag=7), dist.irecv(got, left, tag=7)]
        for r in reqs:
            r.wait()
        expect(f"isend/irecv n={n}", got, data(left, n, torch.float32, salt=n))
    # blocking, ordered by rank parity, two tags in order
    a, b = torch.zeros(4, dtype=torch.int32), torch.zeros(6, dtype=torch.int32)
    if rank % 2 == 0:
        dist.send(torch.full((4,), rank, dtype=torch.int32), right, tag=1)
        dist.send(torch.full((6,), -rank, dtype=torch.int32), right, tag=2)
        if size % 2 == 0 or rank != 0:
            dist.recv(a, left, tag=1)
            dist.recv(b, left, tag=2)
    else:
        dist.recv(a, left, tag=1)
        dist.recv(b, left, tag=2)
        dist.send(torch.full((4,), rank, dtype=torch.int32), right, tag=1)
        dist.send(torch.full((6,), -rank, dtype=torch.int32), right, tag=2)
    if size % 2 == 1 and rank == 0:
        dist.recv(a, left, tag=1)
        dist.recv(b, left, tag=2)
    expect("send/recv tag 1", a, torch.full((4,), left, dtype=torch.int32))
    expect("send/recv tag 2", b, torch.full((6,), -left, dtype=torch.int32))
    dist.barrier()


def case_futures():
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((8,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    fut2 = fut.then(lambda f: f.value() + 1)
    got = fut2.wait()
    want = torch.full((8,), float(sum(range(1, size + 1)))) * 2 + 1
    expect("future then then", got, want)
    assert work.is_completed() and work.is_success()
    # A callback that waits for a later operation (as the PowerSGD hook does).
    x = torch.ones(3)

    def nested(f):
        y = f.value()[0].clone()
        return dist.all_reduce(y, async_op=True).get_future().wait()[0]

    got = dist.all_reduce(x, async_op=True).get_future().then(nested).wait()
    expect("nested future", got, torch.full((3,), float(size * size)))
    # many in flight
    ts = [torch.full((100,), float(i + rank)) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, w in enumerate(works):
        w.wait()
        expect(f"async all_reduce {i}", ts[i], torch.full((100,), float(i * size + sum(range(size)))))
    # Small calls (which may run on the calling thread) behind large ones in flight (on the
    # worker) and between them: each must run in issue order, on every rank the same.
    for rnd in range(10):
        big = torch.full((1 << 18,), float(rank + rnd))
        small = torch.full((4,), float(rank * 10 + rnd))
        root_t = torch.full((2,), float(rank + 100 * rnd))
        w1 = dist.all_reduce(big, async_op=True)
        w2 = dist.all_reduce(small, op=dist.ReduceOp.MAX, async_op=True)
        w3 = dist.broadcast(root_t, src=size - 1, async_op=True)
        dist.all_reduce(big)
        for w in (w1, w2, w3):
            w.wait()
        expect(f"round {rnd}: large all_reduce twice", big,
               torch.full((1 << 18,), float(size * sum(r + rnd for r in range(size)))))
        expect(f"round {rnd}: small all_reduce(max) behind it", small, torch.full((4,), float((size - 1) * 10 + rnd)))
        expect(f"round {rnd}: small broadcast", root_t, torch.full((2,), float(size - 1 + 100 * rnd)))
        assert w2.is_completed() and w3.is_completed()


def case_subgroups():
    rank, size = dist.get_rank(), dist.get_world_size()
    members = [0, size - 1] if size > 2 else [0, 1]
    g = dist.new_group(members)
    odd = dist.new_group(list(range(1, size)))
    if rank in members:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        expect("subgroup all_reduce", t, torch.tensor([float(sum(members))]))
        outs = [torch.zeros(1) for _ in members]
        dist.all_gather(outs, torch.tensor([float(rank)]), group=g)
        expect("subgroup all_gather", torch.cat(outs), torch.tensor([float(m) for m in members]))
        dist.broadcast(t, src=members[-1], group=g)
    if rank >= 1:
        t = torch.tensor([rank])
        dist.all_reduce(t, group=odd, op=dist.ReduceOp.MAX)
        expect("subgroup 1.. all_reduce max", t, torch.tensor([size - 1]))
    dist.barrier()


def case_errors():
    rank, size = dist.get_rank(), dist.get_world_size()

    def raises(what, fn, text):
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            if text not in str(e):
                raise AssertionError(f"{what}: message {e!r} does not say {text!r}")
            return
        raise AssertionError(f"{what} did not raise")

    raises("all_gather with a short list", lambda: dist.all_gather([torch.zeros(2)], torch.zeros(2)), "output list")
    raises("all_gather with a wrong size", lambda: dist.all_gather([torch.zeros(3) for _ in range(size)],
                                                                   torch.zeros(2)), "elements")
    raises("all_to_all_single with bad splits",
           lambda: dist.all_to_all_single(torch.zeros(4), torch.zeros(4), [1] * size, [5] * size), "split sizes")
    raises("float bitwise reduction", lambda: dist.all_reduce(torch.zeros(2), op=dist.ReduceOp.BAND), "bitwise")
    raises("broadcast root out of range", lambda: dist.broadcast(torch.zeros(2), src=size), "out of range")
    raises("reduce_scatter_tensor bad size",
           lambda: dist.reduce_scatter_tensor(torch.zeros(3), torch.zeros(3 * size + 1)), "world size")
    # the group still works afterwards
    t = torch.ones(1)
    dist.all_reduce(t)
    expect("all_reduce after refused calls", t, torch.tensor([float(size)]))


class Net(torch.nn.Module):
    """The reference Fashion-MNIST CNN, on 28x28 single-channel images."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = torch.nn.Linear(16 * 7 * 7, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


FASHION_MNIST = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
_fashion = {}


def fashion_mnist(split):
    """(images as float [N, 1, 28, 28] scaled to [0, 1], labels [N]) of the Fashion-MNIST
    IDX files (the dataset-fashion-mnist package)."""
    import gzip
    if split not in _fashion:
        prefix = "train" if split == "train" else "t10k"
        def idx(name):
            path = os.path.join(FASHION_MNIST, name)
            if not os.path.exists(path):
                raise AssertionError(f"{path} is missing (apt-get install dataset-fashion-mnist, or set FASHION_MNIST_DIR)")
            with gzip.open(path, "rb") as f:
                return bytearray(f.read())
        images, labels = idx(f"{prefix}-images-idx3-ubyte.gz"), idx(f"{prefix}-labels-idx1-ubyte.gz")
        n = int.from_bytes(images[4:8], "big")
        assert int.from_bytes(images[0:4], "big") == 2051 and int.from_bytes(labels[0:4], "big") == 2049
        x = torch.frombuffer(images, dtype=torch.uint8, offset=16).view(n, 1, 28, 28).float() / 255.0
        y = torch.frombuffer(labels, dtype=torch.uint8, offset=8).long()
        _fashion[split] = (x, y)
    return _fashion[split]


def train(steps, group=None, hook=None, hook_state=None, evaluate=False):
    """DDP of the reference CNN on Fashion-MNIST: step s of rank r takes the 16 training
    images after (s * size + r) * 16. Returns the parameters, flattened (and with
    evaluate, the accuracy on the first 2000 test images)."""
    rank, size = dist.get_rank(), dist.get_world_size() if group is None else group.size()
    torch.manual_seed(0)
    model = Net()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=1)
    if hook is not None:
        ddp.register_comm_hook(hook_state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    images, labels = fashion_mnist("train")
    for s in range(steps):
        at = ((s * size + rank) * 16) % (images.shape[0] - 16)
        x, y = images[at:at + 16], labels[at:at + 16]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    if not evaluate:
        return flat
    tx, ty = fashion_mnist("test")
    with torch.no_grad():
        accuracy = (model(tx[:2000]).argmax(1) == ty[:2000]).float().mean().item()
    return flat, accuracy


def same_on_all_ranks(what, flat):
    size = dist.get_world_size()
    outs = [torch.zeros_like(flat) for _ in range(size)]
    dist.all_gather(outs, flat)
    for r in range(size):
        if not torch.equal(outs[r], flat):
            raise AssertionError(f"{what}: parameters differ between rank {dist.get_rank()} and rank {r}")


def case_ddp():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    steps = int(os.environ.get("C10D_DDP_STEPS", "100"))
    ours, accuracy = train(steps, evaluate=True)
    same_on_all_ranks("DDP on collective", ours)
    gloo = dist.new_group(backend="gloo")
    theirs, gloo_accuracy = train(steps, group=gloo, evaluate=True)
    if not torch.allclose(ours, theirs, rtol=1e-4, atol=1e-5):
        raise AssertionError(f"DDP on collective differs from Gloo by {(ours - theirs).abs().max().item()}")
    # It learns: 100 steps of 16 images per rank take an untrained CNN (10%) past 60%.
    if steps >= 100 and accuracy < 0.6:
        raise AssertionError(f"DDP on collective: test accuracy {accuracy:.3f} after {steps} steps")
    if dist.get_rank() == 0:
        print(f"DDP {steps} steps on Fashion-MNIST: test accuracy {accuracy:.4f} (Gloo {gloo_accuracy:.4f})", flush=True)
    def bf16_hook(state, bucket):
        # torch 1.13 refuses bf16_compress_hook by name unless built with NCCL 2.10+; the
        # hook itself is a bfloat16 all-reduce, which this backend has.
        return default_hooks.bf16_compress_hook(state, bucket)

    for name, hook, state in (("fp16_compress_hook", default_hooks.fp16_compress_hook, None),
                              ("bf16_compress_hook", bf16_hook, None),
                              ("PowerSGD", powerSGD_hook.powerSGD_hook,
                               powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                                           start_powerSGD_iter=2))):
        p = train(5, hook=hook, hook_state=state)
        if not torch.isfinite(p).all():
            raise AssertionError(f"DDP with {name}: parameters are not finite")
        same_on_all_ranks(f"DDP with {name}", p)


def case_killed():
    """Rank 1 dies after a first all-reduce; the others' next all-reduce raises."""
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        sys.stdout.flush()
        os._exit(3)
    start = time.time()
    try:
        work = dist.all_reduce(torch.ones(1 << 16), async_op=True)
        work.wait()
    except RuntimeError as e:
        took = time.time() - start
        assert "collective" in str(e), str(e)
        assert took < TIMEOUT.total_seconds() * 3, took
        print(f"rank {rank}: all_reduce with a dead peer raised after {took:.1f} s: {str(e)[:200]}", flush=True)
        os._exit(0)
    raise AssertionError("all_reduce with a dead peer did not raise")


def case_smoke():
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((5,), float(rank))
    dist.all_reduce(t)
    expect("smoke all_reduce", t, torch.full((5,), float(sum(range(size)))))


def case_frozen():
    """Rank 1 stops (SIGSTOP) after a first all-reduce; the others' next all-reduce raises
    within the group's timeout instead of waiting for it."""
    import signal
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(4)
    start = time.time()
    try:
        dist.all_reduce(torch.ones(16))
    except RuntimeError as e:
        took = time.time() - start
        assert "collective" in str(e), str(e)
        assert took < TIMEOUT.total_seconds() * 3 + 5, took
        print(f"rank {rank}: all_reduce with a frozen peer raised after {took:.1f} s: {str(e)[:200]}", flush=True)
        os._exit(0)
    raise AssertionError("all_reduce with a frozen peer did not raise")


def raises(what, fn, exc, text):
    """Runs fn, which must raise exc with `text` in its message; returns the message."""
    try:
        fn()
    except exc as e:
        if text not in str(e):
            raise AssertionError(f"{what}: message {e!r} does not say {text!r}")
        return str(e)
    raise AssertionError(f"{what} did not raise {exc.__name__}")


MB_TIMEOUT = datetime.timedelta(seconds=3)


def case_mbarrier_ok():
    """monitored_barrier with every rank there: no error, in step with the other operations."""
    rank, size = dist.get_rank(), dist.get_world_size()
    for i in range(5):
        cdist.monitored_barrier(timeout=MB_TIMEOUT, wait_all_ranks=(i % 2 == 1))
        t = torch.full((3,), float(rank + i))
        dist.all_reduce(t)
        expect(f"all_reduce after monitored_barrier {i}", t, torch.full((3,), float(sum(range(size)) + size * i)))
    cdist.monitored_barrier()  # the group's timeout, the default group
    # Ranks arriving at different times within the timeout: rank 0 waits for the last.
    time.sleep(0.3 * rank)
    start = time.time()
    cdist.monitored_barrier(timeout=MB_TIMEOUT)
    if rank == 0 and time.time() - start < 0.3 * (size - 1) - 0.1:
        raise AssertionError(f"rank 0 passed monitored_barrier after {time.time() - start:.2f} s, before the last rank")
    # A subgroup (of its members only) and a Gloo group (torch's own monitored_barrier).
    members = [0, size - 1]
    g = dist.new_group(members)
    gloo = dist.new_group(backend="gloo")
    if rank in members:
        for _ in range(3):
            cdist.monitored_barrier(group=g, timeout=MB_TIMEOUT, wait_all_ranks=True)
    cdist.monitored_barrier(group=gloo, timeout=MB_TIMEOUT)
    dist.barrier()


def case_mbarrier_errors():
    """Bad arguments raise at the call and leave the group usable."""
    rank, size = dist.get_rank(), dist.get_world_size()
    raises("negative timeout", lambda: cdist.monitored_barrier(timeout=datetime.timedelta(seconds=-5)),
           ValueError, "at least 1 ms")
    raises("zero timeout", lambda: cdist.monitored_barrier(timeout=datetime.timedelta(0)), ValueError,
           "at least 1 ms")
    raises("timeout in seconds", lambda: cdist.monitored_barrier(timeout=5), TypeError, "datetime.timedelta")
    raises("not a group", lambda: cdist.monitored_barrier(group="world"), TypeError, "process group")
    # The process group's own method refuses a negative timeout too.
    pg = dist.distributed_c10d._get_default_group()
    raises("ProcessGroup.monitored_barrier with a negative timeout",
           lambda: pg.monitored_barrier(datetime.timedelta(seconds=-5)), RuntimeError, "must be positive, got -5000 ms")
    others = dist.new_group([r for r in range(size) if r != 1])
    if rank == 1:
        raises("a group without this rank", lambda: cdist.monitored_barrier(group=others), ValueError,
               "rank 1 is not a member of the given group")
    else:
        cdist.monitored_barrier(group=others, timeout=MB_TIMEOUT)
    cdist.monitored_barrier(timeout=MB_TIMEOUT)
    t = torch.ones(2)
    dist.all_reduce(t)
    expect("all_reduce after refused monitored_barriers", t, torch.full((2,), float(size)))


def _mbarrier_missing(absent, wait_all):
    """Ranks in `absent` stay away from a monitored_barrier of a group of all ranks (a group
    of its own: a failed barrier makes its group unusable); rank 0 must name them within
    about the timeout, the others present must fail for want of rank 0's release, and
    every rank's next operation on the group must raise rather than hang."""
    rank = dist.get_rank()
    timeout = MB_TIMEOUT.total_seconds()
    g = dist.new_group(list(range(dist.get_world_size())))
    start = time.time()
    if rank in absent:
        time.sleep(timeout + 1)
        # Late: the ranks that came have given up and revoked the group (whichever of them
        # timed out first: rank 0 waiting for check-ins, or another for its release); this
        # fails at once.
        msg = raises("a late monitored_barrier", lambda: cdist.monitored_barrier(group=g, timeout=MB_TIMEOUT),
                     RuntimeError, f"monitored_barrier on rank {rank}")
        if not any(f"revoked by rank {r}" in msg for r in range(dist.get_world_size()) if r not in absent):
            raise AssertionError(f"the late monitored_barrier does not name a present rank's revoke: {msg}")
        if time.time() - start > 2 * timeout + 10:
            raise AssertionError(f"the late monitored_barrier on rank {rank} took {time.time() - start:.1f} s")
        print(f"rank {rank}: a late monitored_barrier raised: {msg}", flush=True)
    elif rank == 0:
        ranks = ", ".join(str(r) for r in absent)
        word = "Ranks " if len(absent) > 1 else "Rank "
        msg = raises("monitored_barrier with absent ranks",
                     lambda: cdist.monitored_barrier(group=g, timeout=MB_TIMEOUT, wait_all_ranks=wait_all),
                     RuntimeError, f"{word}{ranks} failed to pass monitoredBarrier in {int(timeout * 1000)} ms")
        took = time.time() - start
        if not timeout - 0.5 < took < timeout + 10:
            raise AssertionError(f"rank 0's monitored_barrier failed after {took:.1f} s, the timeout being {timeout} s")
        print(f"rank 0: monitored_barrier raised after {took:.1f} s: {msg}", flush=True)
    else:
        msg = raises("monitored_barrier without rank 0's release",
               lambda: cdist.monitored_barrier(group=g, timeout=MB_TIMEOUT, wait_all_ranks=wait_all),
               RuntimeError, f"monitored_barrier on rank {rank}")
        took = time.time() - start
        if took > timeout + 10:
            raise AssertionError(f"rank {rank}'s monitored_barrier failed after {took:.1f} s")
        print(f"rank {rank}: monitored_barrier raised after {took:.1f} s: {msg}", flush=True)
    # The group is unusable now, on every rank: its next operation raises.
    msg = raises("all_reduce on the group after a failed monitored_barrier",
                 lambda: dist.all_reduce(torch.ones(1), group=g), RuntimeError, "collective")
    print(f"rank {rank}: then all_reduce on the group raised: {msg}", flush=True)
    # The default group is another communicator: it still works.
    t = torch.ones(1)
    dist.all_reduce(t)
    expect("all_reduce on the default group", t, torch.full((1,), float(dist.get_world_size())))
    dist.destroy_process_group(g)


def case_mbarrier_absent():
    """Rank 2 does not come: rank 0 names it (wait_all_ranks=False)."""
    _mbarrier_missing([2], False)


def case_mbarrier_all_absent():
    """Ranks 1 and 2 do not come: with wait_all_ranks=True rank 0 names both."""
    _mbarrier_missing([1, 2], True)


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    # torchrun here runs with --redirects 2 --tee 1 (see test_c10d.py): errors go to stdout.
    sys.stderr = sys.stdout
    launch, names = sys.argv[1], sys.argv[2:]
    init(launch)
    for name in names:
        t0 = time.time()
        CASES[name]()
        if dist.get_rank() == 0:
            print(f"{name}: ok ({time.time() - t0:.1f} s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
