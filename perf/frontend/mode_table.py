#!/usr/bin/python3
"""Side-by-side table of the training modes of train_fashion_mnist on the same model,
data and global batch: data parallelism (SyncBatchNorm; float32, bf16, fp16), GPipe
pipeline (1 and M micro-batches), parameter server (sync and async) and PyTorch DDP.

    perf/frontend/mode_table.py --build build [--ranks 2,4] [--epochs 2] [--train-limit N]
                                [--micro-batches 4] [--max-staleness 4]

For each run: mean time per epoch, test accuracy after the last epoch, gradient bytes a
rank sends per step (pipeline: activations and their gradients too; parameter server:
a worker's push, the same again comes back as its pull) and, for async parameter server,
the staleness histogram (staleness -> gradients applied with it). Prints a Markdown table
for doc/benchmarks.md. At 4 ranks the parameter server has 2 servers and 2 workers,
the pipeline 2 stages x 2 replicas.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(label, cmd, env, timeout):
    print(f"### {label}: {' '.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    result = None
    for line in proc.stdout.splitlines():
        at = line.find("RESULT ")
        if at >= 0:
            result = json.loads(line[at + len("RESULT "):])
    if proc.returncode != 0 or result is None:
        print(proc.stdout[-3000:], file=sys.stderr)
        return None
    result["label"] = label
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--ranks", default="2,4", help="comma-separated rank counts")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--max-staleness", type=int, default=4)
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch DDP")
    p.add_argument("--timeout", type=int, default=3600)
    args = p.parse_args()

    launcher = os.path.join(args.build, "src/launcher/collectiverun")
    trainer = os.path.join(args.build, "frontend/train_fashion_mnist")
    for f in (launcher, trainer):
        if not os.access(f, os.X_OK):
            raise SystemExit(f"{f} not found: build it first (ninja -C {args.build})")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    common = ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--no-progress"]
    limits = []
    if args.train_limit:
        limits += ["--train-limit", str(args.train_limit)]
    if args.test_limit:
        limits += ["--test-limit", str(args.test_limit)]

    def ours(ranks, *extra):
        return [launcher, "-np", str(ranks), trainer] + common + limits + list(extra)

    rows = []
    for R in [int(r) for r in args.ranks.split(",")]:
        servers = 1 if R == 2 else R // 2
        M = str(args.micro_batches)
        runs = [
            ("data parallel, SyncBatchNorm, fp32", ours(R, "--sync-bn")),
            ("data parallel, SyncBatchNorm, bf16", ours(R, "--sync-bn", "--precision", "bf16")),
            ("data parallel, SyncBatchNorm, fp16", ours(R, "--sync-bn", "--precision", "fp16")),
            ("pipeline, 1 micro-batch", ours(R, "--mode", "pipeline", "--stages", "2",
                                             "--micro-batches", "1")),
            (f"pipeline, {M} micro-batches", ours(R, "--mode", "pipeline", "--stages", "2",
                                                  "--micro-batches", M)),
            (f"parameter server sync, {servers} server(s)",
             ours(R, "--mode", "ps", "--servers", str(servers), "--ps-sync")),
            (f"parameter server async, {servers} server(s), K={args.max_staleness}",
             ours(R, "--mode", "ps", "--servers", str(servers), "--ps-async",
                  "--max-staleness", str(args.max_staleness))),
        ]
        for label, cmd in runs:
            r = run(f"{label}, {R} ranks", cmd, env, args.timeout)
            rows.append((R, label, r))
        if not args.no_torch:
            cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_ddp_fashion.py"), "--ranks",
                   str(R), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                   "--no-progress"] + limits
            rows.append((R, "PyTorch DDP (gloo, per-rank BatchNorm)",
                         run(f"PyTorch DDP, {R} ranks", cmd, env, args.timeout)))

    print(f"\n| ranks | mode | epoch s (mean) | test accuracy after {args.epochs} epoch(s) | "
          "bytes per step per rank | staleness histogram |")
    print("|---|---|---|---|---|---|")
    for R, label, r in rows:
        if r is None:
            print(f"| {R} | {label} | failed | | | |")
            continue
        bytes_ = r.get("bytes_per_step")
        if bytes_ is None and "PyTorch" in label:
            bytes_ = 4 * 207018  # the model's float32 gradients (207,018 parameters)
        hist = r.get("staleness") if r.get("async") else None
        hist_s = ", ".join(f"{k}: {v}" for k, v in hist.items()) if hist else ""
        print(f"| {R} | {label} | {r['mean_epoch_seconds']:.2f} | "
              f"{100 * r['final_test_accuracy']:.2f}% | {int(bytes_):,} | {hist_s} |")


if __name__ == "__main__":
    main()
