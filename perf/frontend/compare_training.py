#!/usr/bin/python3
"""End-to-end training benchmark: train_fashion_mnist at 1 and R ranks against PyTorch DDP
(gloo, CPU, 1 thread per rank) on the same model, batch and data, run one after another.

    perf/frontend/compare_training.py --build build [--epochs 2] [--ranks 2] [--compression]
                                      [--pairs N]

Prints a Markdown table (for doc/benchmarks.md) and checks the targets:
  * test accuracy after the last epoch at R ranks with SyncBatchNorm >= 90% (2 epochs);
  * epoch time at R ranks <= 0.55x our own 1-rank time and <= 0.8x PyTorch DDP's at R ranks.
--pairs N adds N alternating 1-epoch runs at 1 and R ranks and judges the scaling target
on the median of their paired ratios (this VM's speed drifts by 10-30% between runs).
With --compression, also int8 and top-k 1% (error feedback) at R ranks, each within 1.5
points of the uncompressed accuracy. Exit status 1 when a target is missed (--no-check: 0).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def steal_seconds():
    """CPU time the hypervisor gave to others, all CPUs (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run(label, cmd, env, timeout):
    print(f"### {label}: {' '.join(cmd)}", flush=True)
    steal0 = steal_seconds()
    start, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    result = None
    for line in proc.stdout.splitlines():
        if "RESULT" not in line and "epoch" in line and ("accuracy" in line or "summary" in line):
            print("    " + line, flush=True)
        at = line.find("RESULT ")
        if at >= 0:
            result = json.loads(line[at + len("RESULT "):])
    if proc.returncode != 0 or result is None:
        print(proc.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"{label} failed (exit {proc.returncode})")
    result["label"], result["wall_seconds"], result["cpu_seconds"] = label, wall, cpu
    steal1 = steal_seconds()
    # Share of the machine's CPU time taken by the hypervisor during the run: on a VM a
    # run with a few percent of steal is slowed by that much, whatever the code does.
    result["steal_pct"] = (100 * (steal1 - steal0) / (wall * os.cpu_count())
                           if steal0 is not None and steal1 is not None else float("nan"))
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build", help="meson build directory")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="cosine",
                   help="passed to both frameworks")
    p.add_argument("--train-limit", type=int, default=0, help="quick runs: first N images")
    p.add_argument("--compression", action="store_true", help="also int8 and top-k runs")
    p.add_argument("--no-sync-bn-run", action="store_true",
                   help="also our R-rank run with per-rank BatchNorm (what DDP does)")
    p.add_argument("--pairs", type=int, default=0,
                   help="extra alternating 1-epoch runs at 1 and R ranks; scaling judged on "
                        "the median of their ratios")
    p.add_argument("--no-check", action="store_true", help="report only, exit 0")
    p.add_argument("--timeout", type=int, default=3600)
    args = p.parse_args()

    launcher = os.path.join(args.build, "src/launcher/collectiverun")
    trainer = os.path.join(args.build, "frontend/train_fashion_mnist")
    for f in (launcher, trainer):
        if not os.access(f, os.X_OK):
            raise SystemExit(f"{f} not found: build it first (ninja -C {args.build})")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    common = ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              "--lr-schedule", args.lr_schedule, "--no-progress"]
    if args.train_limit:
        common += ["--train-limit", str(args.train_limit)]

    def ours(ranks, *extra):
        return [launcher, "-np", str(ranks), trainer] + common + list(extra)

    busy = os.getloadavg()[0]  # before our own runs add to it
    R = args.ranks
    results = [run("ours, 1 rank", ours(1), env, args.timeout),
               run(f"ours, {R} ranks, SyncBatchNorm", ours(R, "--sync-bn"), env, args.timeout)]
    if args.no_sync_bn_run:
        results.append(run(f"ours, {R} ranks, per-rank BatchNorm", ours(R, "--no-sync-bn"), env,
                           args.timeout))
    torch_cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_ddp_fashion.py"), "--ranks", str(R),
                 "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                 "--lr-schedule", args.lr_schedule, "--no-progress"]
    if args.train_limit:
        torch_cmd += ["--train-limit", str(args.train_limit)]
    results.append(run(f"PyTorch DDP gloo, {R} ranks", torch_cmd, env, args.timeout))
    if args.compression:
        results.append(run(f"ours, {R} ranks, int8", ours(R, "--compression", "int8"), env,
                           args.timeout))
        results.append(run(f"ours, {R} ranks, top-k 1% + EF",
                           ours(R, "--compression", "topk", "--topk-density", "0.01"), env,
                           args.timeout))

    ratios = []
    for i in range(args.pairs):
        one_epoch = lambda cmd: [a if a != str(args.epochs) or cmd[j - 1] != "--epochs" else "1"
                                 for j, a in enumerate(cmd)]
        a = run(f"pair {i + 1}: ours, 1 rank", one_epoch(ours(1)), env, args.timeout)
        b = run(f"pair {i + 1}: ours, {R} ranks", one_epoch(ours(R, "--sync-bn")), env, args.timeout)
        ratios.append(b["mean_epoch_seconds"] / a["mean_epoch_seconds"])
        print(f"    pair {i + 1}: {b['mean_epoch_seconds']:.2f} s / {a['mean_epoch_seconds']:.2f} s = "
              f"{ratios[-1]:.3f}x (steal {a['steal_pct']:.1f}%, {b['steal_pct']:.1f}%)", flush=True)

    # CPU s: user + system time of all ranks over the whole run (start-up and evaluation
    # included); on a shared machine it moves less than the wall-clock epoch time.
    print("\n| run | ranks | epoch s (mean) | test accuracy per epoch | CPU s (whole run) | steal |")
    print("|---|---|---|---|---|---|")
    for r in results:
        accs = ", ".join(f"{100 * a:.2f}%" for a in r["test_accuracy"])
        print(f"| {r['label']} | {r['ranks']} | {r['mean_epoch_seconds']:.2f} | {accs} | "
              f"{r['cpu_seconds']:.1f} | {r['steal_pct']:.1f}% |")
    worst = max(r["steal_pct"] for r in results)
    if worst > 2:
        print(f"\nwarning: the hypervisor took up to {worst:.0f}% of the CPUs during a run (steal "
              "column): the ratios below compare runs slowed by different amounts")
    if busy > 1.0:
        print(f"\nwarning: load average was {busy:.1f} on {os.cpu_count()} CPUs before the runs: "
              "other work shares the cores and the timings are not representative")

    one, many, torch = results[0], results[1], next(r for r in results if "PyTorch" in r["label"])
    scaling = many["mean_epoch_seconds"] / one["mean_epoch_seconds"]
    how = ""
    if ratios:
        ratios.sort()
        first = scaling
        scaling = ratios[len(ratios) // 2] if len(ratios) % 2 else sum(ratios[len(ratios) // 2 - 1:][:2]) / 2
        how = (f" (median of {len(ratios)} pairs {', '.join(f'{x:.3f}' for x in ratios)}; "
               f"main runs {first:.3f}x)")
    checks = [
        (f"{R}-rank SyncBatchNorm accuracy >= 90% after {args.epochs} epoch(s)",
         many["final_test_accuracy"] >= 0.90, f"{100 * many['final_test_accuracy']:.2f}%"),
        (f"{R}-rank epoch <= 0.55x our 1-rank epoch", scaling <= 0.55, f"{scaling:.3f}x{how}"),
        (f"{R}-rank epoch <= 0.8x PyTorch DDP's",
         many["mean_epoch_seconds"] <= 0.8 * torch["mean_epoch_seconds"],
         f"{many['mean_epoch_seconds'] / torch['mean_epoch_seconds']:.3f}x"),
    ]
    for r in results:
        if r.get("compression") in ("int8", "topk"):
            delta = many["final_test_accuracy"] - r["final_test_accuracy"]
            checks.append((f"{r['label']} within 1.5 points of uncompressed", delta <= 0.015,
                           f"{100 * delta:+.2f} points below"))
    print()
    failed = 0
    for name, ok, value in checks:
        print(f"{'PASS' if ok else 'MISS'}  {name}: {value}")
        failed += not ok
    sys.exit(0 if failed == 0 or args.no_check else 1)


if __name__ == "__main__":
    main()
