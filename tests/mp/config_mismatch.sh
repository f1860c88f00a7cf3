#!/usr/bin/env bash
# A job whose ranks set a job-wide tunable differently must fail as it forms, with a
# message that names the tunable (not with a size mismatch or a timeout
# later). Then the same job with the value spelt two ways ("1M", "1048576") must run.
# usage: config_mismatch.sh COLLECTIVERUN PROGRAM [ARGS...]
set -uo pipefail
run=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT

per_rank() {  # per_rank VALUE_ON_RANK_0 VALUE_ELSEWHERE PROGRAM ARGS...
  local v0=$1 v1=$2
  shift 2
  COLL_TIMEOUT=20 timeout 60 "$run" -np 3 sh -c \
    'if [ "$COLL_RANK" = 0 ]; then COLL_CHUNK_BYTES=$0; else COLL_CHUNK_BYTES=$1; fi; export COLL_CHUNK_BYTES; shift; exec "$@"' \
    "$v0" "$v1" "$@"
}

start=$SECONDS
per_rank 64K 1M "$@" >"$out" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
  echo "FAIL: the job ran although COLL_CHUNK_BYTES differed"; cat "$out"; exit 1
fi
# collectiverun stops the others once one rank fails, so not every rank may get to
# print; each one that reports a failure must name the tunable.
if ! grep -q "COLL_CHUNK_BYTES differs between the ranks" "$out" ||
  grep "failed" "$out" | grep -v "collectiverun:" | grep -qv "COLL_CHUNK_BYTES differs"; then
  echo "FAIL: a rank failed without naming COLL_CHUNK_BYTES"; cat "$out"; exit 1
fi
if [ $((SECONDS - start)) -gt 15 ]; then
  echo "FAIL: the mismatch took $((SECONDS - start)) s to report"; cat "$out"; exit 1
fi
echo "mismatch reported in $((SECONDS - start)) s"

if ! per_rank 1M 1048576 "$@" >"$out" 2>&1; then
  echo "FAIL: 1M and 1048576 were taken as different values"; cat "$out"; exit 1
fi
echo "OK"
