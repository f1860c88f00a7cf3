#!/usr/bin/env python3
"""Drives mp_survive: a job whose ranks die by SIGKILL and come back through grow.

  survive_test.py PROG [--np N] [--cycles C] [--seed S] [--transport T] [--hosts H]
                  [--in-shrink] [--limit SECONDS]

Starts N processes with the documented environment (COLL_RANK, COLL_SIZE,
COLL_ROOT_ADDR on a free port, COLL_JOB_SECRET), then watches the job's directory: when
rank 0 of a shrunk communicator writes grow-<cycle> ("nNew np hex-id"), starts nNew new
processes with COLL_JOIN_ID, COLL_RANK (np - nNew + i) and COLL_SIZE. --hosts H gives the
processes COLL_HOST_ID=sim<proc % H>.

Passes when every process either was killed by SIGKILL (the victims) or exited with 0
printing its OK line, exactly N processes finished the last cycle, at least one victim
per cycle died, and nothing new was left in /dev/shm.
"""
import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_names():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("coll-")}
    except OSError:
        return set()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prog")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SURVIVE_SEED", "7")))
    ap.add_argument("--transport", default="auto")
    ap.add_argument("--hosts", type=int, default=0)
    ap.add_argument("--in-shrink", action="store_true")
    ap.add_argument("--limit", type=float, default=110)
    a = ap.parse_args()

    before = shm_names()
    work = tempfile.mkdtemp(prefix="coll-survive-")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COLL_", "OMPI_", "PMIX_", "SLURM_"))}
    for k in ("COLL_DEBUG", "COLL_TIMEOUT", "COLL_SOCKET_IFNAME"):
        if k in os.environ:
            base[k] = os.environ[k]
    base["COLL_TRANSPORT"] = a.transport
    common = [a.prog, "--dir", work, "--cycles", str(a.cycles), "--seed", str(a.seed), "--np", str(a.np)]
    if a.in_shrink:
        common.append("--in-shrink")
    procs = []  # (proc id, Popen)

    def start(proc, env_extra, extra_args):
        env = dict(base)
        env.update(env_extra)
        if a.hosts:
            env["COLL_HOST_ID"] = "sim%d" % (proc % a.hosts)
        p = subprocess.Popen(common + ["--proc", str(proc)] + extra_args, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append((proc, p))

    root = "127.0.0.1:%d" % free_port()
    secret = secrets.token_hex(32)
    for r in range(a.np):
        start(r, {"COLL_RANK": str(r), "COLL_SIZE": str(a.np), "COLL_ROOT_ADDR": root,
                  "COLL_JOB_SECRET": secret, "COLL_JOB_ID": "survive"}, [])
    next_proc = a.np
    grown = set()
    t0 = time.time()
    ok = True
    while True:
        for name in sorted(os.listdir(work)):
            if not name.startswith("grow-") or name in grown:
                continue
            grown.add(name)
            cycle = int(name.split("-")[1])
            with open(os.path.join(work, name)) as f:
                n_new, np_, hexid = f.read().split()
            n_new, np_ = int(n_new), int(np_)
            for i in range(n_new):
                start(next_proc, {"COLL_JOIN_ID": hexid, "COLL_RANK": str(np_ - n_new + i),
                                  "COLL_SIZE": str(np_)}, ["--join-cycle", str(cycle)])
                next_proc += 1
        if all(p.poll() is not None for _, p in procs):
            break
        if time.time() - t0 > a.limit:
            print("FAIL: the job did not end within %.0f s" % a.limit)
            for _, p in procs:
                if p.poll() is None:
                    p.kill()
            ok = False
            break
        time.sleep(0.02)
    elapsed = time.time() - t0
    killed = finished = 0
    for proc, p in procs:
        out = p.communicate()[0]
        if p.returncode == -9:
            killed += 1
            sys.stdout.write("".join(l + "\n" for l in out.splitlines() if l.startswith("recovery ")))
            continue
        if p.returncode == 0 and "OK" in out:
            finished += 1
            sys.stdout.write(out)
            continue
        ok = False
        print("FAIL: proc %d exited with %s:\n%s" % (proc, p.returncode, out))
    if finished != a.np:
        ok = False
        print("FAIL: %d processes finished the last cycle, expected %d" % (finished, a.np))
    if killed < a.cycles:
        ok = False
        print("FAIL: only %d processes died in %d cycles" % (killed, a.cycles))
    # The survivors' communicators unlink what the dead left; give the last a moment.
    for _ in range(50):
        left = shm_names() - before
        if not left:
            break
        time.sleep(0.1)
    if left:
        ok = False
        print("FAIL: left in /dev/shm: %s" % " ".join(sorted(left)))
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)
    print("%s: %d cycles, %d processes killed, %d started in all, %.1f s" %
          ("PASS" if ok else "FAIL", a.cycles, killed, len(procs), elapsed))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
