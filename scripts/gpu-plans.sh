#!/usr/bin/env bash
# What a GPU machine without MLIR needs from this one, in one folder:
#   scripts/gpu-plans.sh [--cpu] [DIR]     (default: gpu-cases)
# - the GPU tests' models, data and plans (test/gpu/make_cases.py) and the
#   GPU benchmark's plans (bench/gpu: GPT-2 small and medium, from
#   weightless skeletons), compiled by this checkout's fsdp-opt for NCCL
#   (plans for a GPU: fsdp-opt --backend nccl);
# - bin/fsdp-run and its CUDA half (lib/libfsdp_runtime_cuda.so, which it
#   loads for a GPU run), built here against the same torch 2.11 wheel the
#   GPU machines have (scripts/gpu-check.sh runs it there with that
#   machine's torch libraries, and builds the runtime there only if it does
#   not start);
# - include/nlohmann, the one header that building the runtime there needs
#   and such a machine lacks.
# Then, there:   scripts/gpu-check.sh DIR [RESULTS]
# --cpu makes the same folder for CPU ranks (Gloo plans, the benchmark's tiny
# size): scripts/gpu-check.sh --cpu tests the check itself where there is no
# GPU. FSDP_OPT and FSDP_RUN name other binaries than build/bin's (built
# first when they are those).
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
cpu=0
if [ "${1:-}" = "--cpu" ]; then cpu=1; shift; fi
# A relative DIR is the caller's.
dir=${1:-gpu-cases}
case "$dir" in /*) ;; *) dir=$caller/$dir ;; esac
python=.venv/bin/python
[ -x "$python" ] || { echo "gpu-plans: no .venv: run scripts/setup.sh" >&2; exit 2; }
if [ -z "${FSDP_OPT:-}${FSDP_RUN:-}" ]; then
  scripts/build.sh >/dev/null || { echo "gpu-plans: the build failed (scripts/build.sh)" >&2; exit 1; }
fi
fsdp_opt=${FSDP_OPT:-build/bin/fsdp-opt}
fsdp_run=${FSDP_RUN:-build/bin/fsdp-run}
[ -x "$fsdp_opt" ] || { echo "gpu-plans: no $fsdp_opt: build first (scripts/build.sh)" >&2; exit 2; }
[ -x "$fsdp_run" ] || { echo "gpu-plans: no $fsdp_run: build first (scripts/build.sh)" >&2; exit 2; }
version=$("$fsdp_run" --version)
if [ "$cpu" -eq 0 ] && ! grep -q "CUDA yes, NCCL [0-9]" <<<"$version"; then
  echo "gpu-plans: $fsdp_run was built without CUDA or NCCL ($version): it cannot run on a GPU" >&2
  exit 1
fi
backend=nccl sizes=small,medium bench=()
if [ "$cpu" -eq 1 ]; then backend=gloo sizes=tiny bench=(--batch 2 --seq 32); fi
rm -rf "$dir" && mkdir -p "$dir/include" "$dir/bin"
PYTHONPATH=$PWD/python:$PWD/test/fixtures OMP_NUM_THREADS=1 \
  "$python" test/gpu/make_cases.py "$dir" --fsdp-opt "$fsdp_opt" --backend "$backend"
PYTHONPATH=$PWD/python OMP_NUM_THREADS=1 \
  "$python" bench/gpu/bench_gpu.py plans "$dir/bench" --fsdp-opt "$fsdp_opt" \
  --sizes "$sizes" --backend "$backend" "${bench[@]}"
cp "$fsdp_run" "$dir/bin/fsdp-run"
half=$(dirname "$fsdp_run")/../lib/libfsdp_runtime_cuda.so
if [ -f "$half" ]; then
  mkdir -p "$dir/lib" && cp "$half" "$dir/lib/"
fi
echo "$version" >"$dir/bin/fsdp-run.version"
cp -r /usr/include/nlohmann "$dir/include/"
size=$(du -sm "$dir" | cut -f1)
if [ "$size" -ge 48 ]; then
  echo "gpu-plans: $dir holds ${size} MiB: a device call carries at most 64 MiB with the checkout" >&2
  exit 1
fi
echo "gpu-plans: ${size} MiB in $dir ($version); on the GPU machine: scripts/gpu-check.sh $dir [RESULTS]"
