"""Random rounds of async operations through collective.torch: every rank starts the
same named operations (allreduce of each reduction, in place or not, grouped allreduce,
broadcast in place or not, allgather with a different number of rows per rank, alltoall
with uneven splits, reducescatter) in its own random order, waits on them in another
(synchronize, or poll until done), and checks each output against a reference built from
every rank's input. Names repeat from round to round with the same shapes."""
import random

import torch

from cases_ops import DTYPES, FLOATS, close, data, reference

ROUNDS = 6


def spec_list(ctx, seed):
    """The same operations on every rank (drawn from one seed)."""
    hvd = ctx.hvd
    g = random.Random(seed)
    kinds = ["allreduce", "allreduce_", "grouped", "broadcast", "broadcast_", "allgather", "alltoall",
             "reducescatter"]
    ops = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max]
    specs = []
    for j in range(14):
        kind = g.choice(kinds)
        dtype = g.choice(DTYPES)
        op = g.choice(ops)
        if kind == "reducescatter":
            op = g.choice([hvd.Sum, hvd.Average]) if dtype in FLOATS else hvd.Sum
        specs.append(dict(kind=kind, dtype=dtype, op=op, cols=g.choice([1, 3, 65, 1000]),
                          rows=g.randint(1, 5), root=g.randrange(ctx.size), name=f"seq{j}"))
    return specs


def gather_rows(j, r):
    return (j * 5 + r * 3) % 3


def split_rows(j, src, dst):
    return (j * 7 + src * 5 + dst * 3) % 3


def start(ctx, s, j, rnd):
    """Starts operation j on this rank; returns (handle, what the check needs)."""
    hvd = ctx.hvd
    shape = (s["rows"], s["cols"])
    mine = data(ctx.rank + rnd, shape, s["dtype"])
    kind = s["kind"]
    if kind == "allreduce":
        return hvd.allreduce_async(mine, name=s["name"], op=s["op"]), None
    if kind == "allreduce_":
        return hvd.allreduce_async_(mine, name=s["name"], op=s["op"]), mine
    if kind == "grouped":
        second = data(ctx.rank + rnd, (2, s["cols"]), s["dtype"])
        return hvd.grouped_allreduce_async([mine, second], name=s["name"], op=s["op"]), None
    if kind == "broadcast":
        return hvd.broadcast_async(mine, s["root"], name=s["name"]), None
    if kind == "broadcast_":
        return hvd.broadcast_async_(mine, s["root"], name=s["name"]), mine
    if kind == "allgather":
        rows = gather_rows(j, ctx.rank)
        return hvd.allgather_async(data(ctx.rank + rnd, (rows, s["cols"]), s["dtype"]), name=s["name"]), None
    if kind == "alltoall":
        splits = [split_rows(j, ctx.rank, q) for q in range(ctx.size)]
        t = data(ctx.rank + rnd, (sum(splits), s["cols"]), s["dtype"])
        return hvd.alltoall_async(t, splits=torch.tensor(splits, dtype=torch.int32), name=s["name"]), None
    rows = s["rows"] + ctx.size  # reducescatter: at least a row per rank
    return hvd.reducescatter_async(data(ctx.rank + rnd, (rows, s["cols"]), s["dtype"]), name=s["name"],
                                   op=s["op"]), None


def check(ctx, s, j, rnd, out, kept):
    what = f"round {rnd} {s['name']} {s['kind']} {s['dtype']}"
    dt, cols = s["dtype"], s["cols"]
    shape = (s["rows"], cols)

    def ref(shape_, op):
        return reference(ctx, op, shape_, dt, offset=rnd)

    kind = s["kind"]
    if kind in ("allreduce", "allreduce_"):
        close(kept if kept is not None else out, ref(shape, s["op"]), dt, what)
    elif kind == "grouped":
        close(out[0], ref(shape, s["op"]), dt, what + " [0]")
        close(out[1], ref((2, cols), s["op"]), dt, what + " [1]")
    elif kind in ("broadcast", "broadcast_"):
        got = kept if kept is not None else out
        assert torch.equal(got, data(s["root"] + rnd, shape, dt)), f"{what}: not the root's tensor"
    elif kind == "allgather":
        want = torch.cat([data(r + rnd, (gather_rows(j, r), cols), dt) for r in range(ctx.size)])
        assert torch.equal(out, want), f"{what}: {out} != {want}"
    elif kind == "alltoall":
        got, received = out
        want = []
        for src in range(ctx.size):
            splits = [split_rows(j, src, q) for q in range(ctx.size)]
            first = sum(splits[:ctx.rank])
            want.append(data(src + rnd, (sum(splits), cols), dt)[first:first + splits[ctx.rank]])
        assert torch.equal(got, torch.cat(want)), f"{what}: rows"
        assert [int(x) for x in received] == [split_rows(j, src, ctx.rank) for src in range(ctx.size)], \
            f"{what}: received splits {received}"
    else:
        rows = s["rows"] + ctx.size
        base, extra = divmod(rows, ctx.size)
        first = ctx.rank * base + min(ctx.rank, extra)
        n = base + (1 if ctx.rank < extra else 0)
        close(out, ref((rows, cols), s["op"])[first:first + n], dt, what)


def case_random_rounds(ctx):
    hvd = ctx.hvd
    specs = spec_list(ctx, 2024)
    mine = random.Random(100 + ctx.rank)  # this rank's orders
    for rnd in range(ROUNDS):
        order = list(range(len(specs)))
        mine.shuffle(order)
        started = {j: start(ctx, specs[j], j, rnd) for j in order}
        mine.shuffle(order)
        poll_all = mine.random() < 0.5
        errors = []
        for j in order:
            handle, kept = started[j]
            if poll_all:
                while not hvd.poll(handle):
                    pass
            out = hvd.synchronize(handle)
            try:
                check(ctx, specs[j], j, rnd, out, kept)
            except AssertionError as e:
                errors.append(str(e))
        # Every rank learns whether any failed, so that all stop together: a rank that
        # went on to the next round alone would wait for the others' operations forever.
        flags = hvd.allgather(torch.tensor([1 if errors else 0], dtype=torch.int32), name=f"seq.outcome.{rnd}")
        assert not errors, errors[0]
        assert int(flags.sum()) == 0, f"round {rnd}: rank(s) {[r for r, f in enumerate(flags.tolist()) if f]} failed"
