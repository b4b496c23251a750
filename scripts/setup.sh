#!/usr/bin/env bash
# Installs every Debian package fsdp-opt needs. Idempotent: installs only what
# is missing, and runs `apt-get update` only then.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ git
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libtorch-dev python3-torch python3-torchvision python3-matplotlib
  libgloo-dev nlohmann-json3-dev libyaml-cpp-dev libgtest-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
