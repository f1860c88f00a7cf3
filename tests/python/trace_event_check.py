#!/usr/bin/python3
"""Checks a file against the Chrome trace-event format that Perfetto and chrome://tracing
load (the "JSON Array Format", or an object with "traceEvents"):

  * the document is a JSON array of event objects (or {"traceEvents": [...]});
  * every event has a string "name", a known "ph", integer "pid" and "tid";
  * "X" (complete) events: numeric "ts" >= 0 and "dur" >= 0; "B"/"E": "ts"; "i"/"I"
    (instant): "ts" and a scope "s" of "g", "p" or "t"; "M" (metadata): a known name and
    an "args" object ("name" a string for process_name / thread_name);
  * "cat", when present, is a string; "args", when present, an object;
  * the complete events of one track (pid, tid) nest: each one either lies inside the
    one around it or starts after it ended, as Perfetto requires of a thread's slices.

    trace_event_check.py FILE...        exit 0 when every file passes, 1 otherwise
check(path) returns the list of problems (empty when valid) and the parsed events.
"""
import json
import numbers
import sys

PHASES = set("XBEiIMCbnesftPOND") | {"(", ")"}
METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}
EPS = 0.002  # us: ts and dur are written with 3 decimals


def _num(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def check(path):
    problems = []
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{path}: not valid JSON: {e}"], []
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return [f"{path}: neither an array of events nor an object with traceEvents"], []
    tracks = {}
    for i, e in enumerate(events):
        where = f"{path}: event {i}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not isinstance(e.get("name"), str):
            problems.append(f"{where}: no string name")
        if ph not in PHASES:
            problems.append(f"{where}: unknown ph {ph!r}")
        for k in ("pid", "tid"):
            if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
                problems.append(f"{where}: {k} is not an integer")
        if "cat" in e and not isinstance(e["cat"], str):
            problems.append(f"{where}: cat is not a string")
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"{where}: args is not an object")
        if ph in ("X", "B", "E", "i", "I"):
            if not _num(e.get("ts")) or e["ts"] < 0:
                problems.append(f"{where}: ts missing or negative")
        if ph == "X":
            if not _num(e.get("dur")) or e["dur"] < 0:
                problems.append(f"{where}: dur missing or negative")
            elif _num(e.get("ts")):
                tracks.setdefault((e.get("pid"), e.get("tid")), []).append((e["ts"], e["ts"] + e["dur"], i))
        if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"{where}: instant scope {e.get('s')!r}")
        if ph == "M":
            if e.get("name") not in METADATA:
                problems.append(f"{where}: unknown metadata {e.get('name')!r}")
            if not isinstance(e.get("args"), dict):
                problems.append(f"{where}: metadata without args")
            elif e.get("name") in ("process_name", "thread_name") and not isinstance(e["args"].get("name"), str):
                problems.append(f"{where}: {e.get('name')} without a string args.name")
    for track, spans in tracks.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for begin, end, i in spans:
            while stack and begin >= stack[-1][1] - EPS:
                stack.pop()
            if stack and end > stack[-1][1] + EPS:
                problems.append(f"{path}: event {i} on track {track} overlaps event {stack[-1][2]} "
                                "without nesting in it")
            stack.append((begin, end, i))
    return problems, events


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: trace_event_check.py FILE...")
    bad = 0
    for path in sys.argv[1:]:
        problems, events = check(path)
        for p in problems[:20]:
            print(p)
        bad += bool(problems)
        if not problems:
            print(f"{path}: {len(events)} events, valid trace-event JSON")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
