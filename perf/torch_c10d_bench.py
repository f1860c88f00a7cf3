"""Each collective through torch.distributed: the "collective" backend against Gloo, in
one job, interleaved (for every size and collective, rounds alternate ours, Gloo, ours,
Gloo...), repeated; prints per size the time of each and Gloo's time / ours (> 1: ours is
faster) as min / median / max over the rounds.

    collectiverun -np 2 /usr/bin/python3 perf/torch_c10d_bench.py \
        [--min-bytes 8] [--max-bytes 64M] [--rounds 5] [--ops all_reduce,broadcast,...]

(or under torchrun; collective.distributed.init_process_group takes either launcher).

Needs collective.distributed importable (PYTHONPATH=python, COLL_C10D_MODULE=<build>/python/_c10d*.so
in a build tree). float32 tensors; the size is one rank's tensor in bytes.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import collective.distributed as cdist


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * mult[text[-1].upper()] if text[-1].upper() in mult else int(text)


def make_op(name, nbytes, group, rank, size):
    n = max(1, nbytes // 4)
    t = torch.ones(n)
    if name == "all_reduce":
        return lambda: dist.all_reduce(t, group=group)
    if name == "broadcast":
        return lambda: dist.broadcast(t, src=0, group=group)
    if name == "reduce":
        return lambda: dist.reduce(t, dst=0, group=group)
    if name == "all_gather":
        outs = [torch.empty(n) for _ in range(size)]
        return lambda: dist.all_gather(outs, t, group=group)
    if name == "gather":
        outs = [torch.empty(n) for _ in range(size)] if rank == 0 else None
        return lambda: dist.gather(t, gather_list=outs, dst=0, group=group)
    if name == "scatter":
        ins = [torch.ones(n) for _ in range(size)] if rank == 0 else None
        out = torch.empty(n)
        return lambda: dist.scatter(out, scatter_list=ins, src=0, group=group)
    if name == "all_to_all_single":
        m = max(size, (n // size) * size)
        a, b = torch.ones(m), torch.empty(m)
        return lambda: dist.all_to_all_single(b, a, group=group)
    if name == "barrier":
        return lambda: dist.barrier(group=group)
    raise ValueError(name)


def time_op(fn, group, budget=0.05, max_iters=2000):
    """Seconds per call: warm-up, then as many calls as fit in about `budget` seconds
    (the count agreed between the ranks, so that they make the same calls)."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    iters = torch.tensor([min(max_iters, max(1, int(budget / one)))])
    dist.all_reduce(iters, op=dist.ReduceOp.MAX, group=group)
    iters = int(iters.item())
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    el = torch.tensor([(time.perf_counter() - t0) / iters])
    dist.all_reduce(el, op=dist.ReduceOp.MAX, group=group)
    return el.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", default="8")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", default="all_reduce,broadcast,reduce,all_gather,gather,scatter,all_to_all_single,barrier")
    ap.add_argument("--factor", type=int, default=8, help="size step")
    args = ap.parse_args()
    cdist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    sizes = []
    s = parse_size(args.min_bytes)
    while s <= parse_size(args.max_bytes):
        sizes.append(s)
        s *= args.factor
    if rank == 0:
        print(f"# {size} ranks, float32, {args.rounds} interleaved rounds; times in us; ratio = Gloo time / ours")
        print(f"{'op':>18} {'bytes':>10} {'ours(med)':>11} {'gloo(med)':>11} {'ratio min':>9} {'median':>7} {'max':>7}")
    for name in args.ops.split(","):
        for nbytes in (sizes if name != "barrier" else [0]):
            ours_fn = make_op(name, nbytes, None, rank, size)
            gloo_fn = make_op(name, nbytes, gloo, rank, size)
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(time_op(ours_fn, None))
                theirs.append(time_op(gloo_fn, gloo))
            ratios = [g / o for g, o in zip(theirs, ours)]
            if rank == 0:
                print(f"{name:>18} {nbytes:>10} {statistics.median(ours) * 1e6:>11.1f} "
                      f"{statistics.median(theirs) * 1e6:>11.1f} {min(ratios):>9.2f} "
                      f"{statistics.median(ratios):>7.2f} {max(ratios):>7.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
