#!/usr/bin/python3
"""The all-reduce (Average) of ResNet-50's 161 gradient tensors from Python, one step =
all of them started then all waited for, median of N steps, 2 ranks on this host:

  collective.torch  allreduce_async_ of each tensor (named) in backward order, then
                    synchronize of every handle (the engine fuses them)
  torch gloo        perf/engine/torch_resnet_bench.py: 161 dist.all_reduce(async_op=True),
                    and DDP-style 25 MiB buckets

    perf/frontend/torch_hvd_resnet_grads.py --build build [--iters 5] [--transport shm]

Prints 'RESULT <name> <ms>' lines and the ratio torch's best / collective.torch.
This script is also the per-rank worker of the collective.torch run ('--worker').
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
TORCH_BENCH = os.path.join(ROOT, "perf", "engine", "torch_resnet_bench.py")


def worker(args):
    import torch
    sys.path.insert(0, os.path.dirname(TORCH_BENCH))
    from torch_resnet_bench import load_shapes
    import collective.torch as hvd

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(1)
    named = [(name, torch.randn(shape) * 1e-3) for name, shape in load_shapes(args.tsv)]
    first = [g.clone() for _, g in named[:3]]
    times = []
    for i in range(args.warmup + args.iters):
        hvd.barrier()
        t0 = time.perf_counter()
        handles = [hvd.allreduce_async_(g, name=name) for name, g in named]
        for h in handles:
            hvd.synchronize(h)
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    # Every rank holds the same data, so the average leaves it as it was.
    for (name, g), want in zip(named, first):
        if not torch.allclose(g, want, rtol=1e-5, atol=1e-9):
            raise SystemExit(f"{name}: the average changed the gradient")
    if hvd.rank() == 0:
        print(f"RESULT collective_torch_async161_ms {statistics.median(times) * 1e3:.3f}", flush=True)
    hvd.shutdown()


def results(text):
    out = {}
    for line in text.splitlines():
        at = line.find("RESULT ")
        if at >= 0:
            _, name, value = line[at:].split()[:3]
            out[name] = float(value)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--tsv", default="/work/shared/data/resnet50_gradients.tsv")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--transport", default="",
                   help="COLL_TRANSPORT for collective.torch (default: the library's choice)")
    args = p.parse_args()
    if args.worker:
        return worker(args)

    launcher = os.path.join(args.build, "src/launcher/collectiverun")
    library = os.path.abspath(os.path.join(args.build, "libcollective.so"))
    for f in (launcher, library):
        if not os.path.exists(f):
            raise SystemExit(f"{f} not found: build first (ninja -C {args.build})")
    env = dict(os.environ, OMP_NUM_THREADS="1", COLL_LIBRARY=library,
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args.transport:
        env["COLL_TRANSPORT"] = args.transport
    common = ["--tsv", args.tsv, "--iters", str(args.iters), "--warmup", str(args.warmup)]
    ours = subprocess.run([launcher, "-np", "2", "/usr/bin/python3", os.path.abspath(__file__),
                           "--worker"] + common, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    got = results(ours.stdout)
    if ours.returncode != 0 or not got:
        print(ours.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"collective.torch run failed (exit {ours.returncode})")

    port = str(free_port())
    procs = [subprocess.Popen(["/usr/bin/python3", TORCH_BENCH] + common,
                              env=dict(env, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    text = ""
    for proc in procs:
        text += proc.communicate(timeout=600)[0]
    torch_got = results(text)
    if any(proc.returncode for proc in procs) or not torch_got:
        print(text[-4000:], file=sys.stderr)
        raise SystemExit("torch.distributed run failed")
    got.update(torch_got)
    for name, ms in got.items():
        print(f"RESULT {name} {ms:.3f}")
    best = min(v for k, v in torch_got.items())
    print(f"torch gloo best / collective.torch: {best / got['collective_torch_async161_ms']:.2f}x "
          f"({best:.1f} ms / {got['collective_torch_async161_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
