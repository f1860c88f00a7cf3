#!/usr/bin/env bash
# All-reduce between two network-namespace hosts (one rank each, a veth pair), through
# each way libcollective can cross hosts, against Gloo's TCP all-reduce between the same
# namespaces in the same run:
#   tcp  COLL_TRANSPORT=tcp (our sockets)
#   net  COLL_NET_PLUGIN=<UCX plugin> (the net transport over UCX; UCX_NET_DEVICES=veth0)
#   gloo perf/gloo_allreduce_bench, one rank per namespace (FileStore in a shared folder)
# and prints each one's time per size with ratios (gloo time / ours: > 1 means we are
# faster). No InfiniBand here: the verbs backend cannot be measured on this machine.
#
# usage: perf/net/compare_net.sh BUILD_DIR [--rate R] [--delay D] [sweep flags, default
#        -b 8 -e 64M -f 4]    (--rate/--delay shape each host's egress, as scripts/netns.sh)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
build=$(cd "$1" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
shape=(); sweep=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate|--delay) shape+=("$1" "$2"); shift ;;
    *) sweep+=("$1") ;;
  esac
  shift
done
[ ${#sweep[@]} -gt 0 ] || sweep=(-b 8 -e 64M -f 4)
ours=$build/perf/all_reduce_perf
gloo=$build/perf/gloo_allreduce_bench
plugin=$(find "$build/plugins/net_ucx" -name 'libcoll_net_ucx.so' 2>/dev/null | head -1)
for f in "$ours" "$gloo" "$plugin"; do
  [ -n "$f" ] && [ -x "$f" -o -f "$f" ] || { echo "compare_net.sh: all_reduce_perf, gloo_allreduce_bench or the UCX plugin is not built" >&2; exit 2; }
done
source "$here/../engine/netns_lib.sh"
out=$(mktemp -d /tmp/compare_net.XXXXXX)
trap 'netns_down; rm -rf "$out"' EXIT
netns_up "${shape[@]}"
IP_B=10.213.$NETNS_SUBNET.2

# "size time" lines of a perf table.
table() { awk '!/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6 }' "$1"; }

echo "# running tcp" >&2
netns_run2 "$ours" "${sweep[@]}" >"$out/tcp.log" 2>&1
echo "# running net (UCX plugin)" >&2
netns_run2 env COLL_TRANSPORT=auto COLL_NET_PLUGIN="$plugin" UCX_NET_DEVICES=veth0 COLL_DEBUG=INFO \
  "$ours" "${sweep[@]}" >"$out/net.log" 2>&1
grep -q "transports: net" "$out/net.log" || { echo "compare_net.sh: the UCX run did not use the net transport:" >&2; grep -i "transports\|net:" "$out/net.log" >&2; exit 1; }
echo "# running gloo" >&2
mkdir "$out/store"
ip netns exec "${NETNS_PREFIX}h2" "$gloo" -np 2 --rank 1 --store "$out/store" --hostname "$IP_B" "${sweep[@]}" >"$out/gloo1.log" 2>&1 &
g1=$!
ip netns exec "${NETNS_PREFIX}h1" "$gloo" -np 2 --rank 0 --store "$out/store" --hostname "$IP_A" "${sweep[@]}" >"$out/gloo.log" 2>&1
wait $g1
for r in tcp net gloo; do
  grep -q "Out of bounds values : 0 OK" "$out/$r.log" || { echo "compare_net.sh: $r failed its check:" >&2; tail -5 "$out/$r.log" >&2; exit 1; }
  table "$out/$r.log" >"$out/$r.tsv"
done
echo "# all-reduce float sum, 2 namespace hosts x 1 rank, veth ${shape[*]:-unshaped}; sweep ${sweep[*]}"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); times in us; x = gloo time / ours"
join "$out/tcp.tsv" "$out/net.tsv" | join - "$out/gloo.tsv" | awk '
  BEGIN { printf "%12s %11s %11s %11s %8s %8s %9s\n", "size(B)", "tcp", "net(ucx)", "gloo", "tcp x", "net x", "net/tcp" }
  { printf "%12d %11.1f %11.1f %11.1f %8.2f %8.2f %9.2f\n", $1, $2, $3, $4, $4 / $2, $4 / $3, $3 / $2 }'
