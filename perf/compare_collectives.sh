#!/bin/bash
# Same-run comparison of all-gather, reduce-scatter and broadcast (and all-reduce, reduce,
# alltoall, gather, scatter) with Open MPI's matching call on the same sizes: our *_perf
# tool under collectiverun, then perf/peers/mpi_allreduce_bench --coll under mpirun, float
# data, identical size and busbw conventions, root 0. Prints busbw of both and the ratio,
# with a verdict against --target (default 1.5x) at every size measured. gather_perf and
# scatter_perf run with --native 1 (collGather/collScatter, as MPI_Gather/MPI_Scatter are
# one call). MPI_Bcast has one buffer, so broadcast is compared with our in-place column
# (root's buffer is the data, as in MPI); the others with our out-of-place column, as
# MPI's calls are out of place. For the 2-rank all-gather it also prints the ratios the
# memory allows at all for each way of moving the bytes (allgather_floor), measured in
# the same run.
# --register runs our tools with -R 1: their buffers come from collMemAlloc, which
# same-host peers map (Open MPI's buffers stay plain malloc memory).
#
# usage: perf/compare_collectives.sh BUILD_DIR [--np N] [--tcp] [--register] [--target X]
#                                    [--colls "all_gather reduce_scatter broadcast"]
#                                    (also all_reduce reduce alltoall gather scatter)
#                                    [sweep flags, default -b 64M -e 64M]
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
build=$(cd "$1" && pwd); shift
np=2; tcp=0; target=1.5; colls="all_gather reduce_scatter broadcast"; sweep=(); ours=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift ;;
    --tcp) tcp=1 ;;
    --register) ours=(-R 1) ;;
    --target) target=$2; shift ;;
    --colls) colls=$2; shift ;;
    *) sweep+=("$1") ;;
  esac
  shift
done
[ ${#sweep[@]} -gt 0 ] || sweep=(-b 64M -e 64M)
mpibench=$build/perf/mpi_allreduce_bench
launcher=$build/src/launcher/collectiverun
[ -x "$mpibench" ] || { echo "compare_collectives.sh: $mpibench not built (no MPI)" >&2; exit 2; }
out=$(mktemp -d /tmp/compare_colls.XXXXXX)
trap 'rm -rf "$out"' EXIT

envs=(env -u COLL_TRANSPORT); mpiflags=()
if [ $tcp = 1 ]; then
  envs=(env COLL_TRANSPORT=tcp)
  mpiflags=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
fi
# "size time_us busbw" from a perf table: out-of-place columns, or in-place with "in".
table() {
  awk -v inplace="${2:-}" '{ sub(/^\[[0-9]+\] /, "") }
    !/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { if (inplace == "in") print $1, $10, $12; else print $1, $6, $8 }' "$1"
}

echo "# $np ranks on $(hostname), $(nproc) cores, float; transport: $([ $tcp = 1 ] && echo tcp || echo default);" \
  "our buffers: $([ ${#ours[@]} -gt 0 ] && echo "collMemAlloc (-R 1)" || echo "malloc")"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-15s %12s | %10s %10s | %10s %10s | %6s\n" coll "size(B)" "ours GB/s" "ours us" "ompi GB/s" "ompi us" "bw x"
missed=0
for coll in $colls; do
  native=()
  case $coll in
    all_reduce) mpicoll=allreduce ;;
    all_gather) mpicoll=allgather ;;
    reduce_scatter) mpicoll=reducescatter ;;
    broadcast) mpicoll=bcast ;;
    reduce | alltoall) mpicoll=$coll ;;
    gather | scatter) mpicoll=$coll; native=(--native 1) ;;
    *) echo "compare_collectives.sh: unknown collective $coll" \
         "(all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter)" >&2
       exit 2 ;;
  esac
  "${envs[@]}" "$launcher" -np "$np" "$build/perf/${coll}_perf" "${sweep[@]}" "${ours[@]}" "${native[@]}" \
    >"$out/ours.log" 2>&1 ||
    { echo "# ${coll}_perf failed:" >&2; tail -5 "$out/ours.log" >&2; exit 1; }
  mpirun --allow-run-as-root --oversubscribe -np "$np" "${mpiflags[@]}" "$mpibench" --coll "$mpicoll" \
    "${sweep[@]}" >"$out/ompi.log" 2>&1 ||
    { echo "# mpi_allreduce_bench --coll $mpicoll failed:" >&2; tail -5 "$out/ompi.log" >&2; exit 1; }
  table "$out/ours.log" "$([ "$coll" = broadcast ] && echo in)" >"$out/ours.tsv"
  table "$out/ompi.log" >"$out/ompi.tsv"  # the peer prints one time per size (columns 6 and 8)
  # The ratio comes from the times (same size and busbw factor), not the rounded busbw.
  if ! awk -v coll="$coll" -v target="$target" '
    NR == FNR { t[$1] = $2; bw[$1] = $3; next }
    ($1 in t) {
      r = t[$1] > 0 ? $2 / t[$1] : 0
      printf "%-15s %12d | %10.3f %10.2f | %10.3f %10.2f | %6.2f %s\n", coll, $1, bw[$1], t[$1], $3, $2, r,
             (r >= target ? "PASS" : "FAIL (target >= " target "x)")
      if (r < target) bad = 1
    }
    END { exit bad }' "$out/ours.tsv" "$out/ompi.tsv"; then
    missed=$((missed + 1))
  fi
  # Two ranks on shared memory: how far apart the two ways of moving an all-gather's bytes
  # can be on this machine's memory at all (perf/peers/allgather_floor.cpp), at the
  # largest size measured.
  if [ "$coll" = all_gather ] && [ "$np" = 2 ] && [ $tcp = 0 ] && [ -x "$build/perf/allgather_floor" ]; then
    largest=$(awk 'END { print $1 }' "$out/ours.tsv")
    if [ -n "$largest" ] && [ $((largest / 2 % 64)) = 0 ] && [ "$largest" -ge 128 ]; then
      "$build/perf/allgather_floor" $((largest / 2)) |
        sed -n -e 's/^floor ratio/# memory floor at '"$largest"' B, kernel copies: best possible ratio/p' \
          -e 's/^staged floor ratio/# memory floor at '"$largest"' B, staged through a ring: best possible ratio/p' \
          -e 's/^mapped floor ratio/# memory floor at '"$largest"' B with mapped buffers (-R 1): best possible ratio/p'
    fi
  fi
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# verdict: $([ $missed = 0 ] && echo "all collectives >= ${target}x Open MPI" || echo "$missed collective(s) below ${target}x")"
