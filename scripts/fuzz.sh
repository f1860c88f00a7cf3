#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer; the main build stays gcc) and runs each one over its seed
# corpus for FUZZ_SECONDS (default 15) seconds. The parsers under test are compiled with
# the sanitizers; the rest of the library comes from $BUILD_DIR/libcollective.a, so run
# scripts/build.sh first.
#   bash scripts/fuzz.sh              build, then fuzz every target
#   bash scripts/fuzz.sh TARGET...    only these (names as in tests/fuzz, without fuzz_)
#   FUZZ_SECONDS=0 bash scripts/fuzz.sh   build and replay the corpora only
# The mutations follow FUZZ_SEED (default 1), so a run repeats the same inputs for as long
# as it lasts; another seed explores elsewhere.
# New inputs the fuzzer finds go to $FUZZ_DIR/new/<target> (not into the tree); a crash
# leaves its input in $FUZZ_DIR/crash-<target>-*. Exit 77 when clang or libFuzzer is
# missing, 1 when a target failed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
FUZZ_DIR=${FUZZ_DIR:-$BUILD_DIR/fuzz}
SECS=${FUZZ_SECONDS:-15}
CXX=${FUZZ_CXX:-clang++}
CC=${FUZZ_CC:-clang}
if ! command -v "$CXX" >/dev/null || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    "$CXX" -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz: $CXX with libFuzzer is not available (apt-get install clang libfuzzer-14-dev); skipped"
  exit 77
fi
LIB=$BUILD_DIR/libcollective.a
[ -f "$LIB" ] || { echo "fuzz: $LIB is missing; run scripts/build.sh first"; exit 1; }
mkdir -p "$FUZZ_DIR/obj"
SAN="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
FLAGS="-g -O1 $SAN -I. -Iinclude -Isrc -I$BUILD_DIR -Iplugins/tuner -Iplugins/net -Iplugins/net_ucx"

# target: the library sources it instruments (each is linked instead of its copy in LIB)
declare -A SOURCES=(
  [unique_id]="src/bootstrap/unique_id.cpp src/bootstrap/protocol.cpp src/bootstrap/handshake.cpp"
  [bootstrap]="src/bootstrap/protocol.cpp"
  [handshake]="src/bootstrap/handshake.cpp src/bootstrap/protocol.cpp"
  [engine_wire]="src/engine/wire.cpp"
  [tcp_link]="transport/tcp/tcp_link.cpp"
  [tuner_table]=""
  [ib_wire]="transport/net/ib/ib_wire.cpp"
  [ucx_handle]="plugins/net_ucx/ucx_wire.cpp"
  [shm_segment]="transport/shm/shm_segment.cpp"
  [shm_record]="transport/shm/shm_record.cpp"
  [xml_topology]="src/topology/hwloc_load.cpp src/topology/hwloc_extract.cpp src/topology/hwloc_numa.cpp src/topology/hwloc_nvlink.cpp"
)
# Libraries a target needs beyond the library's defaults.
declare -A LIBS=([xml_topology]="-lhwloc")
# The library's own optional dependencies, when it was built with them (the IB backend).
LIBDEPS=$(pkg-config --libs libibverbs 2>/dev/null || true)
# Longest input (bytes): 4 KiB, except the topology files (the seeds in tests/data/topo
# are 20-55 KB), which also start from those.
declare -A MAXLEN=([xml_topology]=65536)
declare -A EXTRA_CORPUS=([xml_topology]=tests/data/topo)
# Most a single allocation may take (MB): these parsers read at most 4 KiB of input, and
# an allocation much larger than that is a finding (a length or count believed before
# the bytes back it). The bootstrap frames are the exception: an authenticated peer may
# announce a frame up to the per-type bound, which the reader sizes its buffer for; and
# hwloc, building a topology from a file of up to 64 KiB, takes a few MB of its own.
declare -A MALLOC_MB=([bootstrap]=256 [xml_topology]=64)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(unique_id bootstrap handshake engine_wire tcp_link tuner_table ib_wire ucx_handle shm_segment shm_record xml_topology)

obj() {  # compiles $1 once into the object folder, prints the object's path
  local o="$FUZZ_DIR/obj/$(echo "$1" | tr / _).o"
  if [ ! -f "$o" ] || [ "$1" -nt "$o" ]; then
    case "$1" in
      *.c) "$CC" -std=c11 $FLAGS -c "$1" -o "$o" ;;
      *) "$CXX" -std=c++20 $FLAGS -c "$1" -o "$o" ;;
    esac
  fi
  echo "$o"
}

failed=0
start=$SECONDS
for t in "${targets[@]}"; do
  main=tests/fuzz/fuzz_$t.cpp
  [ -f "$main" ] || main=tests/fuzz/fuzz_$t.c
  objs=("$(obj "$main")")
  for s in ${SOURCES[$t]}; do objs+=("$(obj "$s")"); done
  "$CXX" $SAN "${objs[@]}" "$LIB" ${LIBS[$t]:-} $LIBDEPS -lpthread -ldl -lrt -o "$FUZZ_DIR/fuzz_$t"
done
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s"
for t in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$t
  new=$FUZZ_DIR/new/$t
  mkdir -p "$new" "$corpus"
  log=$FUZZ_DIR/$t.log
  args=(-max_len="${MAXLEN[$t]:-4096}" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb="${MALLOC_MB[$t]:-4}"
        -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/crash-$t-" -seed="${FUZZ_SEED:-1}")
  if [ "$SECS" -gt 0 ]; then args+=(-max_total_time="$SECS"); else args+=(-runs=0); fi
  if ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
      "$FUZZ_DIR/fuzz_$t" "${args[@]}" "$new" "$corpus" ${EXTRA_CORPUS[$t]:-} >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo ?)
    echo "fuzz: $t: $runs executions, $cov coverage points, no failure"
  else
    echo "fuzz: $t FAILED (log: $log)"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -20 || true
    failed=1
  fi
done
echo "fuzz: done in $((SECONDS - start)) s"
exit $failed
