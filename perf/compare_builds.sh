#!/bin/bash
# Compares two builds of the library on one benchmark, interleaved: each round runs the
# tool of build A, then of build B (the order flips every round, so neither always runs
# on a warmer or quieter machine), and the summary gives, per size, each build's median
# time and the A/B time ratio of each round as min / median / max (above 1: B is faster).
# For "did this change keep the speed": A is a build of the commit before, B of after.
#
# usage: perf/compare_builds.sh BUILD_A BUILD_B [--tool NAME] [--np N] [--repeat N]
#                               [--tcp] [--hogs N] [--keep DIR] [tool flags]
#   --tool    the perf tool to run from each build (default all_reduce_perf)
#   --np      ranks (default 2), through each build's own collectiverun
#   --repeat  rounds (default 5)
#   --tcp     COLL_TRANSPORT=tcp for both
#   --hogs N  N busy processes (loops that never yield) beside every run
#   --keep    keep every run's output in DIR
# Tool flags (default -b 8 -e 64M -f 4) go to both builds' tools unchanged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
a=$1 b=$2
shift 2
tool=all_reduce_perf np=2 repeat=5 tcp=0 hogs=0 keep=""
flags=()
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift ;;
    --np) np=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --tcp) tcp=1 ;;
    --hogs) hogs=$2; shift ;;
    --keep) keep=$2; shift ;;
    *) flags+=("$1") ;;
  esac
  shift
done
[ ${#flags[@]} -gt 0 ] || flags=(-b 8 -e 64M -f 4)
[[ $np =~ ^[1-9][0-9]*$ && $repeat =~ ^[1-9][0-9]*$ && $hogs =~ ^[0-9]+$ ]] ||
  { echo "compare_builds.sh: --np, --repeat and --hogs take whole numbers (np, repeat >= 1)" >&2; exit 2; }
for d in "$a" "$b"; do
  for f in "$d/src/launcher/collectiverun" "$d/perf/$tool"; do
    [ -x "$f" ] || { echo "compare_builds.sh: $f not built" >&2; exit 2; }
  done
done
out=${keep:-$(mktemp -d /tmp/compare_builds.XXXXXX)}
mkdir -p "$out"
hog_pids=()
cleanup() {
  [ ${#hog_pids[@]} -eq 0 ] || { kill "${hog_pids[@]}" 2>/dev/null; wait "${hog_pids[@]}" 2>/dev/null || true; }
  [ -n "$keep" ] || rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
  ( trap - INT TERM; while :; do :; done ) </dev/null >/dev/null 2>&1 &
  hog_pids+=($!)
done
envs=(env -u COLL_TRANSPORT)
[ $tcp = 0 ] || envs=(env COLL_TRANSPORT=tcp)

run() {  # run NAME BUILD ROUND
  local log=$out/$1.$3.log
  echo "# round $3: $1 ($2)" >&2
  if ! "${envs[@]}" "$2/src/launcher/collectiverun" -np "$np" "$2/perf/$tool" "${flags[@]}" >"$log" 2>&1; then
    echo "compare_builds.sh: $1 failed in round $3; last lines:" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  # Rows: size, out-of-place time (field 6 of the nccl-tests table, after the rank tag).
  awk '{ sub(/^\[[0-9]+\] /, "") } !/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6 }' "$log" >"$out/$1.$3.tsv"
}
for ((r = 1; r <= repeat; r++)); do
  if [ $((r % 2)) = 1 ]; then run A "$a" $r; run B "$b" $r; else run B "$b" $r; run A "$a" $r; fi
done

echo "# $tool, $np ranks, transport $([ $tcp = 1 ] && echo tcp || echo default), $repeat rounds, $hogs hogs, flags: ${flags[*]}"
echo "# A: $a ($(git -C "$a/.." log -1 --format=%h 2>/dev/null || echo '?'))  B: $b ($(git -C "$b/.." log -1 --format=%h 2>/dev/null || echo '?'))"
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$repeat" <<'EOF'
import os, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
def load(name, r):
    rows = {}
    with open(os.path.join(out, f"{name}.{r}.tsv")) as f:
        for line in f:
            size, t = line.split()
            rows[int(size)] = float(t)
    return rows
a = [load("A", r) for r in range(1, repeat + 1)]
b = [load("B", r) for r in range(1, repeat + 1)]
print(f"{'size':>12} {'A median us':>12} {'B median us':>12} {'A/B min':>8} {'A/B med':>8} {'A/B max':>8}")
ratios_all = []
for size in sorted(a[0]):
    if not all(size in x for x in a + b):
        continue
    ta = [x[size] for x in a]
    tb = [x[size] for x in b]
    ratios = [p / q for p, q in zip(ta, tb) if q > 0]
    ratios_all.append(statistics.median(ratios))
    print(f"{size:>12} {statistics.median(ta):>12.2f} {statistics.median(tb):>12.2f} "
          f"{min(ratios):>8.3f} {statistics.median(ratios):>8.3f} {max(ratios):>8.3f}")
if ratios_all:
    print(f"# median over sizes of the per-size median A/B: {statistics.median(ratios_all):.3f}")
EOF
