#!/usr/bin/env python3
"""Failure tests: a job under collectiverun in which one rank dies or hangs.

  fault_test.py LAUNCHER PROG --mode die|hang --np N --transport tcp|shm
                [--victim R] [--coll-timeout S] [--limit S]

die:  the last rank (or --victim) raises SIGKILL in the middle of an all-reduce (mp_fault die). Every
      survivor must report collRemoteError or collTimeout well before COLL_TIMEOUT (within
      half of it), and the whole job must end within --limit seconds.
hang: the last rank (or --victim) joins, then never calls a collective (mp_fault hang). Every other rank
      must fail with collTimeout within COLL_TIMEOUT plus 3 s of slack, and not before
      0.9 * COLL_TIMEOUT.

Both: collectiverun must exit non-zero, and the job must leave nothing in /dev/shm. As
root the job runs in a private mount namespace with its own /dev/shm (so other jobs on
the machine cannot disturb the check); otherwise new coll-* names in /dev/shm count.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

REPORT = re.compile(r"rank (\d+): detected failure: (\w+) after ([\d.]+) s in iteration (\d+): (.*)")
SHM_LINE = re.compile(r"^shm-leftovers:(.*)$", re.M)
# Names the shm transport gives its segments (transport/shm/shm_connect.cpp: /coll-<job>-...).
SHM_PREFIX = "coll-"

# Runs the job in a fresh mount namespace with a private /dev/shm and lists what is left.
PRIVATE_SHM = ('mount -t tmpfs -o mode=1777 collmp /dev/shm || exit 90; "$@"; rc=$?; '
               'echo "shm-leftovers: $(ls -A /dev/shm | tr "\\n" " ")"; exit $rc')


def private_shm_works():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs collmp /dev/shm"], capture_output=True)
    return probe.returncode == 0


def shm_names():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(SHM_PREFIX)}
    except OSError:
        return set()


def run_job(args, private):
    cmd = [args.launcher, "-np", str(args.np), "--timeout", "60", args.prog, args.mode,
           str(args.victim)]
    if private:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM, "sh"] + cmd
    env = dict(os.environ, COLL_TRANSPORT=args.transport, COLL_TIMEOUT=str(args.coll_timeout))
    env.setdefault("COLL_SOCKET_IFNAME", "lo")
    print("running:", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace", timeout=90)
    return proc.returncode, proc.stdout, time.monotonic() - t0


def leftovers(out, private, before):
    if private:
        m = SHM_LINE.search(out)
        if not m:
            return ["(the private /dev/shm listing is missing from the output)"]
        return m.group(1).split()
    time.sleep(0.5)  # names of other jobs being set up right now are gone by then
    return sorted(shm_names() - before)


def check_reports(args, reports, wall):
    errors = []
    survivors = set(range(args.np)) - {args.victim}
    missing = survivors - set(reports)
    if missing:
        errors.append(f"ranks {sorted(missing)} did not report the failure")
    for rank, (result, secs, _) in sorted(reports.items()):
        if args.mode == "die" and result not in ("collRemoteError", "collTimeout"):
            errors.append(f"rank {rank} failed with {result}, expected collRemoteError or collTimeout")
        if args.mode == "die" and secs >= args.coll_timeout / 2:
            errors.append(f"rank {rank} took {secs:.2f} s to notice the dead peer "
                          f"(COLL_TIMEOUT={args.coll_timeout}: should be well before)")
        if args.mode == "hang":
            if secs > args.coll_timeout + 3:
                errors.append(f"rank {rank} failed only after {secs:.2f} s (COLL_TIMEOUT={args.coll_timeout})")
            if result == "collTimeout" and secs < 0.9 * args.coll_timeout:
                errors.append(f"rank {rank} reported collTimeout after {secs:.2f} s, "
                              f"before COLL_TIMEOUT={args.coll_timeout} passed")
            if result != "collTimeout":
                errors.append(f"rank {rank} failed with {result}, expected collTimeout")
    if wall >= args.limit:
        errors.append(f"the job took {wall:.2f} s, limit {args.limit} s")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("launcher")
    ap.add_argument("prog")
    ap.add_argument("--mode", choices=["die", "hang"], required=True)
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--transport", choices=["tcp", "shm", "auto"], required=True)
    ap.add_argument("--victim", type=int, help="the rank that dies or hangs (default: the last)")
    ap.add_argument("--coll-timeout", type=int, default=10)
    ap.add_argument("--limit", type=float, default=15)
    args = ap.parse_args()
    if args.victim is None:
        args.victim = args.np - 1

    private = private_shm_works()
    before = shm_names()
    rc, out, wall = run_job(args, private)
    print(out, end="" if out.endswith("\n") else "\n")
    reports = {}
    for m in REPORT.finditer(out):
        reports[int(m.group(1))] = (m.group(2), float(m.group(3)), m.group(5))
    errors = check_reports(args, reports, wall)
    if rc == 0:
        errors.append("collectiverun exited with 0 although a rank failed")
    if private and rc == 90:
        errors.append("could not mount a private /dev/shm")
    left = leftovers(out, private, before)
    if left:
        errors.append(f"left in /dev/shm: {' '.join(left)}")

    detect = ", ".join(f"rank {r}: {v[0]} after {v[1]:.3f} s" for r, v in sorted(reports.items()))
    print(f"summary: mode={args.mode} victim={args.victim} transport={args.transport} np={args.np} "
          f"COLL_TIMEOUT={args.coll_timeout} collectiverun exit={rc} wall={wall:.2f} s; "
          f"{detect}; /dev/shm {'private' if private else 'shared'}, leftovers: {len(left)}")
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
