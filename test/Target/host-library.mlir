// RUN: rm -rf %t && mkdir -p %t
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-library --elements-per-thread=16 -o %t/libflash.so
// RUN: FileCheck %s < %t/libflash.manifest.json
// RUN: llvm-nm -D --defined-only %t/libflash.so | FileCheck %s --check-prefix=SYMBOLS
// A host library and its manifest: the runtime dlopens "library" (relative
// to the manifest) and calls "symbol"; the launch shape is the GPU kernel's,
// so both backends walk the same tiles. No GPU binary or architecture.

// CHECK-NOT: "arch"
// CHECK-NOT: "binaries"
// CHECK: "binary_format": "host"
// CHECK: "host": {
// CHECK-NEXT: "library": "libflash.so",
// CHECK-NEXT: "symbol": "FlashAdamW_host"
// CHECK: "kernel": "FlashAdamW"
// CHECK: "launch": {
// CHECK: "elements_per_thread": 16,
// Two group states: 512 threads per block (chooseThreadsPerBlock).
// CHECK: "threads_per_block": 512,
// CHECK-NEXT: "tile_elements": 8192
// CHECK: "mode": "strict"

// SYMBOLS: T FlashAdamW_host
