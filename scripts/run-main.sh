#!/usr/bin/env bash
# The main job: install what is missing, build, then run a 4-rank all-reduce benchmark
# on this host with every result checked (exits non-zero on a wrong value).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR/src/launcher/collectiverun" -np "${NP:-4}" \
  "$BUILD_DIR/perf/all_reduce_perf" -b 8 -e 64M -f 4 -c 1
