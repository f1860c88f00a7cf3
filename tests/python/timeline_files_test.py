#!/usr/bin/python3
"""The engine's timeline files against the Chrome trace-event format (Perfetto):
runs the C interface test (mp_hvd_c) on 2 ranks with COLL_TIMELINE=DIR/env.%r.json, which
also switches a second timeline on and off at run time (collHvdStartTimeline into
DIR/c.%r.json), then checks every file with trace_event_check and that each holds the
operations it should.

    timeline_files_test.py COLLECTIVERUN MP_HVD_C
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_event_check import check  # noqa: E402

collectiverun, prog = sys.argv[1], sys.argv[2]
failed = []
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, COLL_TIMELINE=os.path.join(d, "env.%r.json"), COLL_HVD_TIMELINE_DIR=d)
    p = subprocess.run([collectiverun, "-np", "2", "--timeout", "100", prog], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print(p.stdout[-3000:])
    if p.returncode != 0:
        sys.exit(f"FAIL: mp_hvd_c exited with {p.returncode}")
    for rank in (0, 1):
        for name, must in (("env", "c.avg"), ("c", "c.timeline")):
            path = os.path.join(d, f"{name}.{rank}.json")
            problems, events = check(path)
            tracks = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
            spans = [e for e in events if e.get("ph") == "X"]
            print(f"{path}: {len(events)} events, {len(spans)} spans, {len(tracks)} tracks")
            failed += problems
            if not any(t.startswith(must) for t in tracks):
                failed.append(f"{path}: no track for {must}* (tracks: {sorted(tracks)[:10]})")
            if not spans:
                failed.append(f"{path}: no complete events")
            if name == "c":
                if tracks - {"engine", "c.timeline"}:
                    failed.append(f"{path}: operations from outside the start/stop window: {sorted(tracks)}")
                if not any(e.get("ph") == "i" and e.get("name") == "cycle" for e in events):
                    failed.append(f"{path}: markCycles=1 but no cycle marker")
for f in failed:
    print("FAIL:", f)
sys.exit(1 if failed else 0)
