#!/usr/bin/env python3
"""perf/report on made-up comparison outputs: every PNG it names is written and is a PNG,
a keep directory without ours.tsv and a log without a result table are errors (exit 1),
and --repeat's rounds are read. Skipped (77) without matplotlib.

  perf_report_test.py PERF_REPORT
"""
import os
import subprocess
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError as e:
    print(f"SKIP: matplotlib is not importable ({e}); Debian: python3-matplotlib")
    sys.exit(77)

report = sys.argv[1]
failures = []


def run(*args):
    return subprocess.run([sys.executable, report, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def expect_pngs(p, names, out):
    if p.returncode != 0:
        failures.append(f"exit {p.returncode}: {p.stderr}")
        return
    printed = p.stdout.split()
    for n in names:
        path = os.path.join(out, n)
        if path not in printed:
            failures.append(f"{n} not reported: {p.stdout}")
        elif not open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n":
            failures.append(f"{n} is not a PNG")


with tempfile.TemporaryDirectory() as d:
    shm, tcp, out = (os.path.join(d, x) for x in ("shm", "tcp", "img"))
    for keep, rounds in ((shm, [""]), (tcp, ["round1", "round2", "round3"])):
        for r in rounds:
            os.makedirs(os.path.join(keep, r), exist_ok=True)
            for name, scale in (("ours", 1.0), ("ompi", 1.5), ("gloo", 3.0), ("torch", 4.0)):
                with open(os.path.join(keep, r, name + ".tsv"), "w") as f:
                    for k in range(3, 24, 4):
                        size = 1 << k
                        f.write(f"{size} {scale * (2 + size / 1e3):.2f} 0.00 {scale:.2f}\n")
    p = run("allreduce", "--out", out, "shm=" + shm, "tcp=" + tcp)
    expect_pngs(p, ["allreduce_busbw_shm.png", "allreduce_latency_shm.png",
                    "allreduce_busbw_tcp.png", "allreduce_latency_tcp.png"], out)

    log = os.path.join(d, "training.log")
    with open(log, "w") as f:
        f.write("| run | ranks | epoch s (mean) | test accuracy per epoch | CPU s (whole run) | steal |\n"
                "|---|---|---|---|---|---|\n"
                "| ours, 1 rank | 1 | 8.00 | 84.50%, 87.00% | 13.1 | 0.1% |\n"
                "| PyTorch DDP gloo, 2 ranks | 2 | 6.00 | 82.70%, 86.10% | 17.2 | 0.0% |\n")
    p = run("training", "--out", out, log)
    expect_pngs(p, ["training_accuracy.png", "training_epoch_time.png"], out)

    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    if run("allreduce", "--out", out, "x=" + empty).returncode != 1:
        failures.append("a keep directory without ours.tsv was accepted")
    if run("training", "--out", out, report).returncode != 1:  # a file, but no table
        failures.append("a log without a result table was accepted")
    if run("allreduce", "--out", out, shm).returncode == 0:
        failures.append("an argument without NAME= was accepted")

for f in failures:
    print("FAIL:", f)
print("perf/report: all checks passed" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
