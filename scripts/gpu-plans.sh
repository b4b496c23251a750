#!/usr/bin/env bash
# What a GPU machine without MLIR needs from this one, in one folder:
#   scripts/gpu-plans.sh [DIR]     (default: gpu-cases)
# the GPU tests' models, data and plans (test/gpu/make_cases.py) and the
# GPU benchmark's plans (bench/gpu: GPT-2 small and medium, from weightless
# skeletons), compiled by this checkout's fsdp-opt, and the one header the runtime needs that
# such a machine lacks (nlohmann/json). Then, there:
#   scripts/gpu-check.sh DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-gpu-cases}
fsdp_opt=${FSDP_OPT:-build/bin/fsdp-opt}
python=.venv/bin/python
[ -x "$fsdp_opt" ] || { echo "gpu-plans: no $fsdp_opt: build first (scripts/build.sh)" >&2; exit 2; }
[ -x "$python" ] || { echo "gpu-plans: no .venv: run scripts/setup.sh" >&2; exit 2; }
rm -rf "$dir" && mkdir -p "$dir/include"
PYTHONPATH=$PWD/python:$PWD/test/fixtures OMP_NUM_THREADS=1 \
  "$python" test/gpu/make_cases.py "$dir" --fsdp-opt "$fsdp_opt"
PYTHONPATH=$PWD/python OMP_NUM_THREADS=1 \
  "$python" bench/gpu/bench_gpu.py plans "$dir/bench" --fsdp-opt "$fsdp_opt"
cp -r /usr/include/nlohmann "$dir/include/"
echo "gpu-plans: $(du -sh "$dir" | cut -f1) in $dir; on the GPU machine: scripts/gpu-check.sh $dir"
