// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu | FileCheck %s
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu='checked-rounding=false guarded-ieee=false' | FileCheck %s --check-prefix=IEEE
// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel --convert-qopt-to-gpu=mode=fast | FileCheck %s --check-prefix=FAST

// Checked rounding (strict mode, the default): a softsign and a sqrt code are
// computed through div.approx.ftz / sqrt.approx.ftz (softsign's two
// quotients as one, 254 u / (s + |u|); the sqrt code's 255 / s once per
// thread; t' = p * k unrounded), kept where every lane's d = t' - round(t')
// has |d| < 1/2 - 2^-12 (round(t') from RN(t' + 1.5 * 2^23), d, each an FMA:
// away from half integers round(t') is floor(t' + 0.5)), every lane's t'
// lies within
// the code range widened by 1/2 (so the code needs no clamp), and the
// divisor is in [2^-40, 2^100] (below 65504 for a saturating f16 scale: a
// saturated group takes the IEEE chain); otherwise each lane keeps its code where its
// own check holds, and a loop gives the lanes that fail, one at a time, the
// IEEE chain and its clamp. A linear code is checked the same way (t' = x *
// (127 / d)).

// CHECK-LABEL: gpu.func @Codes
// The softsign code (state m): 2z / (1 + |z|) with z = m / s as one
// approximate quotient, 254 m / (s + |m|).
// CHECK: arith.constant 9.99999996E-13 : f32
// CHECK: %[[ABS:.+]] = llvm.call_intrinsic "llvm.fabs"(%{{.+}}) : (vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT: %[[DEN:.+]] = arith.addf %{{.+}}, %[[ABS]] : vector<8xf32>
// CHECK: vector.extract %[[DEN]][0] : f32 from vector<8xf32>
// CHECK-COUNT-8: llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"
// CHECK-NEXT: %[[QUOT:.+]] = vector.insert %{{.+}}, %{{.+}} [7] : f32 into vector<8xf32>
// CHECK-NEXT: %[[C254:.+]] = arith.constant dense<2.540000e+02> : vector<8xf32>
// The nearest integer to t' = quotient * 254 as RN(t' + 1.5 * 2^23) - 1.5 *
// 2^23, t' unrounded in an FMA: the biased sum B is the code in its low bits.
// CHECK-NEXT: %[[BIAS:.+]] = arith.constant dense<0x4B400000> : vector<8xf32>
// CHECK-NEXT: %[[B:.+]] = llvm.intr.fma(%[[QUOT]], %[[C254]], %[[BIAS]])
// CHECK-NOT: llvm.nvvm.add.rm
// CHECK: %[[Q:.+]] = arith.subf %[[B]], %cst{{.*}} : vector<8xf32>
// The distance d = t' - q, also one FMA.
// CHECK-NEXT: %[[NQ:.+]] = arith.negf %[[Q]]
// CHECK-NEXT: %[[D:.+]] = llvm.intr.fma(%[[QUOT]], %[[C254]], %[[NQ]])
// The lanes' largest |d|, then the divisor's range (once: it is the
// group's), in one predicate. With the absmax as divisor |t'| is within the
// code range by itself: no maximum of |t'|.
// The maximum is a pairwise tree over the lanes (depth 3, 7 maxima).
// CHECK: vector.extract %[[D]][7] : f32 from vector<8xf32>
// CHECK-COUNT-7: arith.maximumf
// CHECK-NEXT: arith.constant
// CHECK-NEXT: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK-NOT: arith.maximumf
// Below 65504 (the saturated scale, docs/numerics.md "Overflow"), at least 2^-40.
// CHECK: arith.constant 6.550400e+04 : f32
// CHECK-NEXT: arith.cmpf olt, %{{.+}}, %{{.+}} : f32
// CHECK: arith.cmpf oge, %{{.+}}, %{{.+}} : f32
// CHECK: %[[ALL:.+]] = arith.andi %{{.+}}, %{{.+}} : i1
// CHECK: scf.if %[[ALL]] -> (vector<8xf32>) {
// CHECK-NEXT: scf.yield %[[B]] : vector<8xf32>
// CHECK-NEXT: } else {
// Some lane failed: a mask of the lanes whose own check fails (or all, for a
// divisor out of range), then a loop that gives the lowest such lane the IEEE
// chain (div.rn as inline PTX, which LLVM cannot hoist above the branch) and
// its clamp to [-127, 127], NaN to 0, and puts the code in its place.
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : vector<8xf32>
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : vector<8xf32>
// CHECK: arith.select %{{.+}}, %{{.+}}, %c128_i32{{.*}} : i32
// CHECK: %[[LOOP:.+]]:2 = scf.while (%[[MASK:.+]] = %{{.+}}, %{{.+}} = %[[B]]) : (i32, vector<8xf32>) -> (i32, vector<8xf32>) {
// CHECK: arith.cmpi ne, %[[MASK]], %{{.+}} : i32
// CHECK: scf.condition
// CHECK: } do {
// CHECK: llvm.intr.cttz
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: llvm.call_intrinsic "llvm.floor"
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf olt
// CHECK: arith.cmpf uno
// CHECK: arith.addf %{{.+}}, %cst{{.*}} : f32
// CHECK: arith.select %{{.+}}, %{{.+}}, %{{.+}} : vector<8xi1>, vector<8xf32>
// CHECK: scf.yield
// CHECK: }
// CHECK-NEXT: scf.yield %[[LOOP]]#1 : vector<8xf32>
// CHECK-NEXT: }
// The code is the low byte of the biased sum's pattern: no conversion.
// CHECK-NEXT: arith.bitcast %{{.+}} : vector<8xf32> to vector<8xi32>
// CHECK-NEXT: arith.trunci %{{.+}} : vector<8xi32> to vector<8xi8>
// The sqrt code's absmax (state v): one square root of the lanes' maximum.
// v + g * g is nonnegative or NaN (a dequantized v is u * u): the lanes'
// maximum as they are, no select of NaN for a negative lane.
// CHECK-NOT: arith.constant dense<0x7FC00000> : vector<8xf32>
// CHECK: gpu.shuffle xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%{{.+}}) : (f32) -> f32
// The sqrt code: sqrt.approx.ftz per lane times 255 / s, one approximate
// quotient for the thread; the boundary check alone (the absmax divisor
// keeps t' in [0, 255.5)), the IEEE chain behind it.
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.approx.ftz.f"
// CHECK: %[[K:.+]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%{{.+}}, %{{.+}}) : (f32, f32) -> f32
// CHECK-NOT: llvm.nvvm.div.approx
// CHECK: %[[KV:.+]] = vector.broadcast %[[K]] : f32 to vector<8xf32>
// CHECK-NEXT: arith.constant dense<0x4B400000>
// CHECK-NEXT: llvm.intr.fma(%{{.+}}, %[[KV]], %{{.+}})
// CHECK: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK-NEXT: vector.extract
// CHECK-NEXT: llvm.call_intrinsic "llvm.fabs"
// CHECK-NEXT: arith.constant 6.550400e+04 : f32
// CHECK-NEXT: arith.cmpf olt
// CHECK-NOT: arith.cmpf olt, %{{.+}}, %cst{{.*}} : f32
// CHECK: scf.if
// CHECK: } else {
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;"
// CHECK: llvm.inline_asm "div.rn.f32 $0, $1, $2;"
// CHECK: vector.insert %{{.+}}, %{{.+}} [7] : f32 into vector<8xf32>
// The linear code (state w), checked as the others: t' = w * (127 / d),
// the quotient once per thread, then the biased sum and the distance.
// CHECK: %[[KW:.+]] = llvm.call_intrinsic "llvm.nvvm.div.approx.ftz.f"(%{{.+}}, %{{.+}}) : (f32, f32) -> f32
// CHECK-NEXT: %[[KWV:.+]] = vector.broadcast %[[KW]] : f32 to vector<8xf32>
// CHECK-NEXT: arith.constant dense<0x4B400000>
// CHECK-NEXT: llvm.intr.fma(%{{.+}}, %[[KWV]], %{{.+}})
// The sqrt code of y - g * g (state y), of unknown sign: a negative
// lane turned into NaN before the lanes' maximum.
// CHECK: %[[NAN:.+]] = arith.constant dense<0x7FC00000> : vector<8xf32>
// CHECK: %[[NEG:.+]] = arith.cmpf olt, %[[Y:.+]], %{{.+}} : vector<8xf32>
// CHECK: arith.select %[[NEG]], %[[NAN]], %[[Y]] : vector<8xi1>, vector<8xf32>
// CHECK: gpu.shuffle xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.sqrt.rn.f"(%{{.+}}) : (f32) -> f32
// Up to the full tile's stores (the partial tile's body follows).
// CHECK: llvm.store %{{.+}}, %{{.+}} {alignment = 8 : i64} : vector<8xi8>, !llvm.ptr<1>
// CHECK: gpu.return

// IEEE-NOT: llvm.nvvm.div.approx
// IEEE-NOT: llvm.nvvm.sqrt.approx
// IEEE-NOT: scf.if %{{.+}} -> (vector<8xf32>)
// IEEE: gpu.return

// Fast mode has no check: its codes come from the approximate chain alone.
// FAST-NOT: scf.if %{{.+}} -> (vector<8xf32>)
// FAST: gpu.return

qopt.optimizer @Codes param "p" : f32 master none grad "g" : f32 {
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @w : #qopt.group<storage = si8, group_size = 32, companding = linear, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @y : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %w = qopt.load_state @w : f32
    %y = qopt.load_state @y : f32
    %mn = arith.addf %m, %g : f32
    %g2 = arith.mulf %g, %g : f32
    %vn = arith.addf %v, %g2 : f32
    %wn = arith.subf %w, %g : f32
    %yn = arith.subf %y, %g2 : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_state @w, %wn : f32
    qopt.store_state @y, %yn : f32
    qopt.store_param %pn : f32
  }
}
