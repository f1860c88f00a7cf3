#!/usr/bin/env bash
# Every engine benchmark, then the RESULT lines together. Needs root for the namespace
# runs. CPU-bound: run it on an otherwise idle machine.
#   usage: run_all.sh [BUILD_DIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
log=$(mktemp)
for s in run_resnet.sh run_torch_compare.sh run_latency_netns.sh run_compression_netns.sh; do
  echo "==== $s" | tee -a "$log"
  "$here/$s" "$build" 2>&1 | tee -a "$log"
done
echo "==== summary"
grep '^RESULT' "$log"
rm -f "$log"
