// REQUIRES: ptxas
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -o %t.sm90.ptx
// RUN: %ptxas -arch=sm_90 %t.sm90.ptx -o %t.sm90.cubin
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_80 -o %t.sm80.ptx
// RUN: %ptxas -arch=sm_80 %t.sm80.ptx -o %t.sm80.cubin
// RUN: FileCheck %s --input-file=%t.sm90.manifest.json

// ptxas assembles the PTX of both chips; the manifest lands next to -o.
// CHECK: "format": "qopt-manifest"
// CHECK: "kernel": "FlashAdamW"
// CHECK: "descriptor_bytes": 72

// RUN: FileCheck %s --check-prefix=BIN --input-file=%t.sm90.manifest.json
// The manifest names the binary beside it, relative to itself.
// BIN: "binaries": [
// BIN-NEXT: {
// BIN-NEXT: "arch": "sm_90",
// BIN-NEXT: "format": "ptx",
// BIN-NEXT: "path": "ptxas.mlir.tmp.sm90.ptx"
