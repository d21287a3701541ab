// RUN: rm -rf %t && mkdir -p %t
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-library --elements-per-thread=16 -o %t/libflash.so
// RUN: FileCheck %s < %t/libflash.manifest.json
// RUN: llvm-nm -D --defined-only %t/libflash.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: %python %S/Inputs/embedded-manifest.py %t/libflash.so %t/libflash.manifest.json | FileCheck %s --check-prefix=EMBEDDED
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-llvm --elements-per-thread=16 | FileCheck %s --check-prefix=LLVM
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

// The library carries the manifest written beside it (compact JSON, a NUL
// after it), which the runtime compares with the manifest it is given.
// SYMBOLS: R FlashAdamW_host_manifest
// EMBEDDED: FlashAdamW_host_manifest: {"args":[
// EMBEDDED-SAME: "host":{"library":"libflash.so","symbol":"FlashAdamW_host"}
// EMBEDDED-SAME: "tile_elements":8192
// LLVM: @FlashAdamW_host_manifest = constant [{{[0-9]+}} x i8] c"{\22args\22:
// LLVM-SAME: \22host\22:{\22library\22:\22FlashAdamW.so\22,\22symbol\22:\22FlashAdamW_host\22}
// LLVM-SAME: \00", align 1
