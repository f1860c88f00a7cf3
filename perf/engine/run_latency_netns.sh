#!/usr/bin/env bash
# 1,000 tensors of 4 KiB between two namespaces with 0.5 ms delay each way (tc netem):
# through the engine vs 1,000 separate blocking all-reduces. Target: >= 20x.
#   usage: run_latency_netns.sh [BUILD_DIR] [extra engine_bench args]
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shift || true
source "$here/netns_lib.sh"
netns_up
if netns_qdisc netem delay 0.5ms; then
  echo "link: veth between two namespaces, netem delay 0.5 ms each way"
else
  echo "WARNING: this kernel has no netem qdisc; measuring WITHOUT the 0.5 ms delay" >&2
fi
netns_run2 "$build/perf/engine/engine_bench" small --count 1000 --bytes 4096 --iters 3 --warmup 1 "$@"
