#!/bin/bash
# Two "hosts" (network namespaces made by scripts/netns.sh) with two ranks each, started
# by hand with the documented environment. COLL_TRANSPORT=auto must pick shared memory
# between the two ranks of a host and TCP over the veth between hosts; every rank runs
# the quick collective checks (all-reduce results included) and prints the transports it
# used (COLL_DEBUG=INFO banner), which must be "shm,tcp".
# With NETNS_NET_PLUGIN=<network plugin .so> set, the ranks load that plugin
# (COLL_NET_PLUGIN) and the hosts must meet through it instead: "shm,net". For the UCX
# plugin, UCX_NET_DEVICES=veth0 keeps UCX off the loopback, which every namespace has.
# With NETNS_ALGO set, every rank runs with COLL_ALGO=$NETNS_ALGO, so that the forced
# algorithms, not only the automatic choice, are checked over the veth pair.
#
#   netns_allreduce.sh PROG [ARGS...]     e.g. netns_allreduce.sh build/tests/mp/mp_collectives --quick
#
# Exits 77 (meson's "skipped") when namespaces cannot be made here (not root, no ip).
# Everything it makes is removed on exit, also on failure or interruption.
set -u

here=$(cd "$(dirname "$0")" && pwd)
NETNS_SH=${NETNS_SH:-$here/../../scripts/netns.sh}
[ $# -ge 1 ] || { echo "usage: $0 PROG [ARGS...]" >&2; exit 2; }

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "the 'ip' command (iproute2) is not installed"
"$NETNS_SH" check >/dev/null 2>&1 || skip "cannot create network namespaces or veth pairs here ($("$NETNS_SH" check 2>&1))"

# A prefix of our own, so that a concurrent user of netns.sh (a benchmark) is untouched.
prefix="mp$(($$ % 100000))"
subnet=$(($$ % 200 + 20))
tmp=$(mktemp -d)
pids=()
watchdog=
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  # ip netns exec and env exec the program, so these are the ranks themselves.
  for p in "${pids[@]}" $watchdog; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$NETNS_SH" cleanup --prefix "$prefix"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$NETNS_SH" create 2 --prefix "$prefix" --subnet "$subnet" --rate 1gbit || fail "netns.sh create failed"

across=tcp
plugin_env=()
[ -n "${NETNS_ALGO:-}" ] && plugin_env+=(COLL_ALGO="$NETNS_ALGO")
if [ -n "${NETNS_NET_PLUGIN:-}" ]; then
  across=net
  plugin_env+=(COLL_NET_PLUGIN="$NETNS_NET_PLUGIN" UCX_NET_DEVICES=veth0)
fi

secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
root="10.213.$subnet.1:$((20000 + RANDOM % 12000))"
echo "hosts ${prefix}h1 ${prefix}h2 (10.213.$subnet.1-2 on veth0, 1 Gbit/s), COLL_ROOT_ADDR=$root"

# Bytes host 2 sent on its veth: TCP between the hosts must really take that path.
tx_bytes() { ip -n "${prefix}h2" -s -j link show dev veth0 | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }
tx_before=$(tx_bytes)
start=$(date +%s.%N)
for host in 1 2; do
  for local in 0 1; do
    rank=$(((host - 1) * 2 + local))
    ip netns exec "${prefix}h$host" env COLL_RANK=$rank COLL_SIZE=4 \
      COLL_LOCAL_RANK=$local COLL_LOCAL_SIZE=2 COLL_ROOT_ADDR="$root" \
      COLL_JOB_SECRET="$secret" COLL_JOB_ID="netns-$$" COLL_HOST_ID="${prefix}h$host" \
      COLL_SOCKET_IFNAME=veth0 COLL_TRANSPORT=auto COLL_DEBUG=INFO COLL_TIMEOUT=30 \
      "${plugin_env[@]}" "$@" >"$tmp/rank$rank.log" 2>&1 &
    pids+=($!)
  done
done
# Ranks fail by themselves within COLL_TIMEOUT; this is for a rank that hangs anyway.
# (Short sleeps: a killed watchdog must not leave a long sleep behind.)
(for _ in $(seq 120); do sleep 1; done
 echo "FAIL: the job did not finish within 120 s"; kill -9 "${pids[@]}" 2>/dev/null) &
watchdog=$!

status=0
for rank in 0 1 2 3; do
  wait "${pids[$rank]}"
  rc=$?
  # The INFO banner is kept; the list of every tunable that follows it is not.
  grep -v '\[coll INFO\]   ' "$tmp/rank$rank.log" | sed "s/^/[$rank] /"
  if [ $rc -ne 0 ]; then
    echo "FAIL: rank $rank exited with $rc"; status=1
  elif ! grep -q "rank $rank of 4: OK" "$tmp/rank$rank.log"; then
    echo "FAIL: rank $rank did not print its OK line"; status=1
  fi
  if ! grep -q "transports: shm,$across" "$tmp/rank$rank.log"; then
    echo "FAIL: rank $rank did not use shm within its host and $across across hosts"; status=1
  fi
done
pids=()
kill "$watchdog" 2>/dev/null
tx=$(( $(tx_bytes) - tx_before ))
if [ "$tx" -lt 100000 ]; then
  echo "FAIL: host 2 sent only $tx bytes on its veth0: the hosts did not talk over the veths"; status=1
fi
elapsed=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
[ $status -eq 0 ] && echo "summary: 2 hosts x 2 ranks${NETNS_ALGO:+, COLL_ALGO=$NETNS_ALGO}, transports shm,$across on every rank, $tx bytes sent by host 2 on its veth0, all checks passed in ${elapsed} s"
exit $status
