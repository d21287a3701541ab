// RUN: rm -rf %t && mkdir -p %t/lib %t/man
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -o %t/flash.ptx
// RUN: FileCheck %s < %t/flash.ptx
// RUN: %python %S/Inputs/ptx-manifest.py %t/flash.ptx %t/flash.manifest.json | FileCheck %s --check-prefix=EMBEDDED
// RUN: FileCheck %s --check-prefix=WRITTEN < %t/flash.manifest.json
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --elements-per-thread=16 --manifest=%t/man/wide.manifest.json -o %t/lib/wide.ptx
// RUN: %python %S/Inputs/ptx-manifest.py %t/lib/wide.ptx %t/man/wide.manifest.json | FileCheck %s --check-prefix=WIDE
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -o %t/other-name.ptx
// RUN: cmp %t/flash.ptx %t/other-name.ptx
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx | FileCheck %s --check-prefix=STDOUT

// The PTX carries the manifest written beside it (docs/abi.md, "The GPU
// module's manifest"): a read-only byte array in global memory, visible to
// cuModuleGetGlobal (NVPTX declares it before the kernel), holding the
// compact JSON and a NUL (NVPTX leaves the trailing zero to the array's
// size); the kernel does not refer to it.
// CHECK: .visible .global .align 1 .b8 FlashAdamW_manifest[{{[0-9]+}}] = {123, 34, 97, 114, 99, 104, 34, 58,
// CHECK-SAME: , 49, 125};
// CHECK: .visible .entry FlashAdamW(
// CHECK-NOT: FlashAdamW_manifest

// The manifest, less where the files are.
// EMBEDDED: FlashAdamW_manifest: {"arch":"sm_90","args":["descriptors","tile_map","num_tiles","uniforms","numerics_counters"],"binary_format":"ptx"
// EMBEDDED-SAME: "kernel":"FlashAdamW"
// EMBEDDED-SAME: "launch":{"descriptor_bytes":72,"elements_per_thread":8,
// EMBEDDED-SAME: "threads_per_block":512,"tile_elements":4096
// EMBEDDED-NOT: binaries
// WRITTEN: "binaries": [
// WRITTEN: "path": "flash.ptx"

// WIDE: FlashAdamW_manifest: {
// WIDE-SAME: "elements_per_thread":16,

// The PTX does not depend on its file's name (the cmp above); to stdout no
// manifest is written and the PTX holds the one that would be.
// STDOUT: .b8 FlashAdamW_manifest[{{[0-9]+}}] = {123, 34, 97, 114, 99, 104, 34, 58,
