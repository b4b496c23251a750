#!/usr/bin/env bash
# Configures and builds fsdp-opt into build/ (binaries in build/bin/).
# Another libtorch (2.x) can be chosen with CMAKE_PREFIX_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
LLVM_BIN=/usr/lib/llvm-22/bin
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
    ${CMAKE_PREFIX_PATH:+-DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH"}
fi
ninja -C build -j "${JOBS:-$(nproc)}" fsdp-opt fsdp-run
