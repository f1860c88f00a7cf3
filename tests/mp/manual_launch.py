#!/usr/bin/env python3
"""Starts a job's ranks by hand, with only the documented environment (doc/launch.md):
COLL_RANK, COLL_SIZE, COLL_LOCAL_RANK, COLL_LOCAL_SIZE, COLL_ROOT_ADDR (a random free
port on 127.0.0.1), COLL_JOB_SECRET (64 random hex characters) and COLL_JOB_ID.

  manual_launch.py [--np N] [--stranger] PROG [ARGS...]

--stranger: while the job forms, another process connects to COLL_ROOT_ADDR again and
again and sends garbage (random bytes, an HTTP request, handshake headers with the right
magic but no secret and absurd lengths, nothing at all while holding the connection
open). The job must still succeed.

Passes when every rank exits with 0 and prints its "OK" line.
"""
import argparse
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

JOB_LIMIT_S = 120


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, n, root, secret, job):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COLL_", "OMPI_", "PMIX_", "SLURM_"))}
    # Keep the test setup's tunables (COLL_SOCKET_IFNAME, COLL_DEBUG, COLL_TIMEOUT...).
    for k in ("COLL_SOCKET_IFNAME", "COLL_DEBUG", "COLL_TIMEOUT", "COLL_TRANSPORT"):
        if k in os.environ:
            env[k] = os.environ[k]
    env.update(COLL_RANK=str(rank), COLL_SIZE=str(n), COLL_LOCAL_RANK=str(rank),
               COLL_LOCAL_SIZE=str(n), COLL_ROOT_ADDR=root, COLL_JOB_SECRET=secret,
               COLL_JOB_ID=job)
    return env


class Stranger:
    """Connects to the rendezvous port and misbehaves, counting the connections made."""

    def __init__(self, port):
        self.port = port
        self.connections = 0
        self.speaking = 0  # connections that got as far as sending a handshake header
        self.silent = []
        self.stop = threading.Event()
        self.first = threading.Event()  # set once a connection succeeded (rank 0 listens)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def payloads(self):
        rnd = random.Random(7)
        yield bytes(rnd.getrandbits(8) for _ in range(4096))
        yield b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"
        yield struct.pack("<IQ", 0xFFFFFFFF, 1 << 40) + b"\0" * 64
        # Speaks the handshake (doc: src/bootstrap/handshake.hpp) without the secret:
        # echoes the challenge's magic and version, a made-up MAC, and hello lengths
        # from absurd to plausible.
        for hello_len in (0xFFFFFFFF, 1 << 30, 16):
            yield ("handshake", hello_len)
        yield b""  # connect and close at once
        yield None  # connect, send nothing, keep the connection open

    @staticmethod
    def fake_header(challenge, hello_len):
        magic, version = struct.unpack_from("<II", challenge)
        role = 1  # the rendezvous role, so that the length and MAC checks are reached
        return (struct.pack("<III", magic, version, role) + os.urandom(16) + os.urandom(32) +
                struct.pack("<I", hello_len) + (b"x" * 16 if hello_len == 16 else b""))

    def attempt(self, payload):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
        self.connections += 1
        self.first.set()
        if payload is None:
            self.silent.append(s)
            return
        try:
            if isinstance(payload, tuple):
                challenge = s.recv(24)
                if len(challenge) >= 8:
                    payload = self.fake_header(challenge, payload[1])
                    self.speaking += 1
                else:
                    payload = b""
            if payload:
                s.sendall(payload)
            s.recv(64)  # the root should answer nothing useful and hang up
        except OSError:
            pass
        finally:
            s.close()

    def run(self):
        deadline = time.monotonic() + 30
        while not self.stop.is_set() and time.monotonic() < deadline:
            for p in self.payloads():
                if self.stop.is_set():
                    break
                try:
                    self.attempt(p)
                    time.sleep(0.02)  # enough to matter, not enough to flood the log
                except OSError:
                    time.sleep(0.05)  # rank 0 not listening yet (or already gone)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        for s in self.silent:
            s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=3)
    ap.add_argument("--stranger", action="store_true")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if not args.prog:
        ap.error("PROG is missing")

    port = free_port()
    root = f"127.0.0.1:{port}"
    secret = os.urandom(32).hex()
    job = "manual-" + os.urandom(6).hex()
    print(f"job {job}: {args.np} ranks, COLL_ROOT_ADDR={root}, stranger={'yes' if args.stranger else 'no'}",
          flush=True)

    def start(rank):
        return subprocess.Popen(args.prog, env=rank_env(rank, args.np, root, secret, job),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")

    t0 = time.monotonic()
    procs = [start(0)]
    stranger = None
    if args.stranger:
        stranger = Stranger(port)
        stranger.thread.start()
        # The other ranks join only once the stranger got in, so it really meets a forming job.
        if not stranger.first.wait(timeout=30):
            print("FAIL: the stranger never reached rank 0's rendezvous port")
            procs[0].kill()
            return 1
        time.sleep(0.3)
    procs += [start(r) for r in range(1, args.np)]
    if stranger:
        time.sleep(1.0)  # the job forms (and starts working) under fire
        stranger.stop.set()

    failures = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, JOB_LIMIT_S - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            failures.append(f"rank {rank} did not finish within {JOB_LIMIT_S} s")
        for line in out.splitlines():
            print(f"[{rank}] {line}")
        if p.returncode != 0:
            failures.append(f"rank {rank} exited with {p.returncode}")
        elif f"rank {rank} of {args.np}: OK" not in out:
            failures.append(f"rank {rank} exited with 0 but did not print its OK line")
    wall = time.monotonic() - t0
    if stranger:
        stranger.close()
        print(f"stranger: {stranger.connections} connections to {root} while the job formed, "
              f"{stranger.speaking} of them with a handshake header without the secret")
        if stranger.speaking == 0:
            failures.append("the stranger never got a handshake challenge from rank 0")
    print(f"summary: {args.np} ranks started by hand, {'all passed' if not failures else 'FAILED'} in {wall:.2f} s")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
