#!/usr/bin/env bash
# The ResNet-50 gradient set (161 tensors) through the engine vs one raw all-reduce of a
# single 102 MB buffer, 2 ranks, shm and tcp. Target: engine / raw <= 1.15.
#   usage: run_resnet.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
for t in shm tcp; do
  echo "== COLL_TRANSPORT=$t"
  "$build/src/launcher/collectiverun" -np 2 --no-tag-output -x COLL_TRANSPORT=$t \
    "$build/perf/engine/engine_bench" resnet --iters "${ITERS:-7}" --warmup 1 | sed "s/^RESULT resnet_engine_over_raw/RESULT resnet_engine_over_raw_$t/"
done
