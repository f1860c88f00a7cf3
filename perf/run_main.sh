#!/bin/bash
# The main benchmark job: 4-rank all-reduce sweep with data check, under collectiverun.
#   perf/run_main.sh BUILD_DIR [extra all_reduce_perf flags]
# Fails (non-zero exit) when any output element is wrong or a library call fails.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
build=$1; shift
launcher=$build/src/launcher/collectiverun
tool=$build/perf/all_reduce_perf
for f in "$launcher" "$tool"; do
  [ -x "$f" ] || { echo "run_main.sh: $f not built (ninja -C $build)" >&2; exit 2; }
done
log=$(mktemp /tmp/run_main.XXXXXX)
trap 'rm -f "$log"' EXIT
rc=0
"$launcher" -np 4 "$tool" -b 8 -e 64M -f 4 -c 1 "$@" 2>&1 | tee "$log" || rc=$?
# The tool's exit status covers wrong values; the summary line is checked as well so that
# a launcher that loses a rank's status cannot turn a failed check into a pass.
if [ $rc != 0 ] || ! grep -qE '^(\[0\] )?# Out of bounds values : 0 OK' "$log"; then
  echo "run_main.sh: FAILED (exit status $rc)" >&2
  exit 1
fi
echo "run_main.sh: OK"
