#!/usr/bin/env python3
"""torch.topk on the GPU, the reference for cuda_kernel_bench's top-k.

Times torch.topk(x.abs(), k, sorted=False) plus the gather of the signed values (what
coll::cuda::topk returns: indices and values), on the same sizes as the benchmark.
With --bench PATH it also runs cuda_kernel_bench --only topk and prints the ratio.

    /usr/bin/python3 perf/cuda/torch_topk.py --bench build/perf/cuda/cuda_kernel_bench
"""
import argparse
import re
import subprocess
import sys

import torch


def time_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=25_600_000)
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--bench", help="path of cuda_kernel_bench, to print ours / torch")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_topk.py: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda", a.device)
    k = int(a.density * a.n + 0.5)
    g = torch.Generator(device=dev).manual_seed(3)
    x = torch.randn(a.n, device=dev, generator=g)

    def topk_values():
        _, idx = torch.topk(x.abs(), k, sorted=False)
        return idx, x[idx]

    ms = time_ms(topk_values, a.iters, a.warmup)
    print(f"# {torch.cuda.get_device_name(dev)}, torch {torch.__version__}")
    print(f"torch.topk n={a.n} k={k} ms={ms:.4f}")
    if a.bench:
        out = subprocess.run([a.bench, "--only", "topk", "--topk-n", str(a.n), "--topk-density", str(a.density),
                              "--iters", str(a.iters), "--warmup", str(a.warmup), "--device", str(a.device)],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"^topk n=\d+ k=\d+ ms=([0-9.]+)", out, re.M)
        if not m:
            print("could not find the topk line in:\n" + out, file=sys.stderr)
            return 1
        ours = float(m.group(1))
        print(f"coll topk ms={ours:.4f}  speedup over torch.topk: {ms / ours:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
