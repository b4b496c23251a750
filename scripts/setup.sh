#!/usr/bin/env bash
# Installs what fsdp-opt needs: Debian's packages (LLVM/MLIR 22, Gloo's headers,
# JSON and YAML readers), and the project's Python environment at .venv with
# the pinned torch 2.11 wheel (scripts/requirements.txt), whose libtorch both
# binaries link. Idempotent and quiet: installs only what is missing, runs
# `apt-get update` only then, and pip only when requirements.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ git iproute2 ccache
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libgloo-dev nlohmann-json3-dev libyaml-cpp-dev
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
updated=0
apt_install() {
  if [ "$updated" -eq 0 ]; then $SUDO apt-get update -qq; updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

# The CUDA toolkit: torch's CMake config needs nvcc and the CUDA headers even
# where no GPU is; nothing here runs CUDA code.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "setup: no CUDA toolkit at $CUDA_HOME (nvcc): torch's CMake config needs one;" \
       "set CUDA_HOME to where it is" >&2
  exit 1
fi

# The Python environment. Any python3 with venv serves (3.10 to 3.13 have the
# wheel); Debian's needs python3-venv for it.
REQ=scripts/requirements.txt
STAMP=.venv/.requirements
if [ ! -x .venv/bin/python ]; then
  PY=${PYTHON:-python3}
  if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -c 'import ensurepip' 2>/dev/null; then
    echo "setup: installing python3-venv"
    apt_install python3-venv
    PY=/usr/bin/python3
  fi
  echo "setup: creating .venv with $("$PY" --version 2>&1)"
  # .venv may link to a kept environment (.ci/run): venv writes the target.
  "$PY" -m venv "$(readlink -f .venv)"
fi
if ! cmp -s "$REQ" "$STAMP"; then
  echo "setup: installing $REQ into .venv (torch 2.11 with CUDA: about 5 GB)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$REQ"
  cp "$REQ" "$STAMP"
fi
echo "setup: Debian packages and .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)')) present"
