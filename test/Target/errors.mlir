// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_70 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --mode=loose 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=cubin 2>&1 | FileCheck %s --check-prefix=CUBIN
// RUN: env QOPT_CUDA_PATH=%t.nocuda not qopt-opt %S/Inputs/flash-adamw.mlir --emit=cubin -o %t.cubin 2>&1 | FileCheck %s --check-prefix=NOPTXAS

// ARCH: qopt-opt: error: --arch must be sm_80 or newer (sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, ...), got 'sm_70'
// MODE: qopt-opt: error: --mode must be 'strict' or 'fast', got 'loose'
// CUBIN: qopt-opt: error: --emit=cubin and --emit=fatbin write binary data; give an output file with -o
// NOPTXAS: qopt-opt: error: cannot make a cubin: ptxas was not found

// PTX needs no CUDA toolkit: with a toolkit path that has no libdevice, the
// output is the same and nothing is reported.
// RUN: rm -rf %t.empty && mkdir -p %t.empty
// RUN: env CUDA_HOME=%t.empty qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -o %t.nocuda.ptx 2>&1 | count 0
// RUN: FileCheck %s --check-prefix=NOCUDA --input-file=%t.nocuda.ptx
// NOCUDA: .visible .entry FlashAdamW(

// Newer chips get the PTX ISA that knows them.
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_100 | FileCheck %s --check-prefix=SM100
// SM100: .version 8.6
// SM100: .target sm_100
