// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=cubin -o %t/flash.cubin
// RUN: llvm-nm %t/flash.cubin | FileCheck %s
// RUN: llvm-objdump -s -j .nv.global.init %t/flash.cubin | FileCheck %s --check-prefix=DATA

// ptxas keeps the PTX's manifest global in the cubin (a data object
// cuModuleGetGlobal finds), with the compact JSON as its initial value.
// CHECK: FlashAdamW
// CHECK: FlashAdamW_manifest
// DATA: Contents of section .nv.global.init:
// DATA-NEXT: 0000 {{.*}} {"arch":"sm_90",
// DATA-NEXT: 0010 {{.*}} "args":["descrip
