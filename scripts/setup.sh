#!/usr/bin/env bash
# Installs, by name, every Debian package the build and the tests need.
# Safe to run again; needs root (or sudo) on Debian 12.
set -euo pipefail
packages=(
  cmake ninja-build g++ make python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev nlohmann-json3-dev
  clang-22 libfuzzer-22-dev libclang-rt-22-dev
  python3-torch python3-pytest python3-numpy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all packages present"
