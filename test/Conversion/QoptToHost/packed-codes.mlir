// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="target=host elements-per-thread=8" --convert-qopt-to-host | FileCheck %s

// Packed 4-bit codes (docs/abi.md) and stochastic rounding (numerics.md): a
// chunk of 8 lanes loads 4 code bytes at its element index / 2 (masked by the
// even lanes' bits in a partial chunk) and splits each byte into its low
// nibble (the even element) and high nibble; the bf16 parameter is keyed by
// the seed and the step (two uniforms converted to integers) and the global
// index tile * 4096 + offset, one Philox4x32-10 block (20 32x32-bit products)
// for the chunk's 8 lanes, bits(x) + r shifted right by 16, NaN as 0x7FC0;
// requantized codes are the count of table midpoints below x / scale, found
// by a binary search (four compares, each probe's midpoint selected by the
// bits found before it), the lanes past the tensor's end zeroed, packed two a
// byte and stored masked.

// CHECK-LABEL: llvm.func @Packed_host(
// CHECK: %[[BYTE:.+]] = arith.divui %{{.+}}, %c2_i64 : i64
// CHECK: %[[AT:.+]] = llvm.getelementptr %{{.+}}[%[[BYTE]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK: %[[EVEN:.+]] = vector.shuffle %[[MASK:.+]], %[[MASK]] [0, 2, 4, 6] : vector<8xi1>, vector<8xi1>
// CHECK: llvm.load %[[AT]] {alignment = 4 : i64} : !llvm.ptr -> vector<4xi8>
// CHECK: llvm.intr.masked.load %[[AT]], %[[EVEN]], %{{.+}} {alignment = 4 : i32} : (!llvm.ptr, vector<4xi1>, vector<4xi8>) -> vector<4xi8>
// CHECK: %[[LO:.+]] = arith.andi %{{.+}}, %{{.+}} : vector<4xi8>
// CHECK: %[[HI:.+]] = arith.shrui %{{.+}}, %{{.+}} : vector<4xi8>
// CHECK: vector.shuffle %[[LO]], %[[HI]] [0, 4, 1, 5, 2, 6, 3, 7] : vector<4xi8>, vector<4xi8>
// CHECK: arith.constant 4096 : i64
// CHECK: arith.fptoui %{{.+}} : f32 to i32
// CHECK: arith.fptoui %{{.+}} : f32 to i32
// CHECK-COUNT-20: arith.mului_extended
// CHECK-NOT: arith.mului_extended
// CHECK: vector.from_elements {{.+}} : vector<8xi32>
// CHECK: arith.addi %{{.+}}, %{{.+}} : vector<8xi32>
// CHECK: arith.shrui %{{.+}}, %{{.+}} : vector<8xi32>
// CHECK: arith.trunci %{{.+}} : vector<8xi32> to vector<8xi16>
// CHECK: arith.constant dense<32704> : vector<8xi16>
// CHECK: scf.for
// CHECK:   arith.divf %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK-COUNT-4: arith.cmpf olt
// CHECK-NOT: arith.cmpf olt
// CHECK:   arith.cmpf uno
// CHECK:   vector.shuffle %{{.+}}, %{{.+}} [0, 2, 4, 6] : vector<8xi8>, vector<8xi8>
// CHECK:   vector.shuffle %{{.+}}, %{{.+}} [1, 3, 5, 7] : vector<8xi8>, vector<8xi8>
// CHECK:   llvm.intr.masked.store %{{.+}}, %{{.+}}, %{{.+}} {alignment = 4 : i32} : vector<4xi8>, vector<4xi1> into !llvm.ptr

qopt.optimizer @Packed param "p" : bf16 master stochastic grad "g" : bf16 {
  qopt.hyper @seed = 7.0 : f64
  qopt.state @m : #qopt.group<storage = si4, group_size = 128, companding = dynamic, scale = f32, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %mn = arith.addf %m, %g : f32
    %pn = arith.subf %p, %mn : f32
    qopt.store_state @m, %mn : f32
    %s = qopt.hyper_value @seed : f64
    %sf = arith.truncf %s : f64 to f32
    %t = qopt.step_count : f64
    %tf = arith.truncf %t : f64 to f32
    qopt.store_param %pn key(%sf, %tf) : f32
  }
}

// The (k + 1) / 16 table in arithmetic: the entry (code + 1) * 0.0625, and
// the code ceil(16 c - 1.5) from 16 c clamped to [1, 16] (NaN to 1), the
// rounded sum with 1.5 * 2^23 plus one where it went down; no search.

// CHECK-LABEL: llvm.func @Sixteenths_host(
// CHECK: arith.uitofp %{{.+}} : vector<8xi8> to vector<8xf32>
// CHECK: arith.constant dense<6.250000e-02> : vector<8xf32>
// CHECK: scf.for
// CHECK:   arith.divf %{{.+}}, %{{.+}} : vector<8xf32>
// CHECK:   llvm.call_intrinsic "llvm.maxnum"
// CHECK:   llvm.call_intrinsic "llvm.minnum"
// CHECK:   arith.constant dense<0x4B400000> : vector<8xf32>
// CHECK:   arith.cmpf olt
// CHECK-NOT: arith.cmpf olt
// CHECK:   arith.bitcast %{{.+}} : vector<8xf32> to vector<8xi32>

qopt.optimizer @Sixteenths param "p" : f32 master none grad "g" : f32 {
  qopt.state @v : #qopt.group<storage = ui4, group_size = 128, companding = nonzero, scale = f32, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %v = qopt.load_state @v : f32
    %vn = arith.addf %v, %g : f32
    %pn = arith.subf %p, %vn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}
