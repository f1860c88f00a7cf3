#!/usr/bin/env python3
"""collectiverun --elastic (doc/recovery.md).

  elastic_launch_test.py COLLECTIVERUN MP_SURVIVE

1. mp_survive under --elastic -np 4 --min-np 2: ranks die by SIGKILL, the survivors shrink
   and ask for new ranks through COLL_ELASTIC_DIR, which the launcher starts; the job must
   exit with 0 and say how many ranks it lost and started.
2. A job that falls below --min-np ends at once with the status of the rank that took it
   there (128 + 9) and says why.
3. Misuse of the options is a usage error (exit 2).
"""
import re
import subprocess
import sys
import time


def run(args, limit):
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True, timeout=limit)
    return p.returncode, p.stdout + p.stderr, time.time() - t0


def main():
    launcher, survive = sys.argv[1], sys.argv[2]
    ok = True

    def expect(cond, what, out=""):
        nonlocal ok
        if not cond:
            ok = False
            print("FAIL: %s\n%s" % (what, out[-4000:]))

    rc, out, secs = run([launcher, "-np", "4", "--elastic", "--min-np", "2", "--max-np", "4", "--timeout", "100",
                         survive, "--cycles", "5"], 110)
    m = re.search(r"--elastic: (\d+) rank\(s\) lost, (\d+) started to join; the job finished", out)
    expect(rc == 0, "the elastic job exited with %d" % rc, out)
    expect(m and int(m.group(1)) >= 5 and m.group(1) == m.group(2), "no summary of lost and joined ranks", out)
    expect(len(re.findall(r"proc \d+: OK", out)) == 4, "not 4 ranks finished", out)
    print("elastic job: rc %d in %.1f s; %s" % (rc, secs, m.group(0) if m else "no summary"))

    rc, out, secs = run([launcher, "-np", "3", "--elastic", "--min-np", "3", "/bin/sh", "-c",
                         'if [ "$COLL_RANK" = 1 ]; then kill -9 $$; fi; sleep 30'], 40)
    expect(rc == 128 + 9, "below --min-np: exit %d, expected 137" % rc, out)
    expect("fewer than --min-np 3" in out, "below --min-np: no message saying so", out)
    expect(secs < 15, "below --min-np: the job took %.1f s to end" % secs, out)
    print("below --min-np: rc %d in %.1f s" % (rc, secs))

    for bad in (["-np", "2", "--min-np", "1"], ["-np", "2", "--elastic", "--min-np", "3"],
                ["-np", "3", "--elastic", "--max-np", "2"]):
        rc, out, _ = run([launcher] + bad + ["/bin/true"], 20)
        expect(rc == 2, "%s: exit %d, expected 2" % (" ".join(bad), rc), out)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
