#!/bin/bash
# Runs libcollective's all_reduce_perf and its peers (Open MPI, Gloo, optionally PyTorch)
# on the same sizes in one go, plus single-core memcpy, and prints busbw and latency side
# by side with ours/peer ratios and a verdict on the library's targets:
#   busbw >= 1.5x Open MPI and Gloo at 64 MiB and 256 MiB; 8-byte latency <= Open MPI.
# The latency verdict comes from a run of its own, 8 B only, with many iterations (ours
# and Open MPI, one after the other): the sweep's first size is timed over a few calls
# right after start-up, which swings by 2x from run to run on a busy machine.
#
# usage: perf/compare_allreduce.sh BUILD_DIR [--tcp] [--torch] [--np N] [--strict]
#                                  [--keep DIR] [--lat-iters N] [--repeat N] [--hogs N]
#                                  [--bind-to MODE] [sweep flags, default -b 8 -e 256M -f 2]
#   --tcp     COLL_TRANSPORT=tcp for us, pml ob1 + btl tcp,self on lo for Open MPI
#             (without it COLL_TRANSPORT is unset and Open MPI uses its defaults)
#   --torch   also run perf/peers/torch_allreduce.py (torch.distributed, gloo backend)
#   --strict  exit 3 when a target is missed
#   --keep    keep every program's raw output in DIR
#   --lat-iters N  iterations of the 8-byte latency run (default 10000, warm-up N/20);
#             0: no such run, the verdict takes the sweep's 8-byte time
#   --repeat N  N rounds, each running every program once in turn (interleaved), then a
#             table of min / median / max per size and peer (perf/spread.py) instead of
#             one round's table, with verdicts over all rounds
#   --hogs N  N busy processes (loops that never yield, as data loaders or a build) run
#             beside every program, as perf/under_load.sh starts them
#   --bind-to MODE  collectiverun's --bind-to for our runs (default: its own, auto)
# Sweep flags (-b -e -f -n -w -c) are passed to every program unchanged.
set -euo pipefail

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
build=$(cd "$1" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
np=2; tcp=0; torch=0; strict=0; keep=""; lat_iters=10000; repeat=1; hogs=0; bind=()
sweep=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tcp) tcp=1 ;;
    --torch) torch=1 ;;
    --strict) strict=1 ;;
    --np) np=$2; shift ;;
    --keep) keep=$2; shift ;;
    --lat-iters)
      lat_iters=${2:-}
      [[ "$lat_iters" =~ ^[0-9]+$ ]] || { echo "compare_allreduce.sh: --lat-iters takes a count, got '$lat_iters'" >&2; exit 2; }
      shift ;;
    --repeat|--hogs)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "compare_allreduce.sh: $1 takes a count, got '${2:-}'" >&2; exit 2; }
      if [ "$1" = --repeat ]; then repeat=$2; else hogs=$2; fi
      shift ;;
    --bind-to) bind=(--bind-to "${2:-}"); shift ;;
    -h|--help) usage ;;
    *) sweep+=("$1") ;;
  esac
  shift
