#!/usr/bin/env bash
# Configures (once) and builds libcollective in ./build (or $BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR" --buildtype=release
fi
ninja -C "$BUILD_DIR" -j"$(nproc)"
