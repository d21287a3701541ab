#!/usr/bin/env bash
# SASS of PTX kernels without a GPU or a CUDA toolkit's disassembler: each PTX
# is assembled by ptxas (sm_90 unless SASS_ARCH says otherwise) and
# disassembled by nvdisasm into OUTDIR/<name>.sass, in the layout
# bench/sass_mix.py reads ("Function : <kernel>" before each kernel's code),
# with ptxas's registers and spills in OUTDIR/ptxas.txt.
#   bash bench/sass_offline.sh OUTDIR build/kernels/ptx/flash_adamw.ptx ...
#   python3 bench/sass_mix.py OUTDIR/*.sass
#
# nvdisasm: $NVDISASM, else on the PATH, else build-bench/nvdisasm/ (made by
# `bash bench/sass_offline.sh --fetch`: Debian 12's non-free
# nvidia-cuda-toolkit 11.8 package, unpacked there, not installed; it adds
# the contrib and non-free components to apt's sources to find it).
# nvdisasm 11.8 decodes sm_90 but reads only the ELF header layout of CUDA
# 11: a cubin of ptxas 12.8 or later (OS/ABI 0x41, ABI version 8, the SM in
# bits 8..15 of e_flags) is disassembled from a copy whose header is
# rewritten to that layout (OS/ABI 0x33, version 7, e_flags sm | sm << 16 |
# EF_CUDA_64BIT_ADDRESS); the code sections are not touched. Static SASS
# covers every path (full and partial tiles, slow paths): compare two sets'
# mixes, and take executed counts from ncu on the device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
local_dir=$root/build-bench/nvdisasm

if [ "${1:-}" = --fetch ]; then
  src=/etc/apt/sources.list.d/qopt-nonfree.sources
  tmp=$(mktemp -d)
  # apt-cache may list the package from stale lists while no source serves it:
  # the download itself decides whether the non-free source is needed.
  if ! (cd "$tmp" && apt-get download -qq nvidia-cuda-toolkit 2>/dev/null); then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
    apt-get update -qq
    (cd "$tmp" && apt-get download -qq nvidia-cuda-toolkit)
  fi
  mkdir -p "$local_dir"
  dpkg -x "$tmp"/nvidia-cuda-toolkit_*.deb "$tmp/x"
  cp "$tmp/x/usr/bin/nvdisasm" "$local_dir/"
  rm -rf "$tmp"
  echo "nvdisasm in $local_dir"
  exit 0
fi

out=${1:?usage: sass_offline.sh OUTDIR FILE.ptx... | sass_offline.sh --fetch}
shift
[ $# -gt 0 ] || { echo "no PTX given" >&2; exit 1; }
nvdisasm=${NVDISASM:-$(command -v nvdisasm || true)}
[ -z "$nvdisasm" ] && [ -x "$local_dir/nvdisasm" ] && nvdisasm=$local_dir/nvdisasm
[ -n "$nvdisasm" ] || { echo "no nvdisasm: set NVDISASM or run: bash $0 --fetch" >&2; exit 1; }
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
[ -x "$ptxas" ] || { echo "no ptxas on the PATH or in /usr/local/cuda/bin" >&2; exit 1; }
arch=${SASS_ARCH:-sm_90}
mkdir -p "$out"
: > "$out/ptxas.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ptx in "$@"; do
  name=$(basename "$ptx" .ptx)
  usage=$("$ptxas" -arch="$arch" -O3 -v "$ptx" -o "$tmp/k.cubin" 2>&1 |
    grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' ')
  printf '%-32s %s\n' "$name" "$usage" >> "$out/ptxas.txt"
  if ! "$nvdisasm" -c "$tmp/k.cubin" > "$tmp/k.sass" 2>/dev/null; then
    python3 - "$tmp/k.cubin" <<'EOF'
import struct, sys
path = sys.argv[1]
elf = bytearray(open(path, "rb").read())
flags = struct.unpack_from("<I", elf, 0x30)[0]
if elf[7] == 0x41:  # CUDA 12.8+ header: the SM in bits 8..15
    sm = (flags >> 8) & 0xFF
    elf[7], elf[8] = 0x33, 7
    struct.pack_into("<I", elf, 0x30, sm | sm << 16 | 0x400)
open(path, "wb").write(elf)
EOF
    "$nvdisasm" -c "$tmp/k.cubin" > "$tmp/k.sass"
  fi
  # cuobjdump's kernel headers, which sass_mix.py splits on.
  sed -E 's/^\s*\.section\s+\.text\.([A-Za-z0-9_$]+),.*/\tFunction : \1/' \
    "$tmp/k.sass" > "$out/$name.sass"
done
echo "$# kernels in $out"
