#!/bin/bash
# Reproducible against ordinary float32 all-reduce (all_reduce_perf -o sumrepro against
# -o sum), and at 64 MiB against Open MPI's ordinary all-reduce, in interleaved rounds:
# each round runs every program once, one after the other, so that a slow spell of the
# machine weighs on all of them. Prints per size the time ratio reproducible / ordinary
# (min / median / max over the rounds, lower is better) and, where Open MPI ran, the
# reproducible busbw / Open MPI busbw at 64 MiB; then the verdicts on the targets:
#   <= 1.3x the time at 8 B - 64 KiB, <= 2x at 64 MiB, >= 1.2x Open MPI busbw at 64 MiB (shm).
#
# usage: perf/compare_repro.sh BUILD_DIR [--np N] [--tcp] [--repeat N] [--no-ompi] [--keep DIR]
#   --np N      ranks (default 2)
#   --tcp       COLL_TRANSPORT=tcp (and Open MPI's btl tcp on lo); default: shared memory
#   --repeat N  rounds (default 3)
#   --no-ompi   do not run Open MPI
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
build=$(cd "$1" && pwd); shift
np=2; tcp=0; repeat=3; ompi=1; keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift ;;
    --tcp) tcp=1 ;;
    --repeat) repeat=$2; shift ;;
    --no-ompi) ompi=0 ;;
    --keep) keep=$2; shift ;;
    -h|--help) usage ;;
    *) echo "compare_repro.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ "$np" =~ ^[0-9]+$ && "$repeat" =~ ^[0-9]+$ ]] || usage

launcher=$build/src/launcher/collectiverun
ours=$build/perf/all_reduce_perf
mpibench=$build/perf/mpi_allreduce_bench
[ -x "$ours" ] && [ -x "$launcher" ] || { echo "compare_repro.sh: build $build has no all_reduce_perf / collectiverun" >&2; exit 2; }
if [ $ompi = 1 ] && { [ ! -x "$mpibench" ] || ! command -v mpirun >/dev/null; }; then
  echo "# Open MPI peer not built or mpirun missing: skipped" >&2; ompi=0
fi
if [ $tcp = 1 ]; then
  ourenv=(env COLL_TRANSPORT=tcp); mpiflags=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
else
  ourenv=(env -u COLL_TRANSPORT); mpiflags=()
fi
rdir=${keep:-$(mktemp -d)}
mkdir -p "$rdir"

small=(-b 8 -e 64K -f 2 -n 2000 -w 200 -c 0)
large=(-b 64M -e 64M -n 5 -w 1 -c 0)
run() {  # name, program...: keeps the output, prints "size time busbw" lines to name.tsv
  local name=$1; shift
  "$@" >"$rdir/$name.log" 2>&1 || { echo "# $name FAILED:" >&2; tail -5 "$rdir/$name.log" >&2; exit 1; }
  awk '{ sub(/^\[[0-9]+\] /, "") } !/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6, $8 }' \
    "$rdir/$name.log" >>"$rdir/$name.tsv"
}
echo "# $np ranks, $([ $tcp = 1 ] && echo tcp || echo 'shared memory'), $repeat rounds; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 1; r <= repeat; r++)); do
  d=$rdir/round$r; mkdir -p "$d"
  for part in small large; do
    eval "flags=(\"\${$part[@]}\")"
    for op in sum sumrepro; do
      run "round$r/${op}_$part" "${ourenv[@]}" "$launcher" -np "$np" "$ours" -d float -o "$op" "${flags[@]}"
    done
    if [ $ompi = 1 ] && [ $part = large ]; then
      run "round$r/ompi_$part" mpirun --allow-run-as-root --oversubscribe -np "$np" "${mpiflags[@]}" "$mpibench" "${flags[@]}"
    fi
  done
done

python3 - "$rdir" "$repeat" "$tcp" <<'EOF'
import os, statistics, sys
rdir, rounds, tcp = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def load(path):
    rows = {}
    if os.path.exists(path):
        for line in open(path):
            a = line.split()
            if len(a) >= 3:
                rows[int(a[0])] = (float(a[1]), float(a[2]))
    return rows
ratios, vs_ompi = {}, []
for r in range(1, rounds + 1):
    for part in ("small", "large"):
        s = load(f"{rdir}/round{r}/sum_{part}.tsv")
        p = load(f"{rdir}/round{r}/sumrepro_{part}.tsv")
        o = load(f"{rdir}/round{r}/ompi_{part}.tsv")
        for size in s:
            if size in p and s[size][0] > 0:
                ratios.setdefault(size, []).append((p[size][0] / s[size][0], s[size][0], p[size][0]))
            if part == "large" and size in o and size in p and o[size][1] > 0:
                vs_ompi.append(p[size][1] / o[size][1])
def mmm(xs):
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f}"
print("# size (B)   repro/ordinary time (min / median / max)   ordinary us (median)   repro us (median)")
ok = True
for size in sorted(ratios):
    xs = [x[0] for x in ratios[size]]
    print(f"{size:>10}   {mmm(xs):>28}   {statistics.median(x[1] for x in ratios[size]):>12.1f}   "
          f"{statistics.median(x[2] for x in ratios[size]):>12.1f}")
    limit = 1.3 if size <= 64 << 10 else 2.0 if size == 64 << 20 else None
    if limit and statistics.median(xs) > limit:
        ok = False
        print(f"#   MISSED: median {statistics.median(xs):.2f}x > {limit}x")
if vs_ompi:
    print(f"# 64 MiB reproducible busbw / Open MPI busbw: {mmm(vs_ompi)}")
    if not tcp and statistics.median(vs_ompi) < 1.2:
        ok = False
        print("#   MISSED: below 1.2x Open MPI")
print("# targets (medians):", "met" if ok else "missed")
EOF
[ -n "$keep" ] || rm -rf "$rdir"
