#!/usr/bin/env python3
"""A rank dies at a random point of the random call sequences (mp_sequences --kill), or
freezes there (--freeze).

  sequences_fault.py LAUNCHER MP_SEQUENCES --np N [--transport T] [--hosts H] [--freeze]
                     [--cases SEED:VICTIM:STEP,...] [--random K --random-seed S]
                     [--coll-timeout S]

For each case, rank VICTIM of an N-rank job raises SIGKILL as step STEP of sequence SEED
begins: in a group, nonblocking calls, a split communicator, whatever that step is. Every
other rank must report the failure ("detected failure after T s"), with T, from the
start of its own step, under COLL_TIMEOUT / 2: collectiverun stops the job 3 s after a
rank dies, so a survivor that waits longer never reports, and the case fails. The job
must exit non-zero and leave no coll-* names in /dev/shm. --random K adds K cases drawn
from --random-seed (victim and step anywhere in the first 150 steps).

--freeze: the victim stops itself (SIGSTOP) instead, alive with its connections open.
Every other rank must report within COLL_TIMEOUT + 3 s of the start of its step (a
timeout, or the error of a peer that timed out first and left), and at least one report
must be a timeout naming the frozen rank among those it was still waiting on.
"""
import argparse
import os
import random
import re
import subprocess
import sys
import time

REPORT = re.compile(r"rank (\d+): detected failure after ([\d.]+) s in step (\d+): (.*)")


def shm_names():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("coll-")}
    except OSError:
        return set()


def run_case(args, seed, victim, step):
    prog = [args.prog, "--seed", str(seed), "--steps", str(step + 20),
            "--freeze" if args.freeze else "--kill", f"{victim}:{step}"]
    if args.hosts:
        prog = ["/bin/sh", "-c", f'COLL_HOST_ID=sim$((COLL_RANK % {args.hosts})) exec "$0" "$@"'] + prog
    cmd = [args.launcher, "-np", str(args.np), "--timeout", "60"] + prog
    env = dict(os.environ, COLL_TIMEOUT=str(args.coll_timeout))
    if args.transport:
        env["COLL_TRANSPORT"] = args.transport
    env.setdefault("COLL_SOCKET_IFNAME", "lo")
    before = shm_names()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=90)
    wall = time.monotonic() - t0
    errors = []
    if proc.returncode == 0:
        errors.append("the job exited with 0 although a rank was killed")
    verb = "stopping" if args.freeze else "killing"
    if f"rank {victim}: {verb} itself as step {step} begins" not in proc.stdout:
        errors.append("the victim did not reach its step (did an earlier step fail?)")
    reports = {}
    for m in REPORT.finditer(proc.stdout):
        reports[int(m.group(1))] = (float(m.group(2)), m.group(4))
    for rank in sorted(set(range(args.np)) - {victim}):
        if rank not in reports:
            errors.append(f"rank {rank} did not report the failure")
        elif not args.freeze and reports[rank][0] >= args.coll_timeout / 2:
            errors.append(f"rank {rank} took {reports[rank][0]:.2f} s to notice (COLL_TIMEOUT={args.coll_timeout})")
        elif args.freeze and reports[rank][0] > args.coll_timeout + 3:
            errors.append(f"rank {rank} took {reports[rank][0]:.2f} s to give up (COLL_TIMEOUT={args.coll_timeout})")
    if args.freeze and not any(f"rank {victim}" in msg and "still waiting on" in msg for _, msg in reports.values()):
        errors.append(f"no survivor timed out naming rank {victim} among the peers it was waiting on")
    time.sleep(0.5)
    left = sorted(shm_names() - before)
    if left:
        errors.append(f"left in /dev/shm: {left}")
    slowest = max((t for t, _ in reports.values()), default=0.0)
    print(f"seed {seed} victim {victim} step {step}: exit {proc.returncode}, wall {wall:.2f} s, "
          f"{len(reports)} reports, slowest {slowest:.2f} s" + ("" if not errors else " -- FAILED"), flush=True)
    if errors:
        print("\n".join("  " + e for e in errors))
        print("  output (last lines):\n    " + "\n    ".join(proc.stdout.splitlines()[-15:]))
    return not errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("launcher")
    ap.add_argument("prog")
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--transport")
    ap.add_argument("--hosts", type=int)
    ap.add_argument("--cases", default="")
    ap.add_argument("--random", type=int, default=0)
    ap.add_argument("--random-seed", type=int, default=1)
    ap.add_argument("--coll-timeout", type=int, default=10)
    ap.add_argument("--freeze", action="store_true")
    args = ap.parse_args()
    cases = [tuple(int(x) for x in c.split(":")) for c in args.cases.split(",") if c]
    g = random.Random(args.random_seed)
    cases += [(g.randrange(1, 10**6), g.randrange(args.np), g.randrange(150)) for _ in range(args.random)]
    if not cases:
        ap.error("no cases: give --cases or --random")
    ok = sum(run_case(args, *c) for c in cases)
    print(f"{ok} of {len(cases)} cases passed")
    sys.exit(0 if ok == len(cases) else 1)


if __name__ == "__main__":
    main()
