// RUN: qopt-opt %s --qopt-retype-param=type=f32 -split-input-file | FileCheck %s --check-prefix=F32
// RUN: qopt-opt %s --qopt-retype-param=type=f16 -split-input-file | FileCheck %s --check-prefix=F16
// RUN: qopt-opt %s --qopt-retype-param=type=bf16 -split-input-file | FileCheck %s --check-prefix=BF16
// RUN: not qopt-opt %s --qopt-retype-param=type=f64 -split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// An f32 parameter is its own master weight: the error bits go. A 16-bit one
// keeps them. A changed type renames the optimizer (the kernel); the update
// is untouched.
// F32: qopt.optimizer @FlashAdamW_f32 param "p" : f32 master none grad "g" : f32
// F16: qopt.optimizer @FlashAdamW_f16 param "p" : f16 master ecc_i8 grad "g" : f16
// BF16: qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16
// F32: qopt.update {
// F32-NEXT: %[[G:.+]] = qopt.load_grad : f32
// F32-NEXT: %[[P:.+]] = qopt.load_param : f32
// F32-NEXT: %[[S:.+]] = arith.subf %[[P]], %[[G]] : f32
// F32-NEXT: qopt.store_param %[[S]] : f32
qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %s = arith.subf %p, %g : f32
    qopt.store_param %s : f32
  }
}

// -----

// A mixed spec (f16 parameter, f32 gradient) takes the type for both.
// F32: qopt.optimizer @Mixed_f32 param "p" : f32 master none grad "g" : f32
// F16: qopt.optimizer @Mixed_f16 param "p" : f16 master ecc_i16 grad "g" : f16
// BF16: qopt.optimizer @Mixed_bf16 param "p" : bf16 master ecc_i16 grad "g" : bf16
qopt.optimizer @Mixed param "p" : f16 master ecc_i16 grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    qopt.store_param %g : f32
  }
}

// BAD: error: qopt-retype-param: type must be bf16, f16 or f32, got 'f64'
