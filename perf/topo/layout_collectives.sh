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
# order and the hierarchical all-gather and reduce-scatter follow the host grid, so
# interleaving should change neither their times nor the choice much. Sizes are
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
row() { printf '%-14s %9s %-34s %10s %9s\n' "$@"; }
row collective bytes "forced algorithms: time" auto auto/best
status=0
for spec in broadcast:chain:tree reduce:chain:tree allgather:ring:rd:hier reducescatter:ring:hd:hier; do
  IFS=: read -r -a fields <<<"$spec"
  coll=${fields[0]} algos=("${fields[@]:1}")
  tool=$build/perf/${coll/all/all_}
  tool=${tool/reducescatter/reduce_scatter}_perf
  [ -x "$tool" ] || { echo "$tool not built" >&2; exit 2; }
  for s in $sizes; do
    declare -A t=()
    for a in "${algos[@]}" auto; do
      out=$(topo_run "$([ "$a" = auto ] && echo auto || echo "$coll:$a")" "$tool" -b "$s" -e "$s" -c 1 -n 5 -w 2) || exit 1
      grep -q '^# Out of bounds values : 0 OK' <<<"$out" || { echo "$coll $a $s: wrong results" >&2; status=1; }
      t[$a]=$(perf_times <<<"$out" | awk '{print $2}')
    done
    bytes=$(perf_times <<<"$out" | awk '{print $1}')
    forced="" best=""
    for a in "${algos[@]}"; do
      forced+="$a ${t[$a]}  "
      best=$(awk -v b="$best" -v x="${t[$a]}" 'BEGIN { print (b == "" || x < b) ? x : b }')
    done
    row "$coll" "$bytes" "$forced" "${t[auto]}" "$(awk -v z="${t[auto]}" -v b="$best" 'BEGIN { printf "%.2f", z / b }')"
  done
done
exit $status
