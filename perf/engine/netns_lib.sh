# shellcheck shell=bash
# Two network namespaces joined by a veth pair, one rank in each, for the engine
# benchmarks. Source this file; it removes everything it made when the script exits.
#
#   netns_up                  make the namespaces, the veth pair and the addresses
#   netns_qdisc SPEC...       the same root qdisc on both ends (e.g. "netem delay 0.5ms")
#   netns_run2 PROG ARGS...   rank 0 in A, rank 1 in B, with the COLL_* launch contract
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then echo "netns benchmarks need root (ip netns, tc)" >&2; exit 2; fi

NS_A="collbenchA$$"
NS_B="collbenchB$$"
VETH_A="cba$$"
VETH_B="cbb$$"
IP_A=10.231.0.1
IP_B=10.231.0.2

netns_down() {
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
}
trap netns_down EXIT INT TERM

netns_up() {
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$VETH_A" type veth peer name "$VETH_B"
  ip link set "$VETH_A" netns "$NS_A"
  ip link set "$VETH_B" netns "$NS_B"
  ip -n "$NS_A" addr add "$IP_A/24" dev "$VETH_A"
  ip -n "$NS_B" addr add "$IP_B/24" dev "$VETH_B"
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$VETH_A" up
  ip -n "$NS_B" link set "$VETH_B" up
}

# Egress shaping on both ends, so both directions see the same link.
netns_qdisc() {
  if ! ip netns exec "$NS_A" tc qdisc add dev "$VETH_A" root "$@" 2>/tmp/netns_qdisc_err.$$; then
    echo "tc qdisc add ... $* failed: $(cat /tmp/netns_qdisc_err.$$)" >&2
    rm -f /tmp/netns_qdisc_err.$$
    return 1
  fi
  ip netns exec "$NS_B" tc qdisc add dev "$VETH_B" root "$@"
  rm -f /tmp/netns_qdisc_err.$$
}

# Starts both ranks by hand (no launcher: each namespace only sees the veth link).
netns_run2() {
  local secret port
  secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
  port=$((20000 + RANDOM % 20000))
  local common=(COLL_SIZE=2 COLL_LOCAL_RANK=0 COLL_LOCAL_SIZE=1 "COLL_ROOT_ADDR=$IP_A:$port"
                "COLL_JOB_SECRET=$secret" COLL_TRANSPORT=tcp)
  ip netns exec "$NS_A" env "${common[@]}" COLL_RANK=0 COLL_HOST_ID=benchA "$@" &
  local p0=$!
  ip netns exec "$NS_B" env "${common[@]}" COLL_RANK=1 COLL_HOST_ID=benchB "$@" > /tmp/netns_rank1.$$ 2>&1 &
  local p1=$!
  local rc=0
  wait "$p0" || rc=$?
  wait "$p1" || { rc=$?; echo "rank 1 failed:" >&2; cat /tmp/netns_rank1.$$ >&2; }
  rm -f /tmp/netns_rank1.$$
  return $rc
}
