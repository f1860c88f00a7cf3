#!/usr/bin/env bash
# All-reduce on 2 hosts x 2 ranks: every forced algorithm (COLL_ALGO) and the automatic
# choice, size by size, and whether the automatic choice stays within 10% of the best
# forced algorithm at every size.
#
#   compare_algos.sh BUILD_DIR [--rate 1gbit] [--delay 1ms] [-b 8] [-e 256M] [-n ITERS] [-r REPEATS]
#
# Without --rate/--delay the veth is unshaped. The sweeps of all algorithms are repeated
# REPEATS times (default 3) in turn, the order of the algorithms rotated each time (this
# VM's speed drifts over tens of seconds, about one sweep), and each size keeps its best
# time per algorithm, so that a burst of load or a slow spell does not decide the
# comparison. Prints one table
# (time in us per size and algorithm) and a PASS/FAIL line per size; exits 1 if any fails.
# The timed sweeps run without the data check (-c 0): with it, a 10-25 ms stall landed in
# one of the first small sizes' timed loops at random (seen on every algorithm, never
# without the check), which decided those sizes by noise. Each algorithm's results are
# checked in a separate untimed sweep (-c 1 -n 1 -w 0) instead.
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: compare_algos.sh BUILD_DIR [--rate R] [--delay D] [-b MIN] [-e MAX] [-n ITERS]}
shift
source "$here/topo_lib.sh"
shape=() min=8 max=256M iters=() repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rate|--delay) shape+=("$1" "$2"); shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -n) iters=(-n "$2"); shift 2 ;;
    -r) repeats=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
tool=$build/perf/all_reduce_perf
[ -x "$tool" ] || { echo "$tool not built" >&2; exit 2; }
topo_up "${shape[@]}"
echo "# 2 hosts x 2 ranks, veth ${shape[*]:-unshaped}; all_reduce_perf -b $min -e $max -f 2 float sum"
algos=(auto ring tree hd rd hier)
for a in "${algos[@]}"; do
  topo_run "$a" "$tool" -b "$min" -e "$max" -f 2 -c 1 -n 1 -w 0 > "$TOPO_TMP/$a.check"
  grep -q '^# Out of bounds values : 0 OK' "$TOPO_TMP/$a.check" || { echo "$a: wrong results" >&2; exit 1; }
done
for rep in $(seq "$repeats"); do
  k=$(((rep - 1) % ${#algos[@]}))
  for a in "${algos[@]:k}" "${algos[@]:0:k}"; do
    topo_run "$a" "$tool" -b "$min" -e "$max" -f 2 -c 0 "${iters[@]}" > "$TOPO_TMP/$a.out"
    perf_times < "$TOPO_TMP/$a.out" >> "$TOPO_TMP/$a.t"
  done
done
python3 - "$TOPO_TMP" "${algos[@]}" <<'PY'
import sys
tmp, algos = sys.argv[1], sys.argv[2:]
t = {}
for a in algos:
    t[a] = {}
    for line in open(f"{tmp}/{a}.t"):
        s, v = line.split()
        t[a][int(s)] = min(float(v), t[a].get(int(s), float("inf")))
sizes = sorted(t["auto"])
print("%12s" % "bytes" + "".join("%11s" % a for a in algos) + "   best forced  auto/best")
bad = 0
for s in sizes:
    forced = {a: t[a][s] for a in algos[1:] if s in t[a]}
    b = min(forced, key=forced.get)
    ratio = t["auto"][s] / forced[b]
    ok = ratio <= 1.10
    bad += not ok
    print("%12d" % s + "".join("%11.1f" % t[a].get(s, float("nan")) for a in algos) +
          "   %-11s %6.2f %s" % (b, ratio, "PASS" if ok else "FAIL"))
print("# automatic choice within 10%% of the best forced algorithm at %d of %d sizes" % (len(sizes) - bad, len(sizes)))
sys.exit(1 if bad else 0)
PY
