#!/usr/bin/env bash
# Compression over a 1 Gbit/s link (tc tbf) between two namespaces, one rank each:
# the whole ResNet-50 gradient set, uncompressed float32 vs fp16, int8 and top-k 1%
# (compression time included). Targets: fp16 >= 1.8x, int8 >= 3x, top-k >= 10x.
#   usage: run_compression_netns.sh [BUILD_DIR] [extra engine_bench args]
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shift || true
source "$here/netns_lib.sh"
# netns.sh's tbf burst (256kb) covers a 64 KiB GSO packet plus 1 ms worth of tokens.
netns_up --rate 1gbit
netns_run2 "$build/perf/engine/engine_bench" resnet --no-raw --iters 3 --warmup 1 \
  --compression fp16,int8,topk --density 0.01 "$@"
