// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=8 --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=elements-per-thread=8 --convert-qopt-to-gpu="checked-rounding=false guarded-ieee=false" | FileCheck %s --check-prefix=IEEE

// Checked rounding for seed 003's scheme: the divisor is the stored (float16)
// scale, a zero scale taken as 1, and codes round half to even. The fast code
// is the integer nearest t' behind the same margin check as the authors'
// scheme: away from half integers it equals roundeven(t) (lib/Codegen/GroupQuantization.cpp). A lane that
// fails takes the IEEE chain, which rounds half to even and clamps.

// CHECK-LABEL: gpu.func @Seed003
// The group absmax, rounded to the stored float16 scale; a zero scale is 1.
// CHECK: gpu.shuffle xor
// CHECK: %[[S16:.+]] = arith.truncf %{{.+}} : f32 to f16
// CHECK: %[[S:.+]] = arith.extf %[[S16]] : f16 to f32
// The divisor once (the group's), then its lanes.
// CHECK: %[[ZERO:.+]] = arith.cmpf oeq, %[[S]], %{{.+}} : f32
// CHECK: %[[DS:.+]] = arith.select %[[ZERO]], %{{.+}}, %[[S]] : f32
// CHECK: %[[DIV:.+]] = vector.broadcast %[[DS]] : f32 to vector<8xf32>
// 2y / (1 + |y|) with y = m / divisor as one approximate quotient, 254 m /
// (divisor + |m|).
// CHECK: %[[DEN:.+]] = arith.addf %[[DIV]], %{{.+}} : vector<8xf32>
// CHECK: vector.extract %[[DEN]][0]
// CHECK-COUNT-8: llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"
// CHECK: arith.constant dense<2.540000e+02> : vector<8xf32>
// The nearest integer as RN(t' + 1.5 * 2^23), t' unrounded in an FMA: the
// biased sum B, whose low byte is the code.
// CHECK-NEXT: arith.constant dense<0x4B400000>
// CHECK-NEXT: %[[B:.+]] = llvm.intr.fma(%{{.+}}, %{{.+}}, %{{.+}})
// CHECK-NOT: add.rm
// The thread's check (|d| < 1/2 - 2^-12 on every lane, the code range
// [-127, 127] widened by 1/2), then the failing lanes one at a time.
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK: scf.if %{{.+}} -> (vector<8xf32>) {
// CHECK-NEXT: scf.yield %[[B]] : vector<8xf32>
// CHECK: scf.while
// CHECK: "llvm.intr.cttz"
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK: llvm.call_intrinsic "llvm.roundeven"(%{{.+}}) : (f32) -> f32
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf olt
// CHECK: gpu.return

// IEEE-NOT: div.approx
// IEEE-NOT: llvm.floor
// IEEE-NOT: add.rm
// IEEE: arith.divf %{{.+}}, %{{.+}} : vector<8xf32>
// IEEE: llvm.call_intrinsic "llvm.roundeven"(%{{.+}}) : (vector<8xf32>) -> vector<8xf32>
// IEEE: gpu.return

qopt.optimizer @Seed003 param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_even, divisor = stored_scale>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_param %pn : f32
  }
}
