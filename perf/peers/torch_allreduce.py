#!/usr/bin/python3
"""The PyTorch peer of all_reduce_perf: torch.distributed all_reduce (gloo backend, float
sum) over the same size sweep, timing rule (per-iteration average, max over ranks) and
table as the other peers. Starts its own ranks with torch.multiprocessing.spawn.

  /usr/bin/python3 torch_allreduce.py -np 2 -b 8 -e 64M -f 4 [-n 20] [-w 5] [-c 1]
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# Same rule as perf::itersForSize: default -n/-w shrink above 8 MiB.
SCALE_ABOVE = 8 << 20


def parse_size(text):
    units = {"k": 10, "m": 20, "g": 30}
    suffix = text[-1:].lower()
    if suffix in units:
        return int(text[:-1]) << units[suffix]
    return int(text)


def size_list(args):
    sizes, s = [], args.b
    while True:
        sizes.append(s)
        nxt = int(s * args.f)
        if nxt <= s or nxt > args.e:
            return sizes
        s = nxt


def iters_for(args, nbytes):
    iters = args.n if args.n is not None else 20
    warmup = args.w if args.w is not None else 5
    if nbytes > SCALE_ABOVE:
        scale = SCALE_ABOVE / nbytes
        if args.n is None:
            iters = max(2, int(iters * scale))
        if args.w is None:
            warmup = min(warmup, max(1, int(warmup * scale)))
    return iters, warmup


def pattern(rank, count):
    # perf::Pattern for float sum: (elem*7 + rank*37) % 100, exact in float.
    idx = torch.arange(count, dtype=torch.int64)
    return ((idx % 100) * 7 + rank * 37).remainder(100).to(torch.float32)


def run_size(rank, world, args, nbytes):
    count = nbytes // 4
    if count == 0:
        return 0
    iters, warmup = iters_for(args, nbytes)
    data = pattern(rank, count)
    for _ in range(warmup):
        dist.all_reduce(data)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(data)
    t = torch.tensor([(time.perf_counter() - start) / iters * 1e6], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    wrong = -1
    if args.c:
        data = pattern(rank, count)
        dist.all_reduce(data)
        expected = sum(pattern(r, count) for r in range(world))
        w = torch.tensor([int((data != expected).sum())], dtype=torch.int64)
        dist.all_reduce(w, op=dist.ReduceOp.MAX)
        wrong = int(w)
    if rank == 0:
        us = float(t)
        algbw = nbytes / us / 1e3 if us > 0 else 0.0
        busbw = algbw * 2 * (world - 1) / world
        tstr = "%.2f" % us if us < 1e4 else ("%.1f" % us if us < 1e5 else "%.0f" % us)
        wstr = "N/A" if wrong < 0 else str(wrong)
        print("%12d  %12d  %8s  %6s  %6d  %8s  %7.2f  %7.2f  %6s"
              % (count * 4, count, "float", "sum", -1, tstr, algbw, busbw, wstr), flush=True)
    return max(wrong, 0)


def worker(rank, world, port, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            world_size=world, rank=rank)
    if rank == 0:
        print("# torch_allreduce.py: torch.distributed all_reduce, gloo backend, float sum,"
              " nranks %d, torch %s" % (world, torch.__version__))
        fmt = "# %10s  %12s  %8s  %6s  %6s  %8s  %7s  %7s  %6s"
        print(fmt % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                     "#wrong"))
        print(fmt % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""),
              flush=True)
    wrong = sum(run_size(rank, world, args, s) for s in size_list(args))
    if rank == 0:
        print("# Out of bounds values : %d %s" % (wrong, "FAILED" if wrong else "OK"),
              flush=True)
    dist.destroy_process_group()
    if wrong:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-np", type=int, default=2)
    p.add_argument("-b", type=parse_size, default=8)
    p.add_argument("-e", type=parse_size, default=128 << 20)
    p.add_argument("-f", type=float, default=2.0)
    p.add_argument("-n", type=int, default=None)
    p.add_argument("-w", type=int, default=None)
    p.add_argument("-c", type=int, default=1)
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(worker, args=(args.np, port, args), nprocs=args.np, join=True)


if __name__ == "__main__":
    main()
