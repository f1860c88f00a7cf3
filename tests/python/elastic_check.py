#!/usr/bin/env python3
"""Runs elastic_train.py under collectiverun --elastic twice, uninterrupted and with rank 0
killed mid-epoch (a replacement joins): both must finish, every rank with the same
parameters, and the test accuracies must agree within 0.5 points.

  elastic_check.py COLLECTIVERUN PYTHON
"""
import os
import re
import subprocess
import sys

LINE = re.compile(r"rank (\d+) of (\d+): accuracy ([\d.]+), resets (\[[^]]*\]), joiner (\w+), parameters (\w+)")


def job(launcher, python, victim):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic_train.py")
    p = subprocess.run([launcher, "-np", "4", "--elastic", "--min-np", "2", "--timeout", "100", python, script,
                        "--victim", str(victim)], capture_output=True, text=True, timeout=110)
    out = p.stdout + p.stderr
    return p.returncode, out, [m.groups() for m in LINE.finditer(out)]


def main():
    launcher, python = sys.argv[1], sys.argv[2]
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch is not importable")
        return 77
    ok = True
    results = {}
    for victim in (-1, 0):
        rc, out, lines = job(launcher, python, victim)
        accs = {float(l[2]) for l in lines}
        good = rc == 0 and len(lines) == 4 and all(l[5] == "same" for l in lines) and len(accs) == 1
        if victim >= 0:
            good = good and "1 rank(s) lost, 1 started to join; the job finished" in out
            good = good and sum(l[4] == "True" for l in lines) == 1
        if not good:
            ok = False
            print("FAIL (victim %d): rc %d\n%s" % (victim, rc, out[-6000:]))
        results[victim] = accs.pop() if len(accs) == 1 else None
        print("victim %d: rc %d, accuracy %s" % (victim, rc, results[victim]))
    if ok and abs(results[-1] - results[0]) > 0.005:
        ok = False
        print("FAIL: accuracy %.4f with a killed rank against %.4f without" % (results[0], results[-1]))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
