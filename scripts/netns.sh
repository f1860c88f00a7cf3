#!/bin/sh
# Network-namespace "hosts" on one machine, for multi-host tests and benchmarks.
#
#   scripts/netns.sh create N [--prefix P] [--subnet X] [--rate RATE] [--burst SIZE] [--delay TIME] [--switch]
#   scripts/netns.sh cleanup [--prefix P]
#   scripts/netns.sh list    [--prefix P]
#   scripts/netns.sh addr I  [--subnet X]      prints host I's address (10.213.X.I)
#   scripts/netns.sh check                     exit 0 if namespaces can be made here
#
# create makes namespaces Ph1..PhN (P defaults to "coll"), each with lo and one interface
# "veth0" whose other end is attached to a bridge Pbr in the root namespace. Host I gets
# 10.213.X.I/24 on its veth0 (X defaults to 0); nothing else gets an address, so the
# hosts can only reach each other and the root namespace's routing is untouched.
#   --rate RATE   each host's egress is shaped with tbf (e.g. 1gbit, 100mbit)
#   --burst SIZE  tbf burst (default 256kb)
#   --delay TIME  each host's egress is delayed with netem (e.g. 1ms). On a kernel without
#                 sch_netem the hosts are joined by coll-netdelay instead of the bridge: a
#                 user-space switch that holds every frame for TIME (found as $COLL_NETDELAY,
#                 build/src/tools/coll-netdelay or coll-netdelay on PATH); cleanup stops it.
#   --switch      use coll-netdelay for --delay even where netem works
# A failed create removes what it made. cleanup removes every namespace Ph<digits>, the
# bridge and any leftover Pv* links; it is safe to run any number of times.
#
# Run a rank on host 2:  ip netns exec collh2 env COLL_SOCKET_IFNAME=veth0 ... ./prog
# Namespaces share the kernel (and /dev/shm): give each host its own COLL_HOST_ID so the
# library treats them as different machines (doc/launch.md).
set -eu

PREFIX=coll
SUBNET=0
RATE=
BURST=256kb
DELAY=
SWITCHED=0   # 1: hosts joined by coll-netdelay instead of the bridge
FORCE_SWITCH=0

die() { echo "netns.sh: $*" >&2; exit 1; }

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

parse_opts() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --prefix) PREFIX=${2:?--prefix needs a value}; shift 2 ;;
      --subnet) SUBNET=${2:?--subnet needs a value}; shift 2 ;;
      --rate) RATE=${2:?--rate needs a value}; shift 2 ;;
      --burst) BURST=${2:?--burst needs a value}; shift 2 ;;
      --delay) DELAY=${2:?--delay needs a value}; shift 2 ;;
      --switch) FORCE_SWITCH=1; shift ;;
      *) echo "netns.sh: unknown option '$1'" >&2; usage ;;
    esac
  done
  # Interface names are at most 15 characters: P + "br"/"v<N>" must fit.
  case "$PREFIX" in
    ''|*[!A-Za-z0-9_-]*) die "--prefix '$PREFIX' must be letters, digits, _ or -" ;;
  esac
  [ ${#PREFIX} -le 8 ] || die "--prefix '$PREFIX' is longer than 8 characters"
  case "$SUBNET" in
    ''|*[!0-9]*) die "--subnet '$SUBNET' must be a number 0-255" ;;
  esac
  [ "$SUBNET" -le 255 ] || die "--subnet '$SUBNET' must be a number 0-255"
}

need_tools() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces need CAP_NET_ADMIN)"
  command -v ip >/dev/null 2>&1 || die "the 'ip' command (iproute2) is not installed"
  if [ -n "$RATE$DELAY" ]; then
    command -v tc >/dev/null 2>&1 || die "the 'tc' command (iproute2) is needed for --rate/--delay"
  fi
}

pidfile() { echo "/run/coll-netdelay-$PREFIX.pid"; }

