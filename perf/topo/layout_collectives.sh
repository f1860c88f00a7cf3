#!/usr/bin/env bash
# Broadcast, reduce, all-gather and reduce-scatter on 2 hosts x 2 ranks: every forced
# algorithm of each (COLL_ALGO=<collective>:<algorithm>) and the automatic choice, with the
# ranks placed host by host (0 1 | 2 3, the default) or interleaved (0 2 | 1 3, as a
# launcher that deals ranks round-robin over hosts would place them).
#
#   layout_collectives.sh BUILD_DIR [--interleaved] [--rate 1gbit] [--delay 1ms]
#                         [--sizes "1M 16M"]
#
# One launch of the *_perf tool per collective, algorithm and size (-c 1: results are
# checked; -n 5 -w 2); prints the time in us per algorithm and the automatic choice's time
# over the best forced one ("auto/best"). The rings and chains follow the topology's ring
# order, so interleaving should change neither their times nor the choice much. Sizes are
# as the tools take them (all-gather and reduce-scatter: the whole output / input).
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: layout_collectives.sh BUILD_DIR [--interleaved] [--rate R] [--delay D] [--sizes LIST]}
shift
source "$here/topo_lib.sh"
shape=() sizes="1M 16M"
while [ $# -gt 0 ]; do
  case "$1" in
    --interleaved) export TOPO_HOSTS="1 2 1 2"; shift ;;
    --rate|--delay) shape+=("$1" "$2"); shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
topo_up "${shape[@]}"
echo "# 2 hosts x 2 ranks, ranks on hosts ${TOPO_HOSTS:-1 1 2 2}, veth ${shape[*]:-unshaped}; float32"
row() { printf '%-14s %9s %-6s %10s %-6s %10s %10s %9s\n' "$@"; }
row collective bytes algo time algo time auto auto/best
status=0
for spec in broadcast:chain:tree reduce:chain:tree allgather:ring:rd reducescatter:ring:hd; do
  IFS=: read -r coll a1 a2 <<<"$spec"
  tool=$build/perf/${coll/all/all_}
  tool=${tool/reducescatter/reduce_scatter}_perf
  [ -x "$tool" ] || { echo "$tool not built" >&2; exit 2; }
  for s in $sizes; do
    declare -A t=()
    for a in "$a1" "$a2" auto; do
      out=$(topo_run "$([ "$a" = auto ] && echo auto || echo "$coll:$a")" "$tool" -b "$s" -e "$s" -c 1 -n 5 -w 2) || exit 1
      grep -q '^# Out of bounds values : 0 OK' <<<"$out" || { echo "$coll $a $s: wrong results" >&2; status=1; }
      t[$a]=$(perf_times <<<"$out" | awk '{print $2}')
    done
    read -r bytes ratio < <(awk -v s="$(perf_times <<<"$out" | awk '{print $1}')" -v x="${t[$a1]}" -v y="${t[$a2]}" -v z="${t[auto]}" \
      'BEGIN { b = x < y ? x : y; printf "%s %.2f\n", s, z / b }')
    row "$coll" "$bytes" "$a1" "${t[$a1]}" "$a2" "${t[$a2]}" "${t[auto]}" "$ratio"
  done
done
exit $status
