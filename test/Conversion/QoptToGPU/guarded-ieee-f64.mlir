// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="tile-claims=0 elements-per-thread=16" --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --emit=ptx | FileCheck %s --check-prefix=PTX

// The guarded sequences are f32 instructions': an f64 division in an update
// stays one IEEE division, and compiles (LLVM then narrows this one, of two
// widened floats, to div.rn.f32: the same value).

// CHECK-LABEL: gpu.func @Wide
// CHECK-NOT: llvm.nvvm.rcp.approx
// CHECK: arith.divf %{{.+}}, %{{.+}} : vector<16xf64>
// CHECK-NOT: llvm.inline_asm
// CHECK: gpu.return

// PTX: .visible .entry Wide(
// PTX-NOT: rcp.approx
// PTX: div.rn

qopt.optimizer @Wide param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %g64 = arith.extf %g : f32 to f64
    %p64 = arith.extf %p : f32 to f64
    %q = arith.divf %g64, %p64 : f64
    %u = arith.truncf %q : f64 to f32
    %pn = arith.subf %p, %u : f32
    qopt.store_param %pn : f32
  }
}
