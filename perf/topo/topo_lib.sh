# shellcheck shell=bash
# Two simulated hosts (network namespaces made by scripts/netns.sh) with two ranks each
# (or one, see TOPO_HOSTS), for the algorithm-selection benchmarks. Source this file;
# everything it makes is removed when the script exits.
#
#   topo_up [--rate 1gbit] [--delay 1ms]   make hosts h1, h2 joined through a bridge; each
#                                           host's egress shaped with tbf / netem
#   topo_run ALGO PROG ARGS...              ranks 0,1 on h1 and 2,3 on h2, started by hand
#                                           with the COLL_* launch contract; COLL_ALGO=ALGO
#                                           ("" or "auto": the automatic choice); rank 0's
#                                           output on stdout. TOPO_PIN="C0 C1 C2 C3" pins
#                                           rank i to CPU Ci (taskset); unset: unpinned.
#                                           TOPO_HOSTS="1 2 1 2" puts rank i on host Hi
#                                           (default "1 1 2 2"); "1 2" runs one rank per
#                                           host. Both hosts the same number of ranks.
set -euo pipefail

TOPO_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETNS_SH=${NETNS_SH:-$TOPO_HERE/../../scripts/netns.sh}
TOPO_PREFIX="tp$(($$ % 100000))"
TOPO_SUBNET=$(($$ % 200 + 30))
TOPO_TMP=$(mktemp -d /tmp/topo.XXXXXX)

topo_down() {
  "$NETNS_SH" cleanup --prefix "$TOPO_PREFIX" >/dev/null 2>&1 || true
  rm -rf "$TOPO_TMP"
}
trap topo_down EXIT
trap 'exit 130' INT TERM

topo_up() {
  [ "$(id -u)" -eq 0 ] || { echo "topo benchmarks need root (ip netns, tc)" >&2; exit 2; }
  [ -x "$NETNS_SH" ] || { echo "missing $NETNS_SH" >&2; exit 2; }
  "$NETNS_SH" create 2 --prefix "$TOPO_PREFIX" --subnet "$TOPO_SUBNET" "$@" >&2
}

topo_run() {
  local algo=$1; shift
  [ "$algo" = auto ] && algo=
  local secret port pids=() rc=0 pin=()
  [ -n "${TOPO_PIN:-}" ] && read -r -a pin <<<"$TOPO_PIN"
  secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  port=$((20000 + RANDOM % 20000))
  local hosts=(1 1 2 2) seen=(0 0 0)
  [ -n "${TOPO_HOSTS:-}" ] && read -r -a hosts <<<"$TOPO_HOSTS"
  local n=${#hosts[@]} ones twos
  ones=$(tr -cd 1 <<<"${hosts[*]}") twos=$(tr -cd 2 <<<"${hosts[*]}")
  if [ "$n" -lt 2 ] || [ "${hosts[0]}" != 1 ] || [ ${#ones} -ne ${#twos} ] || [ $((${#ones} * 2)) -ne "$n" ]; then
    echo "TOPO_HOSTS='${hosts[*]}': need as many of 1 as of 2 and nothing else, rank 0 on 1" >&2
    return 2
  fi
  local rank
  for ((rank = 0; rank < n; ++rank)); do
    local host=${hosts[$rank]} local=${seen[${hosts[$rank]}]}
    seen[host]=$((local + 1))
    ip netns exec "${TOPO_PREFIX}h$host" ${pin[$rank]:+taskset -c ${pin[$rank]}} env COLL_RANK=$rank COLL_SIZE="$n" COLL_LOCAL_RANK="$local" \
      COLL_LOCAL_SIZE=$((n / 2)) COLL_ROOT_ADDR="10.213.$TOPO_SUBNET.1:$port" COLL_JOB_SECRET="$secret" \
      COLL_HOST_ID="topo-h$host" COLL_SOCKET_IFNAME=veth0 COLL_TIMEOUT="${COLL_TIMEOUT:-120}" \
      COLL_ALGO="$algo" ${COLL_TUNE_OVERSUB_US:+COLL_TUNE_OVERSUB_US=$COLL_TUNE_OVERSUB_US} ${COLL_TOPO_LINK_BW:+COLL_TOPO_LINK_BW=$COLL_TOPO_LINK_BW} "$@" >"$TOPO_TMP/rank$rank.log" 2>&1 &
    pids+=($!)
  done
  local i
  for ((i = 0; i < n; ++i)); do
    wait "${pids[$i]}" || { rc=$?; echo "rank $i failed (exit $rc):" >&2; tail -5 "$TOPO_TMP/rank$i.log" >&2; }
  done
  cat "$TOPO_TMP/rank0.log"
  return $rc
}

# Out-of-place time (us) per size from all_reduce_perf output: "size time" lines.
perf_times() { awk '!/^#/ && NF >= 10 { print $1, $6 }'; }
