#!/usr/bin/env bash
# Ranks in separate processes whose calls differ (mp_mismatch): every rank must fail
# within 10 s although COLL_TIMEOUT is 60, and at least one must say how the calls
# differ. Over TCP and over what the library picks (shared memory here).
# usage: mismatch_test.sh COLLECTIVERUN MP_MISMATCH
set -uo pipefail
run=$1
prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
for transport in tcp auto; do
  for mode in op:reduction kind:kind; do
    COLL_TRANSPORT=$transport COLL_TIMEOUT=60 timeout 60 "$run" -np 3 "$prog" "${mode%%:*}" >"$out" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "invalid usage after .*the calls differ in ${mode#*:}" "$out"; then
      echo "FAIL: $transport ${mode%%:*}: exit $rc, or no rank said the calls differ in ${mode#*:}"
      cat "$out"
      status=1
    else
      echo "ok: $transport ${mode%%:*}"
      grep "^\[[0-9]*\] rank" "$out"
    fi
  done
done
exit $status
