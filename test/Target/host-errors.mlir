// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-object 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-object -O4 -o %t.o 2>&1 | FileCheck %s --check-prefix=LEVEL
// RUN: not env PATH=%t.nopath qopt-opt %S/Inputs/flash-adamw.mlir --emit=host-library -o %t.so 2>&1 | FileCheck %s --check-prefix=NOCXX

// OUTPUT: qopt-opt: error: --emit=host-object and --emit=host-library write binary data; give an output file with -o
// LEVEL: qopt-opt: error: -O must be 0 to 3, got 4
// NOCXX: qopt-opt: error: cannot make the host library: no C++ compiler driver 'c++' on PATH
