#!/bin/bash
# Runs a benchmark next to processes that compute and never yield, as a training job's data
# loaders or a build do, so that the library's waits are measured on a loaded machine.
#
# usage: perf/under_load.sh [--hogs N] COMMAND [ARGS...]
#   --hogs N  busy processes to start (default: one per CPU, from nproc)
# The busy processes run for as long as COMMAND does and are stopped when it ends (or is
# interrupted); the exit status is COMMAND's. Example, our all-reduce against Open MPI's
# and Gloo's on a loaded machine, then with yielding always on (the old waits):
#   perf/under_load.sh perf/compare_allreduce.sh build -b 8 -e 64K -f 8 -n 5000 -w 200
#   COLL_WAIT_LATE_YIELD_US=0 perf/under_load.sh perf/compare_allreduce.sh build ...
set -uo pipefail
hogs=$(nproc)
if [ "${1:-}" = --hogs ]; then
  hogs=${2:?--hogs needs a number}
  shift 2
fi
case "$hogs" in ''|*[!0-9]*) echo "under_load.sh: --hogs wants a whole number, got '$hogs'" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap 'stop; exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
  # Their output goes nowhere, so that nothing waits on them for the end of COMMAND's.
  ( trap - INT TERM; while :; do :; done ) </dev/null >/dev/null 2>&1 &
  pids+=($!)
done
echo "# under_load.sh: $hogs busy processes next to: $*"
"$@"
rc=$?
stop
exit $rc
