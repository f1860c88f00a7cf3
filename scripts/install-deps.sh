#!/usr/bin/env bash
# Installs (as root, from Debian) whatever libcollective needs to build, test and
# benchmark that is not installed yet. Safe to run again: it only installs what is missing.
set -euo pipefail

PACKAGES=(
  build-essential meson ninja-build pkg-config
  libhwloc-dev hwloc libibverbs-dev libucx-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev zlib1g-dev libgloo-dev
  python3-torch dataset-fashion-mnist
  libtorch-dev pybind11-dev python3-dev python3-pytest
  iproute2 procps
  slurm-wlm munge python3-matplotlib
  clang libfuzzer-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