done
[ ${#sweep[@]} -gt 0 ] || sweep=(-b 8 -e 256M -f 2)

launcher=$build/src/launcher/collectiverun
ours=$build/perf/all_reduce_perf
mpibench=$build/perf/mpi_allreduce_bench
gloobench=$build/perf/gloo_allreduce_bench
memcpybench=$build/perf/memcpy_bench
for f in "$launcher" "$ours" "$memcpybench"; do
  [ -x "$f" ] || { echo "compare_allreduce.sh: $f not built" >&2; exit 2; }
done

[ "$repeat" -ge 1 ] || { echo "compare_allreduce.sh: --repeat must be at least 1" >&2; exit 2; }
out=${keep:-$(mktemp -d /tmp/compare_allreduce.XXXXXX)}
mkdir -p "$out"
hog_pids=()
stop_hogs() { [ ${#hog_pids[@]} -eq 0 ] || { kill "${hog_pids[@]}" 2>/dev/null; wait "${hog_pids[@]}" 2>/dev/null; }; hog_pids=(); }
cleanup() { stop_hogs; [ -n "$keep" ] || rm -rf "$out"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
  ( trap - INT TERM; while :; do :; done ) </dev/null >/dev/null 2>&1 &
  hog_pids+=($!)
done

# Runs one program, keeps its output, and turns its table into "size time busbw" lines.
failed=()
run() {
  local name=$1; shift
  echo "# running $name: $*" >&2
  local rc=0
  "$@" >"$rdir/$name.log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    failed+=("$name")
    echo "# $name FAILED (exit status $rc); last lines:" >&2
    tail -5 "$rdir/$name.log" >&2
  fi
  # collectiverun tags lines with "[rank] " unless told otherwise. Fields: size, time,
  # busbw and (our tools) the in-place time.
  awk '{ sub(/^\[[0-9]+\] /, "") } !/^#/ && NF >= 8 && $1 ~ /^[0-9]+$/ { print $1, $6, $8, (NF >= 13 ? $10 : "") }' \
    "$rdir/$name.log" >"$rdir/$name.tsv"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if [ $tcp = 1 ]; then
  transport="tcp (COLL_TRANSPORT=tcp; Open MPI pml ob1, btl tcp,self on lo)"
  ourenv=(env COLL_TRANSPORT=tcp)
  mpiflags=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
else
  transport="default (COLL_TRANSPORT unset; Open MPI default pml/btl)"
  ourenv=(env -u COLL_TRANSPORT)
  mpiflags=()
fi
have_ompi=0
if [ -x "$mpibench" ] && command -v mpirun >/dev/null; then have_ompi=1; fi
ompi=(mpirun --allow-run-as-root --oversubscribe -np "$np" "${mpiflags[@]}" "$mpibench")
peers=()
if [ $have_ompi = 1 ]; then peers+=(ompi); else echo "# Open MPI peer not built (no mpi dependency): skipped" >&2; fi
if [ -x "$gloobench" ]; then peers+=(gloo); else echo "# Gloo peer not built (libgloo not found): skipped" >&2; fi
[ $torch = 0 ] || peers+=(torch)
lat=(-b 8 -e 8 -n "$lat_iters" -w $((lat_iters / 20 + 1)))
# One round: every program once, in turn, into $rdir.
one_round() {
  run ours "${ourenv[@]}" "$launcher" "${bind[@]}" -np "$np" "$ours" "${sweep[@]}"
  local q
  for q in "${peers[@]}"; do
    case $q in
      ompi) run ompi "${ompi[@]}" "${sweep[@]}" ;;
      gloo) run gloo "$gloobench" -np "$np" "${sweep[@]}" ;;
      torch) run torch /usr/bin/python3 "$here/peers/torch_allreduce.py" -np "$np" "${sweep[@]}" ;;
    esac
  done
  # The latency verdict's own run: 8 B, many iterations, ours then Open MPI.
  if [ "$lat_iters" -gt 0 ]; then
    run ours_lat "${ourenv[@]}" "$launcher" "${bind[@]}" -np "$np" "$ours" "${lat[@]}"
    [ $have_ompi = 0 ] || run ompi_lat "${ompi[@]}" "${lat[@]}"
  fi
}
memcpy_line=$("$memcpybench" 64M 10)
memcpy_gbps=$(echo "$memcpy_line" | awk '{ print $4 }')
if [ "$repeat" -gt 1 ]; then
  for ((round = 1; round <= repeat; round++)); do
    rdir=$out/round$round
    mkdir -p "$rdir"
    echo "# round $round of $repeat" >&2
    one_round
  done
  echo "# all-reduce float sum, $np ranks on $(hostname), $(nproc) cores; transport: $transport"
  echo "# sweep: ${sweep[*]}; $repeat interleaved rounds; busy processes beside: $hogs; $memcpy_line"
  echo "# load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
  status=0
  strict_flag=()
  [ $strict = 0 ] || strict_flag=(--strict)
  python3 "$here/spread.py" --dir "$out" --rounds "$repeat" --np "$np" --memcpy "$memcpy_gbps" \
    --peers "${peers[*]}" --lat-iters "$lat_iters" "${strict_flag[@]}" || status=$?
  if [ ${#failed[@]} -gt 0 ]; then
    echo "# FAILED runs: ${failed[*]} (outputs in $out)" >&2
    [ -n "$keep" ] || { keep=$out; echo "# kept $out" >&2; }
    exit 1
  fi
  exit $status
fi
rdir=$out
one_round

echo "# all-reduce float sum, $np ranks on $(hostname), $(nproc) cores; transport: $transport"
echo "# sweep: ${sweep[*]}; busy processes beside: $hogs; $memcpy_line"
echo "# load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# bw x = our busbw / peer busbw (higher is better), computed from the times (same size,"
echo "#        same busbw factor) so that it keeps its precision; t x = our time / peer time"
status=0
awk -v peers="${peers[*]}" -v latn="$lat_iters" -v nr="$np" -v memcpy="$memcpy_gbps" -v dir="$out" -v strict="$strict" '
function load(name,   f, line, a) {
  f = dir "/" name ".tsv"
  # busbw from size and time (all-reduce factor 2(n-1)/n): the tables round it to 0.01.
  while ((getline line < f) > 0) {
    split(line, a, " "); t[name, a[1]] = a[2]
    bw[name, a[1]] = a[2] > 0 ? a[1] / a[2] / 1e3 * 2 * (nr - 1) / nr : 0
  }
  close(f)
}
function ratio(a, b) { return (b > 0 && a != "") ? sprintf("%.2f", a / b) : "-" }
BEGIN {
  np = split(peers, p, " ")
  load("ours"); for (i = 1; i <= np; i++) load(p[i])
  f = dir "/ours.tsv"; n = 0
  while ((getline line < f) > 0) { split(line, a, " "); sizes[++n] = a[1] }
  hdr = sprintf("%12s | %10s %11s %6s", "size(B)", "ours GB/s", "ours us", "%mcpy")
  for (i = 1; i <= np; i++) hdr = hdr sprintf(" | %10s %11s %6s %6s", p[i] " GB/s", p[i] " us", "bw x", "t x")
  print hdr
  for (k = 1; k <= n; k++) {
    s = sizes[k]
    row = sprintf("%12d | %10.3f %11.2f %5.1f%%", s, bw["ours", s], t["ours", s],
                  memcpy > 0 ? 100 * bw["ours", s] / memcpy : 0)
    for (i = 1; i <= np; i++) {
      q = p[i]
      if ((q, s) in t)
        row = row sprintf(" | %10.3f %11.2f %6s %6s", bw[q, s], t[q, s],
                          ratio(t[q, s], t["ours", s]), ratio(t["ours", s], t[q, s]))
      else row = row sprintf(" | %10s %11s %6s %6s", "-", "-", "-", "-")
    }
    print row
  }
  missed = 0
  split("67108864 268435456", big, " ")
  for (j = 1; j <= 2; j++) for (i = 1; i <= np; i++) {
    q = p[i]; s = big[j]
    if (q == "torch") continue
    if (!((q, s) in t) || !(("ours", s) in t)) { printf "# verdict: busbw at %d B vs %s: not measured\n", s, q; missed++; continue }
    r = t["ours", s] > 0 ? t[q, s] / t["ours", s] : 0
    ok = r >= 1.5; if (!ok) missed++
    printf "# verdict: busbw at %d B vs %s: %.2fx (target >= 1.5x) %s\n", s, q, r, ok ? "PASS" : "FAIL"
  }
  # The 8-byte verdict: from the run of its own where there is one, else from the sweep.
  load("ours_lat"); load("ompi_lat")
  if (("ours_lat", 8) in t && ("ompi_lat", 8) in t) {
    us = t["ours_lat", 8]; them = t["ompi_lat", 8]
    how = sprintf(", own run of %d calls", latn)
    if (("ours", 8) in t && ("ompi", 8) in t)
      how = how sprintf("; first size of the sweep: %.2f vs %.2f us", t["ours", 8], t["ompi", 8])
  } else if (("ompi", 8) in t && ("ours", 8) in t) {
    us = t["ours", 8]; them = t["ompi", 8]; how = ", from the sweep"
  } else us = ""
  if (us != "") {
    ok = us <= them; if (!ok) missed++
    printf "# verdict: 8 B latency %.2f us vs Open MPI %.2f us (target <=%s) %s\n", us, them, how, ok ? "PASS" : "FAIL"
  } else { print "# verdict: 8 B latency vs Open MPI: not measured"; missed++ }
  printf "# verdict: %s\n", missed ? missed " target(s) missed or not measured" : "all targets met"
  exit (strict && missed) ? 3 : 0
}' || status=$?
if [ ${#failed[@]} -gt 0 ]; then
  echo "# FAILED runs: ${failed[*]} (outputs in $out)" >&2
  [ -n "$keep" ] || { keep=$out; echo "# kept $out" >&2; }
  exit 1
fi
exit $status
