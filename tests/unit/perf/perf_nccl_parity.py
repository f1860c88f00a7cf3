#!/usr/bin/env python3
"""The *_perf tools read as nccl-tests' output is read.

Runs the tools under collectiverun (2 ranks) with the flags nccl-tests' README lists and
checks, for each run:
  * the text report by nccl-tests' column rules: a line not starting with '#' is a result
    row of whitespace-separated fields, size count type redop root, then per half
    (out-of-place, in-place) time algbw busbw #wrong, and with -I 1 i_min i_max i_p99
    i_cv% after each half's #wrong; -S 1 adds a date and a time at the end;
  * the preamble ("# Collective test starting: <prog>", "# nThread ...") and the closing
    "# Collective test concluded: <prog>" line, "# Out of bounds values : 0 OK";
  * the -J report: valid JSON with nccl-tests' field names, one result per row whose
    numbers are the row's;
  * -M's memory line, -z 0..3, -C 1, -u, -c 2, -T, and the flags that are refused by name.

  perf_nccl_parity.py COLLECTIVERUN PERF_TOOL_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

COLLECTIVERUN, TOOLS = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def run(tool, flags, np=2):
    cmd = [COLLECTIVERUN, "--timeout", "60", "--no-tag-output", "-np", str(np),
           os.path.join(TOOLS, tool)] + flags
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=90)
    return p.returncode, p.stdout, p.stderr


def rows(out):
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


def number(text):
    return float(text)


def check_report(tool, flags, out, per_iter=False, timestamps=False):
    what = "%s %s" % (tool, " ".join(flags))
    check("# Collective test starting: %s" % tool in out, what + ": no 'Collective test starting' line")
    check(any(line.startswith("# nThread 1 nGpus ") for line in out.splitlines()),
          what + ": no '# nThread' line")
    check("# Collective test concluded: %s" % tool in out, what + ": no closing line")
    check("# Out of bounds values : 0 OK" in out, what + ": wrong values")
    result = rows(out)
    check(result, what + ": no result rows")
    half = 8 if per_iter else 4
    want = 5 + 2 * half + (2 if timestamps else 0)
    for r in result:
        if not check(len(r) == want, "%s: %d fields, not %d: %s" % (what, len(r), want, r)):
            continue
        size, count = int(r[0]), int(r[1])
        check(size >= 0 and count >= 0, what + ": size/count " + str(r[:2]))
        for h in range(2):
            base = 5 + h * half
            time, algbw, busbw = (number(x) for x in r[base:base + 3])
            check(time > 0 and algbw >= 0 and busbw >= 0, what + ": half " + str(r[base:base + 4]))
            check(r[base + 3] in ("0", "N/A"), what + ": #wrong " + r[base + 3])
            if per_iter:
                i_min, i_max, i_p99, cv = (number(x) for x in r[base + 4:base + 8])
                check(0 < i_min <= i_p99 <= i_max and cv >= 0, what + ": i_* " + str(r[base + 4:base + 8]))
        if timestamps:
            check(len(r[-2]) == 10 and r[-2][4] == "-" and ":" in r[-1], what + ": timestamp " + str(r[-2:]))
    return result


def check_json(path, result, per_iter=False, cputime=False):
    with open(path) as f:
        doc = json.load(f)
    for key in ("version", "start_time", "args", "env", "nccl_version", "config", "results",
                "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"):
        check(key in doc, path + ": no '" + key + "'")
    check(not any("COLL_JOB_SECRET" in e for e in doc.get("env", [])), path + ": the job secret is in 'env'")
    cfg = doc.get("config", {})
    for key in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "warmup_iters", "iterations",
                "aggregated_iterations", "validation", "graph", "blocking_collectives",
                "per_iter_timing", "per_iter_skip", "parallel_init", "devices"):
        check(key in cfg, path + ": config has no '" + key + "'")
    check(len(cfg.get("devices", [])) == 2, path + ": not 2 devices")
    for d in cfg.get("devices", []):
        check(set(d) >= {"rank", "group", "pid", "hostname", "device", "device_hex", "device_info"},
              path + ": device fields " + str(sorted(d)))
    res = doc.get("results", [])
    check(len(res) == len(result), "%s: %d results for %d rows" % (path, len(res), len(result)))
    tkey = "cpu_time" if cputime else "time"
    for j, r in zip(res, result):
        check(j["size"] == int(r[0]) and j["count"] == int(r[1]) and j["type"] == r[2] and
              j["redop"] == r[3] and int(j["root"]) == int(r[4]), path + ": result %s vs row %s" % (j, r[:5]))
        for name in ("out_of_place", "in_place"):
            h = j.get(name, {})
            check(set(h) == {tkey, "alg_bw", "bus_bw", "nwrong"}, path + ": " + name + " " + str(sorted(h)))
            check(h.get("nwrong") == 0, path + ": nwrong " + str(h.get("nwrong")))
            if per_iter:
                p = j.get(name + "_per_iter", {})
                for k in ("skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us",
                          "p99_us", "stdev_us", "cv_pct", "times_us", "per_process_max_times_us"):
                    check(k in p, path + ": " + name + "_per_iter has no " + k)
                check(len(p.get("times_us", [])) == j["actual_iterations"], path + ": times_us length")
                check(len(p.get("per_process_max_times_us", [])) == 2, path + ": per-process rows")
        check("actual_iterations" in j and "experiment_name" in j, path + ": row terminator fields")
    check(doc.get("out_of_bounds", {}).get("okay") is True, path + ": out_of_bounds not okay")
    return doc


with tempfile.TemporaryDirectory() as tmp:
    small = ["-b", "64", "-e", "4K", "-f", "4", "-n", "4", "-w", "1"]

    # -J with -I (and -K), -S, -M: rows, JSON and the memory line.
    path = os.path.join(tmp, "ar.json")
    flags = small + ["-J", path, "-I", "1", "-K", "1", "-S", "1", "-M", "1", "-p", "1", "-T", "60"]
    rc, out, err = run("all_reduce_perf", flags)
    if check(rc == 0, "all_reduce_perf -J -I -S -M: exit %d\n%s%s" % (rc, out, err)):
        result = check_report("all_reduce_perf", flags, out, per_iter=True, timestamps=True)
        check("# Writing JSON output to " + path in out, "no 'Writing JSON output' line")
        check("# Host memory usage" in out and "Initialization" in out and "| Total" in out,
              "-M: no memory line")
        doc = check_json(path, result, per_iter=True)
        check(doc["config"]["per_iter_skip"] == 1, "config per_iter_skip")
    # An existing report is kept: the next run writes ar.json.0.
    rc, out, err = run("all_reduce_perf", small + ["-J", path])
    check(rc == 0 and os.path.exists(path + ".0"), "second -J run did not write %s.0: %d %s" % (path, rc, err))

    # Every blocking mode, -C, -u and -c 2 on tools with and without a nonblocking form.
    for tool in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf",
                 "reduce_perf", "alltoall_perf", "sendrecv_perf", "gather_perf"):
        for z in ("0", "1", "2", "3"):
            flags = small + ["-z", z]
            if tool == "all_reduce_perf" and z == "0":
                flags += ["-m", "3", "-C", "1", "-u", "1", "-c", "2", "-d", "double"]
            rc, out, err = run(tool, flags)
            if check(rc == 0, "%s %s: exit %d\n%s%s" % (tool, " ".join(flags), rc, out, err)):
                check_report(tool, flags, out)
                if z == "3":
                    check("time excludes barrier" in out, tool + " -z 3: no blocking line")
                if z == "0":
                    nb = tool not in ("gather_perf",)
                    check(("nonblocking collI* calls" in out) == nb and ("has no nonblocking form" in out) != nb,
                          tool + " -z 0: the header does not say how the calls were issued")
    path = os.path.join(tmp, "cpu.json")
    rc, out, err = run("all_reduce_perf", small + ["-C", "1", "-J", path])
    if check(rc == 0, "-C 1 -J: exit %d %s" % (rc, err)):
        check("cputime" in out, "-C 1: no cputime column")
        check_json(path, rows(out), cputime=True)

    # -T: a sweep that never ends (-N 0) is ended after 2 s, exit 3, saying why.
    rc, out, err = run("all_reduce_perf", ["-b", "8", "-e", "64", "-N", "0", "-T", "2"])
    check(rc == 3 and "-T 2: the test did not finish within 2 s" in err, "-T 2: exit %d, stderr %r" % (rc, err))

    # Refused by name, before the job starts (exit 2).
    for flags, named in ((["-G", "1"], "-G 1"), (["-R", "2"], "-R 2"), (["-D", "1"], "-D 1"),
                         (["-J", os.path.join(tmp, "x.csv")], "-J"), (["-t", "2"], "-t"),
                         (["--cudagraph=1"], "--cudagraph")):
        rc, out, err = run("all_reduce_perf", small + flags)
        check(rc == 2 and named in err, "%s: exit %d, stderr %r" % (flags, rc, err))
    rc, out, err = run("all_reduce_perf", small + ["-J", os.path.join(tmp, "no", "such", "dir.json")])
    check(rc == 2 and "-J" in err, "-J into a missing directory: exit %d, stderr %r" % (rc, err))

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("all nccl-tests parity checks passed")
