#!/usr/bin/env bash
# Ranks sharing ONE GPU through the cuda_ipc path: all-reduce bus bandwidth against the
# device-to-device copy bandwidth measured on the same GPU in the same run (the issue's
# target: busbw at 256 MiB with 2 ranks >= 60% of the copy bandwidth).
#
#   perf/cuda/ipc_allreduce.sh BUILD_DIR [-np 2] [--size-mib 256] [--gpu 0]
#
# Copy bandwidth is printed both ways: bytes copied per second, and bytes read + written
# per second (cuda_kernel_bench's convention, twice the first); the verdict uses the
# stricter, read + written. Exits 2 without a GPU, 1 if a check fails.
set -euo pipefail
build=${1:?usage: ipc_allreduce.sh BUILD_DIR [-np N] [--size-mib M] [--gpu G]}
shift
np=2 mib=256 gpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np=$2; shift 2 ;;
    --size-mib) mib=$2; shift 2 ;;
    --gpu) gpu=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bench=$build/perf/cuda/cuda_kernel_bench
tool=$build/perf/all_reduce_perf
launcher=$build/src/launcher/collectiverun
for f in "$bench" "$tool" "$launcher"; do
  [ -x "$f" ] || { echo "$f not built (a CUDA build is needed)" >&2; exit 2; }
done
export CUDA_VISIBLE_DEVICES=$gpu

copy_out=$("$bench" --only copy --size-mib "$mib") || exit 2
echo "$copy_out"
copy_rw=$(awk '$1 == "copy_d2d" { print $4 }' <<<"$copy_out")

# Every rank sees one GPU, so all of them share it (selectDevice: local rank % 1).
ar_out=$("$launcher" -np "$np" "$tool" -g 1 -b "${mib}M" -e "${mib}M" -n 20 -w 5 -c 1)
echo "$ar_out"
grep -q '^# Out of bounds values : 0 OK' <<<"$ar_out" || { echo "FAIL: wrong results" >&2; exit 1; }
busbw=$(awk '!/^#/ && NF >= 10 { print $8 }' <<<"$ar_out" | tail -1)

python3 - "$busbw" "$copy_rw" "$np" "$mib" <<'PY'
import sys
busbw, copy_rw, np, mib = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
copy_b = copy_rw / 2
print(f"# {np} ranks on one GPU, all-reduce {mib} MiB float sum: busbw {busbw:.1f} GB/s")
print(f"# device copy: {copy_b:.1f} GB/s copied ({copy_rw:.1f} GB/s read + written)")
print(f"# busbw / copy: {busbw / copy_b:.3f} of bytes copied, {busbw / copy_rw:.3f} of read + written")
ok = busbw / copy_rw >= 0.60
print(f"# target >= 0.60 of the copy bandwidth (read + written): {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
