#!/usr/bin/env bash
# Configures and builds fsdp-opt and fsdp-run into build/ (binaries in
# build/bin/) against the torch 2.11 wheel in .venv (scripts/setup.sh).
# Compiles through ccache where it is installed (scripts/setup.sh installs
# it): a clean clone then rebuilds only what changed. CCACHE_DIR picks the
# cache (.ci/run keeps one beside its kept .venv); FSDP_CCACHE=0 turns it off.
set -euo pipefail
cd "$(dirname "$0")/.."
LLVM_BIN=/usr/lib/llvm-22/bin
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LAUNCHER=()
if [ "${FSDP_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths under the checkout hash as relative ones, so that two clones share
  # the cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
mkdir -p build
if [ ! -f build/build.ninja ]; then
  cmake -G Ninja -S . -B build "${LAUNCHER[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT="$LLVM_BIN/lit" \
    -DFSDP_PYTHON="$PWD/.venv/bin/python" \
    -DCMAKE_CUDA_COMPILER="$CUDA_HOME/bin/nvcc" \
    -DCUDAToolkit_ROOT="$CUDA_HOME" >build/cmake.log 2>&1 \
    || { cat build/cmake.log >&2; rm -f build/build.ninja; exit 1; }
fi
# The runtime's Python module where the interpreter has headers (CMake says
# when not).
TARGETS=(fsdp-opt fsdp-run)
if ninja -C build -t targets all 2>/dev/null | grep -q '^fsdp_python_runtime:'; then
  TARGETS+=(fsdp_python_runtime)
fi
ninja -C build -j "${JOBS:-$(nproc)}" "${TARGETS[@]}"
