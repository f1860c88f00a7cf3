#!/usr/bin/env bash
# Install what is missing, build, and run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
rc=0
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 1 "$@" || rc=$?
# One plain closing line for CI, counted from meson's own log.
python3 - "$BUILD_DIR/meson-logs/testlog.json" <<'PY' || true
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0}
for line in open(sys.argv[1]):
    r = json.loads(line).get("result", "")
    counts[r] = counts.get(r, 0) + 1
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"]
print(f"{counts['OK']} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit $rc
