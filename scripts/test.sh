#!/usr/bin/env bash
# Install what is missing, build, and run every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
rc=0
meson test -C "$BUILD_DIR" --print-errorlogs --num-processes 1 "$@" || rc=$?
# The fuzzers (tests/fuzz, clang with ASan+UBSan): each target for FUZZ_SECONDS over its
# corpus in the tree; 11 targets at 15 s fuzz for 2 min 45 s, plus their build. Only on a
# whole run (no test names given); exit 77 means clang or libFuzzer is missing.
if [ $# -eq 0 ] && [ "${FUZZ_SECONDS:-15}" != skip ]; then
  frc=0
  FUZZ_SECONDS=${FUZZ_SECONDS:-15} bash scripts/fuzz.sh || frc=$?
  if [ $frc -eq 77 ]; then echo "fuzz: skipped"; elif [ $frc -ne 0 ]; then rc=$frc; fi
fi
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
