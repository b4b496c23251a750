#!/usr/bin/env bash
# fsdp-run's GPU checks, on a machine with torch (CUDA) but no MLIR:
#   scripts/gpu-check.sh [--cpu] [DIR [RESULTS]]
# DIR (default gpu-cases; absolute or relative) is what
# scripts/gpu-plans.sh wrote where fsdp-opt is. RESULTS (default
# DIR/results, or FSDP_GPU_RESULTS) receives a handful of files, so that
# nothing is lost when only the end of the output comes back:
#   check.log    everything below, the build's output included
#   checks.md    the checks and their table (test/gpu/gpu_tests.py)
#   bench.md     the benchmark's table (bench/gpu/bench_gpu.py)
#   summary.md   each stage, how long it took and how it ended
# The stages, each bounded in time:
#   1. the GPU and torch (a machine where torch sees no GPU stops here);
#   2. fsdp-run: DIR/bin/fsdp-run (built by gpu-plans.sh against the same
#      torch 2.11 wheel) with this machine's torch and NVIDIA libraries, if
#      it starts and has NCCL; else the runtime built here (build-rt/),
#      which must find NCCL: a Gloo-only build is an error at once;
#   3. the checks: NCCL conformance at 1 and 2 ranks, fp32 parity with
#      eager PyTorch on the GPU at 1 and 2 ranks, the memory prediction
#      against the GPU's measurement, --cuda-graph's losses;
#   4. the benchmark (GPT-2 small and medium beside eager and FSDP2),
#      which runs even when a check failed.
# Exits non-zero at the end if any stage failed. Each stage's limit keeps
# the whole within 8 minutes on one H100/H200 with the prebuilt fsdp-run
# (the machine's start excluded); building there adds up to 15.
# --cpu runs the same on CPU ranks over Gloo (a folder from
# `scripts/gpu-plans.sh --cpu`): the check's own test, where there is no GPU.
# FSDP_GPU_CHECK_BUILD=0: no build here (the prebuilt fsdp-run or nothing);
# FSDP_GPU_CHECK_TIMEOUT: seconds each check's command may take (240).
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/.."
root=$PWD
device=cuda
if [ "${1:-}" = "--cpu" ]; then device=cpu; shift; fi
# Relative paths are the caller's.
dir=${1:-gpu-cases}
case "$dir" in /*) ;; *) dir=$caller/$dir ;; esac
results=${2:-${FSDP_GPU_RESULTS:-$dir/results}}
case "$results" in /*) ;; *) results=$caller/$results ;; esac
if [ ! -f "$dir/cases.json" ]; then
  echo "gpu-check: no $dir/cases.json: run scripts/gpu-plans.sh $dir where fsdp-opt is built, and bring the folder" >&2
  exit 2
fi
mkdir -p "$results" || { echo "gpu-check: cannot make $results" >&2; exit 2; }
: >"$results/summary.md"
exec > >(tee "$results/check.log") 2>&1
# The Python with torch: FSDP_PYTHON, the project's .venv where there is one,
# else python3 (a GPU machine's).
python=${FSDP_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x "$root/.venv/bin/python" ]; then python=$root/.venv/bin/python; else python=$(command -v python3); fi
fi
if [ -z "${CUDA_HOME:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDA_HOME=/usr/local/cuda
fi
export PYTHONUNBUFFERED=1
export device dir results python root
failed=()
started=$(date +%s)

# One stage: its name, its time limit in seconds, a function of this
# script (run in a shell of its own, so that `timeout` ends it and all it
# started), and --optional where its failure is not the check's. Its output
# goes to the log; its time and status to summary.md.
stage() {
  local optional=0
  if [ "$1" = --optional ]; then optional=1; shift; fi
  local name=$1 limit=$2 fn=$3
  local t0 status took verdict=ok
  t0=$(date +%s)
  echo "== $name (at most ${limit} s)"
  timeout --kill-after=10 "$limit" bash -c "set -uo pipefail; $(declare -f "$fn"); $fn"
  status=$?
  took=$(( $(date +%s) - t0 ))
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    verdict="did not finish within ${limit} s"
  elif [ "$status" -ne 0 ]; then
    verdict="failed (status $status)"
  fi
  if [ "$verdict" != ok ] && [ "$optional" -eq 0 ]; then failed+=("$name"); fi
  echo "== $name: $verdict, ${took} s"
  echo "- $name: $verdict, ${took} s" >>"$results/summary.md"
  return "$status"
}

finish() {
  local total=$(( $(date +%s) - started ))
  {
    echo
    if [ ${#failed[@]} -eq 0 ]; then
      echo "gpu-check: every stage passed in ${total} s"
    else
      echo "gpu-check: failed: ${failed[*]} (${total} s in all)"
    fi
  } | tee -a "$results/summary.md"
  echo "gpu-check: results in $results: $(cd "$results" && echo *)"
  [ ${#failed[@]} -eq 0 ]
  exit $?
}

# 1. The machine: the GPU (its compute mode says whether two ranks may
# share it), torch, and whether torch sees the GPU.
machine() {
  if [ "$device" = cuda ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total --format=csv
  fi
  "$python" -c '
import sys, torch
cuda = torch.cuda.is_available()
nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else "-"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}, {torch.cuda.device_count()} GPU(s)")
if sys.argv[1] == "cuda" and not cuda:
    sys.exit("gpu-check: torch sees no CUDA device")
' "$device"
}
stage "machine" 120 machine || finish

# 2. fsdp-run: the one gpu-plans.sh built, with this machine's torch and
# NVIDIA libraries, or one built here.
want="NCCL [0-9]"
[ "$device" = cpu ] && want="Gloo yes"
export want
libs=$("$python" -c '
import glob, os, torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([lib] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))
')
export LD_LIBRARY_PATH=$libs${CUDA_HOME:+:$CUDA_HOME/lib64}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
prebuilt() {
  local version
  version=$("$dir/bin/fsdp-run" --version) || return 1
  echo "$version"
  if ! grep -q "$want" <<<"$version"; then
    echo "gpu-check: the prebuilt fsdp-run lacks what this check needs ($want)"
    return 1
  fi
}
build_here() {
  local generator=() version
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S runtime -B build-rt "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DFSDP_PYTHON="$python" -DFSDP_JSON_INCLUDE_DIR="$dir/include" || return 1
  cmake --build build-rt -j"$(nproc)" || return 1
  version=$(build-rt/bin/fsdp-run --version) || return 1
  echo "$version"
  if ! grep -q "$want" <<<"$version"; then
    echo "gpu-check: fsdp-run was built without what this check needs ($want): $version."
    echo "  cmake found no nccl.h or libnccl (torch's nvidia/nccl, or CUDA_HOME):"
    echo "  see FSDP_NCCL_INCLUDE_DIR and FSDP_NCCL_LIBRARY in build-rt/CMakeCache.txt"
    return 1
  fi
}
if [ -x "$dir/bin/fsdp-run" ] && stage --optional "fsdp-run prebuilt" 60 prebuilt; then
  fsdp_run=$dir/bin/fsdp-run
elif [ "${FSDP_GPU_CHECK_BUILD:-1}" = 0 ]; then
  echo "gpu-check: no usable prebuilt fsdp-run in $dir/bin, and FSDP_GPU_CHECK_BUILD=0 forbids building one"
  failed+=("fsdp-run prebuilt")
  finish
elif stage "fsdp-run built here" 900 build_here; then
  fsdp_run=$root/build-rt/bin/fsdp-run
else
  finish
fi
export fsdp_run

# 3. The checks, then 4. the benchmark, whatever the checks found.
checks() {
  "$python" test/gpu/gpu_tests.py "$dir" --fsdp-run "$fsdp_run" --device "$device" \
    --results "$results"
}
stage "checks" 420 checks
benchmark() {
  "$python" bench/gpu/bench_gpu.py run "$dir/bench" --fsdp-run "$fsdp_run" \
    --device "$device" --steps 10 --warmup 3 | tee "$results/bench.md"
}
stage "benchmark" 300 benchmark
finish
