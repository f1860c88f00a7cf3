#!/usr/bin/python3
"""PyTorch (gloo) peer for engine_bench resnet: the ResNet-50 gradient set all-reduced
the two ways PyTorch users do it, timed like engine_bench (median of N steps):

  async161  161 dist.all_reduce(async_op=True) in backward order, then wait all
  bucketed  DDP-style: gradients packed into 25 MiB buckets in backward order, one
            async all_reduce per bucket, unpacked afterwards

Run one process per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set
(run_torch_compare.sh does). Rank 0 prints "RESULT torch_<mode>_ms <ms>" lines.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def load_shapes(path):
    shapes = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, shape, _ = line.rstrip("\n").split("\t")
            shapes.append((name, [int(d) for d in shape.split("x")]))
    return shapes


def step_async(grads, world):
    works = [dist.all_reduce(g, async_op=True) for g in grads]
    for w in works:
        w.wait()
    for g in grads:
        g.div_(world)  # Average, like the engine run


def make_buckets(grads, cap_bytes):
    buckets, cur, size = [], [], 0
    for g in grads:
        if cur and size + g.numel() * 4 > cap_bytes:
            buckets.append(cur)
            cur, size = [], 0
        cur.append(g)
        size += g.numel() * 4
    if cur:
        buckets.append(cur)
    return buckets


def step_bucketed(buckets, flats, world):
    works = []
    for b, flat in zip(buckets, flats):
        torch.cat([g.view(-1) for g in b], out=flat)
        works.append(dist.all_reduce(flat, async_op=True))
    for b, flat, w in zip(buckets, flats, works):
        w.wait()
        flat.div_(world)
        off = 0
        for g in b:
            g.view(-1).copy_(flat[off:off + g.numel()])
            off += g.numel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsv", default="/work/shared/data/resnet50_gradients.tsv")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    grads = [torch.randn(shape) * 1e-3 for _, shape in load_shapes(args.tsv)]
    buckets = make_buckets(grads, int(args.bucket_mb * (1 << 20)))
    flats = [torch.empty(sum(g.numel() for g in b)) for b in buckets]
    modes = {"async161": lambda: step_async(grads, world),
             "bucketed": lambda: step_bucketed(buckets, flats, world)}
    for mode, step in modes.items():
        times = []
        for i in range(args.warmup + args.iters):
            dist.barrier()
            t0 = time.perf_counter()
            step()
            if i >= args.warmup:
                times.append(time.perf_counter() - t0)
        if rank == 0:
            print(f"RESULT torch_{mode}_ms {statistics.median(times) * 1e3:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
