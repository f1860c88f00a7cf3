#!/usr/bin/env python3
"""Failure tests: a job under collectiverun in which one rank dies or hangs.

  fault_test.py LAUNCHER PROG --mode die|hang|stop|init|split|hvd --np N --transport tcp|shm|auto
                [--victim R] [--coll-timeout S] [--limit S] [--coll NAME] [--count N]
                [--root R] [--late R] [--kill-ms MS] [--hosts H] [--algo COLL_ALGO]

die:  the last rank (or --victim) raises SIGKILL in the middle of a collective (mp_fault die;
      --coll, --count and --root choose it, all-reduce of 8 MiB by default). Every
      survivor must report collRemoteError or collTimeout well before COLL_TIMEOUT (within
      half of it), and the whole job must end within --limit seconds.
init, split, hvd: the same checks; the victim dies in collCommInitFromEnv (while rank --late
      has not joined yet), around collCommSplit, or with an allreduce of the Horovod-style
      engine in flight. hvd: every survivor must also get back from hvd::shutdown.
hang: the last rank (or --victim) joins, then never calls a collective (mp_fault hang). Every other rank
      must fail with collTimeout within COLL_TIMEOUT plus 3 s of slack, and not before
      0.9 * COLL_TIMEOUT.
stop: as hang, but the victim stops itself (SIGSTOP) in the middle of a collective: alive, its
      connections open, but frozen. In hang and stop, each survivor's message must say which
      peers it was still waiting on, and at least one must name the victim.

--hosts H runs the ranks on H simulated hosts (COLL_HOST_ID=sim$((COLL_RANK % H))), so
that each rank has shm and tcp links; --algo sets COLL_ALGO.

All: collectiverun must exit non-zero, and the job must leave nothing in /dev/shm. As
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
SHUTDOWN = re.compile(r"rank (\d+): hvd::shutdown returned")
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
    prog = [args.prog, args.mode, str(args.victim)]
    for opt in ("coll", "count", "root", "late", "kill_ms"):
        if getattr(args, opt) is not None:
            prog += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    if args.hosts:
        # Simulated hosts, ranks dealt round-robin (0 2 | 1 3 for 2 hosts).
        prog = ["/bin/sh", "-c", f'COLL_HOST_ID=sim$((COLL_RANK % {args.hosts})) exec "$0" "$@"'] + prog
    cmd = [args.launcher, "-np", str(args.np), "--timeout", "60"] + prog
    if private:
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_SHM, "sh"] + cmd
    env = dict(os.environ, COLL_TRANSPORT=args.transport, COLL_TIMEOUT=str(args.coll_timeout))
    if args.algo:
        env["COLL_ALGO"] = args.algo
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


def check_reports(args, reports, wall, out):
    errors = []
    survivors = set(range(args.np)) - {args.victim}
    missing = survivors - set(reports)
    if missing:
        errors.append(f"ranks {sorted(missing)} did not report the failure")
    waits = args.mode in ("hang", "stop")
    for rank, (result, secs, msg) in sorted(reports.items()):
        if waits and "still waiting on rank" not in msg:
            errors.append(f"rank {rank}'s timeout does not say which peers it was waiting on: {msg}")
        if not waits and result not in ("collRemoteError", "collTimeout"):
            errors.append(f"rank {rank} failed with {result}, expected collRemoteError or collTimeout")
        if not waits and secs >= args.coll_timeout / 2:
            errors.append(f"rank {rank} took {secs:.2f} s to notice the dead peer "
                          f"(COLL_TIMEOUT={args.coll_timeout}: should be well before)")
        if waits:
            if secs > args.coll_timeout + 3:
                errors.append(f"rank {rank} failed only after {secs:.2f} s (COLL_TIMEOUT={args.coll_timeout})")
            if result == "collTimeout" and secs < 0.9 * args.coll_timeout:
                errors.append(f"rank {rank} reported collTimeout after {secs:.2f} s, "
                              f"before COLL_TIMEOUT={args.coll_timeout} passed")
            if result != "collTimeout":
                errors.append(f"rank {rank} failed with {result}, expected collTimeout")
    if waits and reports and not any(f"rank {args.victim} (host" in m for _, _, m in reports.values()):
        errors.append(f"no survivor's timeout names rank {args.victim}, the one that hung or stopped")
    if args.mode == "hvd":
        back = {int(m.group(1)) for m in SHUTDOWN.finditer(out)}
        if survivors - back:
            errors.append(f"ranks {sorted(survivors - back)} did not get back from hvd::shutdown")
    if wall >= args.limit:
        errors.append(f"the job took {wall:.2f} s, limit {args.limit} s")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("launcher")
    ap.add_argument("prog")
    ap.add_argument("--mode", choices=["die", "hang", "stop", "init", "split", "hvd"], required=True)
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--transport", choices=["tcp", "shm", "auto"], required=True)
    ap.add_argument("--victim", type=int, help="the rank that dies or hangs (default: the last)")
    ap.add_argument("--coll-timeout", type=int, default=10)
    ap.add_argument("--limit", type=float, default=15)
    ap.add_argument("--coll", help="mp_fault --coll (default: allreduce)")
    ap.add_argument("--count", type=int, help="mp_fault --count")
    ap.add_argument("--root", type=int, help="mp_fault --root")
    ap.add_argument("--late", type=int, help="mp_fault --late")
    ap.add_argument("--kill-ms", type=int, help="mp_fault --kill-ms")
    ap.add_argument("--hosts", type=int, help="simulated hosts (COLL_HOST_ID by rank %% HOSTS)")
    ap.add_argument("--algo", help="COLL_ALGO for the job")
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
    errors = check_reports(args, reports, wall, out)
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
