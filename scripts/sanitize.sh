#!/usr/bin/env bash
# Build libcollective with a sanitizer and run the test suites under it.
#
#   scripts/sanitize.sh address|thread [meson test arguments...]
#
# address: AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer) in build-asan;
# thread: ThreadSanitizer in build-tsan. Every suite by default. Any report fails the test
# that made it. CUDA is left out of these builds (the stream executor's CPU-side logic is
# still built and run). Not part of CI: a build takes 5-15 minutes on 2 cores, a run 4
# (address) to 15 (thread).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: sanitize.sh address|thread [meson test arguments...]}
shift
case "$kind" in
  address) dir=build-asan sanitize=address,undefined ;;
  thread) dir=build-tsan sanitize=thread ;;
  *) echo "sanitize.sh: address or thread, not '$kind'" >&2; exit 2 ;;
esac
bash scripts/install-deps.sh
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --buildtype=debugoptimized -Db_sanitize="$sanitize" -Db_lundef=false -Dcuda=disabled
fi
ninja -C "$dir" -j"$(nproc)"
supp=$PWD/tests/sanitize
# hwloc's PCI component leaks inside libpciaccess and is unloaded before the leak check,
# so no suppression can name it; live discovery goes without it here (the PCI code paths
# are covered by the XML topologies, which do not use it).
export HWLOC_COMPONENTS=-pci
# UCX's memory-event hooks (it patches mmap/munmap to keep its registration cache right)
# and ThreadSanitizer's interceptors crash each other at the UCX plugin's first init; the
# tests register no memory with UCX, so they run without the hooks.
export UCX_MEM_EVENTS=no
# The address-space test (ulimit -v) cannot start a sanitizer runtime: it skips itself.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0
export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=suppressions=$supp/tsan.supp:halt_on_error=0:exitcode=66
run() { meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 1 --timeout-multiplier 4 "$@"; }
# Every test but the python suite: a sanitizer runtime must be loaded first, so it cannot
# come into /usr/bin/python3 with the library through ctypes ("cannot allocate memory in
# static TLS block"). The C interface those tests drive is covered by hvd-c-api-*.
mapfile -t all < <(meson test -C "$dir" --no-rebuild --list 2>/dev/null | sed -n 's/^[^ ]* \/ //p' | grep -v '^python-')
if [ "$kind" = address ] && [ $# -eq 0 ]; then
  # Open MPI's components keep memory to the end and are unloaded before the leak check,
  # so no suppression can name them: the mpirun test goes without the leak check.
  rest=()
  for t in "${all[@]}"; do [ "$t" = collectives-mpirun-np3 ] || rest+=("$t"); done
  rc=0
  run "${rest[@]}" || rc=$?
  ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} run collectives-mpirun-np3 || rc=$?
  exit $rc
fi
if [ "$kind" = thread ] && [ $# -eq 0 ]; then
  # In-process ranks pick shared memory; the collective tests run once more over TCP.
  rc=0
  run "${all[@]}" || rc=$?
  COLL_TRANSPORT=tcp run collectives-matrix collectives-errors collectives-api collectives-failures \
    collectives-wait || rc=$?
  exit $rc
fi
run "$@"
