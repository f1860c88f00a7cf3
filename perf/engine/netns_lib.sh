# shellcheck shell=bash
# Two network-namespace hosts (scripts/netns.sh), one rank in each, for the engine
# benchmarks. Source this file; it removes everything it made when the script exits.
#
#   netns_up [--rate R] [--delay D]   make the hosts; each host's egress shaped with tbf
#                                     (rate) and delayed (netem, or coll-netdelay where the
#                                     kernel has no netem); prints how the link was made
#   netns_run2 PROG ARGS...           rank 0 on host 1, rank 1 on host 2, with the COLL_*
#                                     launch contract
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "netns benchmarks need root (ip netns, tc)" >&2; exit 2; fi

NETNS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETNS_SH=${NETNS_SH:-$NETNS_HERE/../../scripts/netns.sh}
NETNS_PREFIX="cb$(($$ % 100000))"
NETNS_SUBNET=$(($$ % 200 + 30))
IP_A=10.213.$NETNS_SUBNET.1

netns_down() { "$NETNS_SH" cleanup --prefix "$NETNS_PREFIX" >/dev/null 2>&1 || true; }
trap netns_down EXIT
trap 'exit 130' INT TERM

netns_up() {
  "$NETNS_SH" create 2 --prefix "$NETNS_PREFIX" --subnet "$NETNS_SUBNET" "$@"
}

# Starts both ranks by hand (no launcher: each namespace only sees its own interface).
netns_run2() {
  local secret port
  secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  port=$((20000 + RANDOM % 20000))
  local common=(COLL_SIZE=2 COLL_LOCAL_RANK=0 COLL_LOCAL_SIZE=1 "COLL_ROOT_ADDR=$IP_A:$port"
                "COLL_JOB_SECRET=$secret" COLL_TRANSPORT=tcp COLL_SOCKET_IFNAME=veth0)
  ip netns exec "${NETNS_PREFIX}h1" env "${common[@]}" COLL_RANK=0 COLL_HOST_ID=benchA "$@" &
  local p0=$!
  ip netns exec "${NETNS_PREFIX}h2" env "${common[@]}" COLL_RANK=1 COLL_HOST_ID=benchB "$@" > /tmp/netns_rank1.$$ 2>&1 &
  local p1=$!
  local rc=0
  wait "$p0" || rc=$?
  wait "$p1" || { rc=$?; echo "rank 1 failed:" >&2; cat /tmp/netns_rank1.$$ >&2; }
  rm -f /tmp/netns_rank1.$$
  return $rc
}
