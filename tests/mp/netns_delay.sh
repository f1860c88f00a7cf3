#!/bin/bash
# The delaying switch behind scripts/netns.sh --delay (coll-netdelay, used where the kernel
# has no netem): two namespace hosts joined by it with a 15 ms delay and tbf shaping.
#  - a TCP round trip between the hosts takes two delays (30 ms), not much more;
#  - 24 MiB sent over TCP arrive intact (segmentation offload survives the switch);
#  - cleanup stops the switch and removes its pid file.
#
#   netns_delay.sh COLL_NETDELAY_BINARY
#
# Exits 77 (meson's "skipped") when namespaces cannot be made here.
set -u

here=$(cd "$(dirname "$0")" && pwd)
NETNS_SH=${NETNS_SH:-$here/../../scripts/netns.sh}
export COLL_NETDELAY=${1:?usage: netns_delay.sh COLL_NETDELAY_BINARY}

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
"$NETNS_SH" check >/dev/null 2>&1 || skip "cannot create network namespaces or veth pairs here"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"

prefix="dl$(($$ % 100000))"
subnet=$(($$ % 200 + 25))
pidfile=/run/coll-netdelay-$prefix.pid
trap '"$NETNS_SH" cleanup --prefix "$prefix" >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM

"$NETNS_SH" create 2 --prefix "$prefix" --subnet "$subnet" --rate 1gbit --delay 15ms --switch ||
  fail "netns.sh create failed"
[ -s "$pidfile" ] || fail "no $pidfile after create"
pid=$(cat "$pidfile")
[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = coll-netdelay ] || fail "pid $pid in $pidfile is not coll-netdelay"

port=$((20000 + RANDOM % 20000))
ip netns exec "${prefix}h2" timeout 60 python3 "$here/netns_delay_peer.py" serve "10.213.$subnet.2" "$port" &
server=$!
if ! ip netns exec "${prefix}h1" timeout 60 python3 "$here/netns_delay_peer.py" probe "10.213.$subnet.2" "$port" 15; then
  kill "$server" 2>/dev/null
  fail "the probe through the switch failed"
fi
wait "$server" || fail "the server side failed"

"$NETNS_SH" cleanup --prefix "$prefix"
for _ in $(seq 40); do [ -d "/proc/$pid" ] || break; sleep 0.05; done
[ -d "/proc/$pid" ] && fail "coll-netdelay (pid $pid) still runs after cleanup"
[ -e "$pidfile" ] && fail "$pidfile left after cleanup"
echo "OK: delay, integrity and cleanup of coll-netdelay"
