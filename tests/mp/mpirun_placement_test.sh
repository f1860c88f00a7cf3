#!/bin/bash
# Open MPI's mpirun placing the ranks, the library finding them through OMPI_COMM_WORLD_*:
#   bind   mpirun --map-by core --bind-to core:overload-allowed -np 4 (4 ranks bound round
#          robin to this machine's cores, --report-bindings must show every rank bound),
#          then --map-by socket --bind-to socket:overload-allowed; all_reduce_perf -c 1 and
#          mp_collectives --quick each time.
#   hosts  two network-namespace hosts (scripts/netns.sh), mpirun -H A:2,B:2 started in the
#          first one, reaching the second through an rsh agent that runs orted there with
#          ip netns exec; every rank must use shm within its host and tcp across
#          (COLL_DEBUG=INFO banner), all_reduce_perf and mp_collectives --quick.
# Open MPI's own shared-memory transport (vader) is left out across namespaces: they share
# /dev/shm and the host name, and vader then maps the other host's segments.
#
#   mpirun_placement_test.sh bind|hosts ALL_REDUCE_PERF MP_COLLECTIVES
#
# Exits 77 (meson's "skipped") without mpirun, or (hosts) where namespaces cannot be made.
set -u
[ $# -eq 3 ] || { echo "usage: $0 bind|hosts ALL_REDUCE_PERF MP_COLLECTIVES" >&2; exit 2; }
mode=$1
perf=$(realpath "$2")
mpc=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
NETNS_SH=${NETNS_SH:-$here/../../scripts/netns.sh}

skip() { echo "SKIP: $*"; exit 77; }
status=0
fail() { echo "FAIL: $*"; status=1; }

command -v mpirun >/dev/null 2>&1 || skip "mpirun is not installed"
tmp=$(mktemp -d)
prefix=
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
  [ -n "$prefix" ] && "$NETNS_SH" cleanup --prefix "$prefix"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mpi=(mpirun --allow-run-as-root --oversubscribe)
export COLL_TIMEOUT=${COLL_TIMEOUT:-60}

check_perf() {  # what log
  grep -q '^# Out of bounds values : 0 OK' "$2" || fail "$1: all_reduce_perf found wrong values or did not finish"
  [ "$(grep -c '^#  Rank ' "$2")" = 4 ] || fail "$1: all_reduce_perf did not run 4 ranks"
}
check_mp() {  # what log
  local r
  for r in 0 1 2 3; do grep -q "rank $r of 4: OK" "$2" || fail "$1: rank $r did not print its OK line"; done
}

if [ "$mode" = bind ]; then
  for placement in "--map-by core --bind-to core:overload-allowed" "--map-by socket --bind-to socket:overload-allowed"; do
    # shellcheck disable=SC2206  # the placement flags are words by design
    how=($placement)
    echo "== mpirun -np 4 $placement"
    timeout 120 "${mpi[@]}" "${how[@]}" --report-bindings -np 4 "$perf" -b 8 -e 256K -f 8 -n 3 -w 1 -c 1 \
      >"$tmp/perf.log" 2>&1 || fail "$placement: all_reduce_perf exited with $?"
    grep -E 'bound|^#  Rank|Out of bounds' "$tmp/perf.log"
    # Bound to a core each; bound to a socket (on a one-socket machine: all CPUs, which
    # Open MPI reports as "not bound (or bound to all available processors)").
    want='MCW rank [0-3] bound to socket 0\[core'
    [ "${how[3]}" = core:overload-allowed ] || want='MCW rank [0-3] (bound to|is not bound \(or bound to all)'
    [ "$(grep -cE "$want" "$tmp/perf.log")" = 4 ] || fail "$placement: mpirun did not report 4 ranks placed as asked"
    check_perf "$placement" "$tmp/perf.log"
    timeout 150 "${mpi[@]}" "${how[@]}" -np 4 "$mpc" --quick >"$tmp/mp.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { tail -n 20 "$tmp/mp.log"; fail "$placement: mp_collectives exited with $rc"; }
    grep 'OK' "$tmp/mp.log"
    check_mp "$placement" "$tmp/mp.log"
  done
  [ $status -eq 0 ] && echo "summary: mpirun --map-by core --bind-to core and --map-by socket --bind-to socket (overload allowed), 4 ranks bound, all checks passed"
  exit $status
fi

[ "$mode" = hosts ] || { echo "unknown mode '$mode'" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "the 'ip' command (iproute2) is not installed"
"$NETNS_SH" check >/dev/null 2>&1 || skip "cannot create network namespaces or veth pairs here"
prefix="mh$(($$ % 100000))"
subnet=$(($$ % 200 + 20))
"$NETNS_SH" create 2 --prefix "$prefix" --subnet "$subnet" || { prefix=; fail "netns.sh create failed"; exit 1; }
a=10.213.$subnet.1
b=10.213.$subnet.2

# mpirun's remote shell: "agent HOST command..." runs the command (orted) in that host's
# namespace instead of over ssh.
cat >"$tmp/agent" <<EOF
#!/bin/sh
host=\$1
shift
case "\$host" in
  $a) ns=${prefix}h1 ;;
  $b) ns=${prefix}h2 ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
# Each namespace is a host of its own for the library (they share the host name).
cat >"$tmp/rank.sh" <<'EOF'
#!/bin/sh
COLL_HOST_ID=$(ip -4 -o addr show dev veth0 | awk '{print $4}' | cut -d/ -f1)
export COLL_HOST_ID
exec "$@"
EOF
chmod +x "$tmp/agent" "$tmp/rank.sh"
hosts=("${mpi[@]}" --bind-to none -H "$a:2,$b:2" -np 4 --mca plm_rsh_agent "$tmp/agent"
       --mca oob_tcp_if_include veth0 --mca btl_tcp_if_include veth0 --mca btl self,tcp
       -x COLL_SOCKET_IFNAME=veth0 -x COLL_DEBUG=INFO -x COLL_TIMEOUT -x PATH)
echo "== mpirun -H $a:2,$b:2 (network namespaces ${prefix}h1, ${prefix}h2)"
timeout 120 ip netns exec "${prefix}h1" "${hosts[@]}" "$tmp/rank.sh" "$perf" -b 8 -e 1M -f 8 -n 3 -w 1 -c 1 \
  >"$tmp/perf.log" 2>&1 || fail "-H: all_reduce_perf exited with $?"
grep -v '\[coll INFO\]   ' "$tmp/perf.log" | grep -E 'transports|^#  Rank|Out of bounds|rror'
[ "$(grep -c 'transports: shm,tcp' "$tmp/perf.log")" = 4 ] || fail "-H: not every rank used shm within its host and tcp across"
check_perf "-H" "$tmp/perf.log"
timeout 150 ip netns exec "${prefix}h1" "${hosts[@]}" "$tmp/rank.sh" "$mpc" --quick >"$tmp/mp.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 20 "$tmp/mp.log"; fail "-H: mp_collectives exited with $rc"; }
grep 'OK' "$tmp/mp.log"
check_mp "-H" "$tmp/mp.log"
[ $status -eq 0 ] && echo "summary: mpirun -H over two network-namespace hosts, shm within and tcp across, all checks passed"
exit $status