delay_tool() {
  for c in "${COLL_NETDELAY:-}" "$(dirname "$0")/../build/src/tools/coll-netdelay" \
           "$(command -v coll-netdelay 2>/dev/null || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}

# Whether this kernel can delay packets with netem (tried on our own bridge).
netem_works() {
  tc qdisc add dev "${PREFIX}br" root netem delay 1ms 2>/dev/null || return 1
  tc qdisc del dev "${PREFIX}br" root 2>/dev/null || true
}

# Egress shaping on host $1's veth0: netem for delay, tbf for rate, netem over tbf for both.
# With the user-space switch the delay is the switch's, and only tbf stays here.
shape() {
  ns=$1
  if [ "$SWITCHED" -eq 1 ]; then
    [ -z "$RATE" ] || ip netns exec "$ns" tc qdisc add dev veth0 root tbf rate "$RATE" burst "$BURST" latency 50ms
  elif [ -n "$DELAY" ] && [ -n "$RATE" ]; then
    ip netns exec "$ns" tc qdisc add dev veth0 root handle 1: netem delay "$DELAY" &&
      ip netns exec "$ns" tc qdisc add dev veth0 parent 1:1 handle 10: tbf rate "$RATE" burst "$BURST" latency 50ms
  elif [ -n "$DELAY" ]; then
    ip netns exec "$ns" tc qdisc add dev veth0 root netem delay "$DELAY"
  elif [ -n "$RATE" ]; then
    ip netns exec "$ns" tc qdisc add dev veth0 root tbf rate "$RATE" burst "$BURST" latency 50ms
  fi
}

create() {
  n=$1
  case "$n" in ''|*[!0-9]*) die "create: N must be a number, got '$n'" ;; esac
  if [ "$n" -lt 1 ] || [ "$n" -gt 250 ]; then die "create: N must be 1..250, got $n"; fi
  ip link show "${PREFIX}br" >/dev/null 2>&1 && die "bridge ${PREFIX}br exists: run 'netns.sh cleanup --prefix $PREFIX' first"
  # From here on a failure removes everything made so far.
  # shellcheck disable=SC2154  # rc is assigned inside the trap
  trap 'rc=$?; if [ $rc -ne 0 ]; then echo "netns.sh: create failed, cleaning up" >&2; cleanup; fi' EXIT
  [ -e "$(pidfile)" ] && die "$(pidfile) exists: run 'netns.sh cleanup --prefix $PREFIX' first"
  ip link add "${PREFIX}br" type bridge
  ip link set "${PREFIX}br" up
  if [ -n "$DELAY" ] && { [ "$FORCE_SWITCH" -eq 1 ] || ! netem_works; }; then
    tool=$(delay_tool) || die "this kernel has no netem qdisc and coll-netdelay was not found (build it, or set COLL_NETDELAY)"
    SWITCHED=1
    ip link del "${PREFIX}br"
  fi
  ports=
  i=1
  while [ "$i" -le "$n" ]; do
    ns="${PREFIX}h$i"
    ip netns add "$ns"
    ip link add "${PREFIX}v$i" type veth peer name "${PREFIX}p$i"
    if [ "$SWITCHED" -eq 1 ]; then
      ip link set "${PREFIX}v$i" up
      ports="$ports ${PREFIX}v$i"
    else
      ip link set "${PREFIX}v$i" master "${PREFIX}br" up
    fi
    ip link set "${PREFIX}p$i" netns "$ns"
    ip -n "$ns" link set "${PREFIX}p$i" name veth0
    ip -n "$ns" addr add "10.213.$SUBNET.$i/24" dev veth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set veth0 up
    shape "$ns" || die "could not shape $ns's veth0 (rate='$RATE' delay='$DELAY'; is sch_tbf/sch_netem available?)"
    i=$((i + 1))
  done
  joined="bridge ${PREFIX}br"
  if [ "$SWITCHED" -eq 1 ]; then
    # shellcheck disable=SC2086  # one argument per port
    setsid "$tool" --delay "$DELAY" --pidfile "$(pidfile)" $ports </dev/null >/dev/null 2>&1 &
    w=0
    while [ ! -s "$(pidfile)" ]; do
      w=$((w + 1))
      [ "$w" -le 100 ] || die "coll-netdelay did not start"
      sleep 0.05
    done
    joined="coll-netdelay"
    [ "$FORCE_SWITCH" -eq 1 ] || joined="coll-netdelay (no netem in this kernel)"
  fi
  trap - EXIT
  echo "netns.sh: made $n hosts ${PREFIX}h1..${PREFIX}h$n on $joined, 10.213.$SUBNET.1-$n/24 on veth0${RATE:+, rate $RATE}${DELAY:+, delay $DELAY}"
}

hosts() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}h[0-9]+\$" || true
}

cleanup() {
  if [ -s "$(pidfile)" ]; then
    pid=$(cat "$(pidfile)")
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = coll-netdelay ]; then kill "$pid" 2>/dev/null || true; fi
    w=0
    while [ -e "$(pidfile)" ] && [ "$w" -lt 40 ]; do w=$((w + 1)); sleep 0.05; done
    rm -f "$(pidfile)"
  fi
  for ns in $(hosts); do
    ip netns del "$ns" 2>/dev/null || echo "netns.sh: could not delete namespace $ns" >&2
  done
  # Deleting a namespace deletes its veth end and with it the pair; these are leftovers
  # of a create that failed between making a pair and moving it.
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
                grep -E "^${PREFIX}[vp][0-9]+\$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  if ip link show "${PREFIX}br" >/dev/null 2>&1; then
    ip link del "${PREFIX}br" || echo "netns.sh: could not delete bridge ${PREFIX}br" >&2
  fi
}

list() {
  for ns in $(hosts); do
    echo "$ns $(ip -n "$ns" -4 -o addr show dev veth0 2>/dev/null | awk '{print $4}')"
  done
}

# Makes and removes a probe namespace: tells a test whether to skip.
check() {
  need_tools
  probe="cpr$$"
  ip netns add "$probe" 2>/dev/null || die "cannot create network namespaces here"
  ok=0
  ip link add "${probe}a" type veth peer name "${probe}b" 2>/dev/null && ok=1
  ip link del "${probe}a" 2>/dev/null || true
  ip netns del "$probe"
  [ "$ok" -eq 1 ] || die "cannot create veth pairs here"
  echo "netns.sh: network namespaces and veth pairs work"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  create)
    [ $# -ge 1 ] || usage
    n=$1
    shift
    parse_opts "$@"
    need_tools
    create "$n"
    ;;
  cleanup) parse_opts "$@"; need_tools; cleanup ;;
  list) parse_opts "$@"; list ;;
  addr)
    [ $# -ge 1 ] || usage
    i=$1
    shift
    parse_opts "$@"
    echo "10.213.$SUBNET.$i"
    ;;
  check) check ;;
  -h|--help|help) usage ;;
  *) echo "netns.sh: unknown command '$cmd'" >&2; usage ;;
esac
