// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_70 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_99 2>&1 | FileCheck %s --check-prefix=ARCH99
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_80a 2>&1 | FileCheck %s --check-prefix=ARCH80A
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-library --host-cpu=bogus -o %t.so 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --mode=loose 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -O7 2>&1 | FileCheck %s --check-prefix=OLEVEL
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-llvm -O=4 2>&1 | FileCheck %s --check-prefix=OLEVEL4
// OLEVEL: qopt-opt: error: -O must be 0 to 3, got 7
// OLEVEL4: qopt-opt: error: -O must be 0 to 3, got 4
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --threads-per-block=-1 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: qopt-opt: error: --threads-per-block and --elements-per-thread take 0 (chosen) or a positive number, got -1 and 0
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --tile-claims-static-eighths=9 2>&1 | FileCheck %s --check-prefix=EIGHTHS
// EIGHTHS: qopt-opt: error: --tile-claims takes -1 (chosen), 0 (none) or a positive number, and --tile-claims-static-eighths 0 (chosen) or 1 to 8; got -1 and 9
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --tile-claims=-7 2>&1 | FileCheck %s --check-prefix=CLAIMS
// CLAIMS: qopt-opt: error: --tile-claims takes -1 (chosen), 0 (none) or a positive number, and --tile-claims-static-eighths 0 (chosen) or 1 to 8; got -7 and 0
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=cubin 2>&1 | FileCheck %s --check-prefix=CUBIN
// RUN: env QOPT_CUDA_PATH=%t.nocuda not qopt-opt %S/Inputs/flash-adamw.mlir --emit=cubin -o %t.cubin 2>&1 | FileCheck %s --check-prefix=NOPTXAS

// ARCH: qopt-opt: error: --arch must be a chip LLVM's NVPTX backend knows, sm_80 or newer (sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, ...), got 'sm_70'
// Chips that look right but that LLVM does not know: refused, not an abort in
// instruction selection.
// ARCH99: qopt-opt: error: --arch must be a chip LLVM's NVPTX backend knows, {{.*}} got 'sm_99'
// ARCH80A: qopt-opt: error: --arch must be a chip LLVM's NVPTX backend knows, {{.*}} got 'sm_80a'
// CPU: error: --host-cpu 'bogus' is not a CPU LLVM knows for
// CPU-NOT: LLVM ERROR
// MODE: qopt-opt: error: --mode must be 'strict' or 'fast', got 'loose'

// The output or the manifest never replaces the input.
// RUN: cp %S/Inputs/flash-adamw.mlir %t.in.mlir
// RUN: not qopt-opt %t.in.mlir --emit=ptx -o %t.in.mlir 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: not qopt-opt %t.in.mlir --emit=ptx -o %t.k.ptx --manifest=%t.in.mlir 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: cmp %t.in.mlir %S/Inputs/flash-adamw.mlir
// RUN: not qopt-opt %t.in.mlir --emit=ptx -o %t.k.ptx --manifest=%t.k.ptx 2>&1 | FileCheck %s --check-prefix=BOTH
// SELF: qopt-opt: error: '{{.*}}in.mlir' is the input; refusing to write over it
// BOTH: qopt-opt: error: the manifest and the output are both '{{.*}}k.ptx'; give -o or --manifest another path
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
