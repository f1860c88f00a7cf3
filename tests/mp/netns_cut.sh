#!/bin/bash
# A link cut under a stream of all-reduces between two "hosts" (network namespaces made by
# scripts/netns.sh, one rank each), over the network plugin NETNS_NET_PLUGIN (UCX): the
# host side of one veth goes down 2 s in. Each rank must fail its call with collTimeout
# within COLL_TIMEOUT + 1 s: closing the plugin's endpoints after the failure must not
# wait for the peer that is cut off (and the rank must exit, within 12 s: a hang check;
# its teardown may take a few seconds). Repeated NETNS_CUT_RUNS times (default 2): before
# the plugin bounded that close, the call overran by 5 s in 4 of 5 runs.
#
#   netns_cut.sh MP_FAULT       (with NETNS_NET_PLUGIN=<plugin .so>)
#
# Exits 77 when namespaces cannot be made here (not root, no ip) or no plugin is given.
set -u

here=$(cd "$(dirname "$0")" && pwd)
NETNS_SH=${NETNS_SH:-$here/../../scripts/netns.sh}
[ $# -ge 1 ] || { echo "usage: $0 MP_FAULT" >&2; exit 2; }
prog=$1
T=4            # COLL_TIMEOUT
CALL_LIMIT=5.0 # the failed call's own time: T and the 1 s the bound allows beyond it
EXIT_LIMIT=12  # from the cut to the process's exit: a hang, not a bound (teardown may take seconds)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; status=1; }

[ -n "${NETNS_NET_PLUGIN:-}" ] || skip "NETNS_NET_PLUGIN (the plugin to test) is not set"
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "the 'ip' command (iproute2) is not installed"
"$NETNS_SH" check >/dev/null 2>&1 || skip "cannot create network namespaces or veth pairs here"

prefix="cut$(($$ % 100000))"
subnet=$(($$ % 200 + 20))
tmp=$(mktemp -d)
pids=()
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  "$NETNS_SH" cleanup --prefix "$prefix" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

status=0
for run in $(seq "${NETNS_CUT_RUNS:-2}"); do
  "$NETNS_SH" create 2 --prefix "$prefix" --subnet "$subnet" >/dev/null || { fail "netns.sh create failed"; break; }
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  root="10.213.$subnet.1:$((20000 + RANDOM % 12000))"
  pids=()
  for host in 1 2; do
    rank=$((host - 1))
    # mp_fault die -1: no rank kills itself; every rank loops all-reduces until one fails.
    ip netns exec "${prefix}h$host" env COLL_RANK=$rank COLL_SIZE=2 COLL_LOCAL_RANK=0 COLL_LOCAL_SIZE=1 \
      COLL_ROOT_ADDR="$root" COLL_JOB_SECRET="$secret" COLL_JOB_ID="cut-$$-$run" COLL_HOST_ID="${prefix}h$host" \
      COLL_SOCKET_IFNAME=veth0 COLL_TRANSPORT=net COLL_NET_PLUGIN="$NETNS_NET_PLUGIN" UCX_NET_DEVICES=veth0 \
      UCX_TLS=tcp COLL_TIMEOUT=$T COLL_DEBUG=WARN "$prog" die -1 --count 262144 >"$tmp/rank$rank.log" 2>&1 &
    pids+=($!)
  done
  sleep 2
  cut=$(date +%s.%N)
  ip link set "${prefix}v1" down
  for rank in 0 1; do
    wait "${pids[$rank]}"
    rc=$?
    took=$(python3 -c "print(round($(date +%s.%N) - $cut, 2))")
    call=$(grep -o 'detected failure: collTimeout after [0-9.]* s' "$tmp/rank$rank.log" | grep -o '[0-9.]* s' | tr -d ' s')
    echo "run $run rank $rank: exit $rc, ${call:-?} s in the failed call, exited $took s after the cut"
    [ "$rc" -eq 3 ] || { fail "run $run rank $rank exited with $rc, not 3 (a detected failure)"; sed "s/^/  /" "$tmp/rank$rank.log" | head -5; }
    if [ -z "$call" ] || python3 -c "import sys; sys.exit(0 if $call <= $CALL_LIMIT else 1)"; then :; else
      fail "run $run rank $rank: the call took $call s with COLL_TIMEOUT=$T"
    fi
    python3 -c "import sys; sys.exit(0 if $took <= $EXIT_LIMIT else 1)" ||
      fail "run $run rank $rank exited $took s after the cut with COLL_TIMEOUT=$T"
  done
  pids=()
  "$NETNS_SH" cleanup --prefix "$prefix" >/dev/null 2>&1
done
[ $status -eq 0 ] && echo "OK: every rank's failed call ended within COLL_TIMEOUT + 1 s of the link cut"
exit $status
