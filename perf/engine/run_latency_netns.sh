#!/usr/bin/env bash
# 1,000 tensors of 4 KiB between two namespaces with 0.5 ms delay each way (tc netem, or
# the coll-netdelay switch where the kernel has no netem):
# through the engine vs 1,000 separate blocking all-reduces. Target: >= 20x.
#   usage: run_latency_netns.sh [BUILD_DIR] [extra engine_bench args]
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shift || true
source "$here/netns_lib.sh"
COLL_NETDELAY=${COLL_NETDELAY:-$build/src/tools/coll-netdelay} netns_up --delay 0.5ms
netns_run2 "$build/perf/engine/engine_bench" small --count 1000 --bytes 4096 --iters 3 --warmup 1 "$@"
