#!/usr/bin/env bash
# fsdp-run's GPU checks, on a machine with torch (CUDA) but no MLIR:
#   scripts/gpu-check.sh [DIR]     (default: gpu-cases)
# DIR is what scripts/gpu-plans.sh wrote where fsdp-opt is. Builds the
# runtime alone against this machine's torch (build-rt/), then runs
# test/gpu/gpu_tests.py: NCCL conformance at 1 and 2 ranks, fp32 parity
# with eager PyTorch on the GPU at 1 and 2 ranks, the memory prediction
# against the GPU's measurement, and --cuda-graph's losses; then the GPU
# benchmark (bench/gpu/bench_gpu.py run: GPT-2 small and medium beside
# eager and FSDP2). Prints their tables; exits non-zero if a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-gpu-cases}
python=${FSDP_PYTHON:-$(command -v python3)}
if [ ! -f "$dir/cases.json" ]; then
  echo "gpu-check: no $dir/cases.json: run scripts/gpu-plans.sh $dir where fsdp-opt is built, and bring the folder" >&2
  exit 2
fi
"$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'gpu-check: torch sees no CUDA device')"
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc >/dev/null; then
  CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
  export CUDA_HOME
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S runtime -B build-rt "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DFSDP_PYTHON="$python" -DFSDP_JSON_INCLUDE_DIR="$PWD/$dir/include" >build-rt.log 2>&1 ||
  { cat build-rt.log; exit 1; }
cmake --build build-rt -j"$(nproc)" >>build-rt.log 2>&1 || { tail -50 build-rt.log; exit 1; }
grep -E 'fsdp-run: CUDA|WARNING' -A1 build-rt.log || true
PYTHONUNBUFFERED=1 "$python" test/gpu/gpu_tests.py "$dir" --fsdp-run build-rt/bin/fsdp-run
# The GPU benchmark (bench/gpu), where gpu-plans.sh compiled its plans.
if [ -f "$dir/bench/bench.json" ]; then
  PYTHONUNBUFFERED=1 "$python" bench/gpu/bench_gpu.py run "$dir/bench" --fsdp-run build-rt/bin/fsdp-run
fi
