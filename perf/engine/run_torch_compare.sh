#!/usr/bin/env bash
# Ours vs PyTorch 1.13 + gloo on the ResNet-50 gradient set, 2 ranks on this host.
# Target: PyTorch's time (best of its two strategies) >= 2x the engine's. Gloo talks TCP,
# so the engine is shown on tcp (like for like) and on shm (its default on one host).
#   usage: run_torch_compare.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
iters=${ITERS:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

port=$((20000 + RANDOM % 20000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
    /usr/bin/python3 "$here/torch_resnet_bench.py" --iters "$iters" >> "$out" 2>&1 &
done
wait
grep RESULT "$out" || { cat "$out"; exit 1; }
torch_ms=$(awk '/RESULT torch_/ {print $3}' "$out" | sort -g | head -1)

for t in tcp shm; do
  line=$("$build/src/launcher/collectiverun" -np 2 --no-tag-output -x COLL_TRANSPORT=$t \
         "$build/perf/engine/engine_bench" resnet --no-raw --iters "$iters" | grep "RESULT resnet_engine_ms")
  ours=$(echo "$line" | awk '{print $3}')
  awk -v t="$t" -v p="$torch_ms" -v o="$ours" \
    'BEGIN { printf "RESULT torch_over_engine_%s %.2f (pytorch best %.1f ms, engine %.1f ms; target >= 2)\n", t, p / o, p, o }'
done
