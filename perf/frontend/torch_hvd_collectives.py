#!/usr/bin/python3
"""collective.torch's blocking collectives against torch.distributed's gloo backend, in the
same processes (N ranks under collectiverun, each also a member of a gloo group), float32
tensors, median time of --iters calls per size, the two libraries taking turns call by call:

  allreduce      hvd.allreduce_(t, op=Sum)        dist.all_reduce(t)
  allgather      hvd.allgather(t)                 dist.all_gather(list, t)
  broadcast      hvd.broadcast_(t, 0)             dist.broadcast(t, 0)
  alltoall       hvd.alltoall(t)                  dist.all_to_all_single(out, t)
  reducescatter  hvd.reducescatter(t, op=Sum)     gloo has none in this torch: all_reduce
                                                  and keep this rank's rows (what a gloo
                                                  user writes instead)

    perf/frontend/torch_hvd_collectives.py --build build [--np 2] [--iters 20]
        [--sizes 4K,256K,4M,64M] [--ops allreduce,allgather,...] [--transport tcp]

Sizes are each rank's input in bytes. Every result of both is checked against the
expected values. Prints one line per op and size: both medians in microseconds and
gloo / collective.torch (above 1: collective.torch is faster).
This script is also the per-rank worker ('--worker').
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPS = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter"]


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


def make_calls(op, n, rank, elems, hvd, dist, torch):
    """(ours, theirs, want): two callables running the op once each on fresh inputs, and
    the output both must give."""
    base = torch.arange(elems, dtype=torch.float32) % 97
    mine = base + rank
    share = elems // n  # alltoall and reducescatter: elems is a multiple of n
    mine_rows = slice(rank * share, (rank + 1) * share)
    total = base * n + n * (n - 1) / 2

    def gloo_allreduce():
        t = mine.clone()
        dist.all_reduce(t)
        return t

    def gloo_allgather():
        outs = [torch.empty_like(mine) for _ in range(n)]
        dist.all_gather(outs, mine)
        return torch.cat(outs)

    def gloo_broadcast():
        t = mine.clone()
        dist.broadcast(t, 0)
        return t

    def gloo_alltoall():
        out = torch.empty(elems)
        dist.all_to_all_single(out, mine)
        return out

    calls = {
        "allreduce": (lambda: hvd.allreduce_(mine.clone(), op=hvd.Sum, name="ar"),
                      gloo_allreduce, total),
        "allgather": (lambda: hvd.allgather(mine, name="ag"), gloo_allgather,
                      torch.cat([base + r for r in range(n)])),
        "broadcast": (lambda: hvd.broadcast_(mine.clone(), 0, name="bc"), gloo_broadcast, base),
        "alltoall": (lambda: hvd.alltoall(mine, name="a2a"), gloo_alltoall,
                     torch.cat([(base + r)[mine_rows] for r in range(n)])),
        "reducescatter": (lambda: hvd.reducescatter(mine, op=hvd.Sum, name="rs"),
                          lambda: gloo_allreduce()[mine_rows], total[mine_rows]),
    }
    return calls[op]


def worker(args):
    import torch
    import torch.distributed as dist
    import collective.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    dist.init_process_group("gloo", rank=rank, world_size=n,
                            init_method=f"tcp://127.0.0.1:{os.environ['GLOO_PORT']}")
    for op in args.ops.split(","):
        for size in args.sizes.split(","):
            elems = max(parse_size(size) // 4 // n, 1) * n
            ours, theirs, want = make_calls(op, n, rank, elems, hvd, dist, torch)
            times = {"ours": [], "gloo": []}
            for i in range(args.warmup + args.iters):
                for who, fn, barrier in (("ours", ours, hvd.barrier), ("gloo", theirs, dist.barrier)):
                    barrier()
                    t0 = time.perf_counter()
                    out = fn()
                    dt = time.perf_counter() - t0
                    if i >= args.warmup:
                        times[who].append(dt)
                    if i == 0 and not torch.equal(out, want):
                        raise SystemExit(f"rank {rank}: {who} {op} of {size} gave a wrong result")
            if rank == 0:
                a, b = (statistics.median(times[k]) * 1e6 for k in ("ours", "gloo"))
                print(f"RESULT {op} {elems * 4} {a:.1f} {b:.1f}", flush=True)
    dist.destroy_process_group()
    hvd.shutdown()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--sizes", default="4K,256K,4M,64M")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--transport", default="",
                   help="COLL_TRANSPORT for collective.torch (default: the library's choice)")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    for op in args.ops.split(","):
        if op not in OPS:
            p.error(f"unknown op {op!r} (one of {', '.join(OPS)})")
    for size in args.sizes.split(","):
        try:
            if parse_size(size) <= 0:
                raise ValueError
        except ValueError:
            p.error(f"bad size {size!r} (bytes, or with K, M, G)")

    launcher = os.path.join(args.build, "src/launcher/collectiverun")
    library = os.path.abspath(os.path.join(args.build, "libcollective.so"))
    for f in (launcher, library):
        if not os.path.exists(f):
            raise SystemExit(f"{f} not found: build first (ninja -C {args.build})")
    env = dict(os.environ, OMP_NUM_THREADS="1", COLL_LIBRARY=library, GLOO_PORT=str(free_port()),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args.transport:
        env["COLL_TRANSPORT"] = args.transport
    cmd = [launcher, "-np", str(args.np), "/usr/bin/python3", os.path.abspath(__file__), "--worker",
           "--iters", str(args.iters), "--warmup", str(args.warmup), "--sizes", args.sizes,
           "--ops", args.ops]
    run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=1800)
    rows = [line[line.find("RESULT "):].split()[1:] for line in run.stdout.splitlines()
            if "RESULT " in line]
    if run.returncode != 0 or not rows:
        print(run.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"the run failed (exit {run.returncode})")
    print(f"# {args.np} ranks, float32, median of {args.iters} calls; "
          f"transport: {args.transport or 'default'}")
    print(f"{'op':<14} {'bytes':>10} {'ours us':>10} {'gloo us':>10} {'gloo/ours':>9}")
    for op, nbytes, ours, gloo in rows:
        print(f"{op:<14} {int(nbytes):>10} {float(ours):>10.1f} {float(gloo):>10.1f} "
              f"{float(gloo) / float(ours):>9.2f}")


if __name__ == "__main__":
    main()
