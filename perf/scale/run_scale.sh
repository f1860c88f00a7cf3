#!/usr/bin/env bash
# The cost of a job's size: runs scale_bench for each N and prints one table row per N
# (perf/scale/scale_bench.cpp says what each column is). With --plot FILE.png also draws
# every column against N (python3-matplotlib).
#
#   perf/scale/run_scale.sh [--build DIR] [--ranks "8 16 32 64 128 256 512"]
#                           [--per-host K] [--plot FILE.png] [--out FILE.txt]
#
# --per-host K spreads the N ranks over N/K simulated hosts (COLL_HOST_ID), the ranks of
# one host using shared memory and the others TCP over loopback; 0 puts them all on one
# host. The environment reaches every rank (COLL_ALGO=ring is set unless given).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../../build"
ranks="8 16 32 64 128 256 512"
perhost=8
plot=""
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --per-host) perhost=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--ranks LIST] [--per-host K] [--plot FILE.png] [--out FILE]" >&2; exit 2 ;;
  esac
done
bench="$build/perf/scale/scale_bench"
[ -x "$bench" ] || { echo "no $bench: build it with ninja -C $build perf/scale/scale_bench" >&2; exit 1; }
export COLL_ALGO=${COLL_ALGO:-ring}
export COLL_TIMEOUT=${COLL_TIMEOUT:-120}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
first=1
for n in $ranks; do
  hosts=1
  if [ "$perhost" -gt 0 ]; then hosts=$(( (n + perhost - 1) / perhost )); fi
  args=(--ranks "$n" --hosts "$hosts" --timeout "$((COLL_TIMEOUT + 30))")
  [ $first = 1 ] && args+=(--header)
  first=0
  "$bench" "${args[@]}" | tee -a "$tmp" || echo "# $n ranks over $hosts hosts failed" | tee -a "$tmp"
done
[ -n "$out" ] && cp "$tmp" "$out"
if [ -n "$plot" ]; then
  /usr/bin/python3 - "$tmp" "$plot" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
head, data = rows[0], [r for r in rows[1:] if r[0].isdigit()]
cols = {h: [float(r[i]) for r in data] for i, h in enumerate(head) if h != "FAILED"}
n = cols["ranks"]
panels = [("init_med", "init_max", "init_cpu", "split_med", "destroy", "ar1_extra"), ("fds", "threads"),
          ("rss_kB", "anon_kB", "shm_kB"), ("root_msgs",), ("root_in_B", "root_out_B")]
fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5))
for ax, names in zip(axes, panels):
    for c in names:
        ax.plot(n, cols[c], marker="o", label=c)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks")
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
PY
fi
