// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx | FileCheck %s
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx | FileCheck %s --check-prefix=ROOT
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t.manifest.json
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --arch=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --mode=fast | FileCheck %s --check-prefix=FAST
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --elements-per-thread=16 | FileCheck %s --check-prefix=WIDE
// RUN: qopt-opt %S/Inputs/flash-adamw.mlir --emit=ptx --checked-rounding=false --guarded-ieee=false | FileCheck %s --check-prefix=IEEE

// The strict FlashAdamW kernel in PTX: the chip asked for, vector loads and
// stores of the streams (8 elements per thread by default, the fastest
// measured: 16-byte bf16 accesses),
// the group-32 absmax by a butterfly shuffle, IEEE square root and division,
// bf16 rounding to nearest even, and no contraction of the update into FMA.
// The state codes go through div.approx.ftz behind a rounding margin check
// (checked rounding, exact), the sqrt code from the update's own sqrt(v /
// bc2) times sqrt(bc2) (no sqrt.approx); the update's division and square
// root through ptxas's fast-path sequence (rcp/rsqrt.approx.ftz and fma.rn)
// behind one range check per thread (guarded IEEE, exact);
// --checked-rounding=false --guarded-ieee=false keep every operation one IEEE
// instruction.

// CHECK: .target sm_90
// CHECK: .visible .entry FlashAdamW(
// Two group states: 512 threads per block by default (chooseThreadsPerBlock).
// CHECK: .maxntid 512, 1, 1
// CHECK-DAG: ld.global.v4.b32
// CHECK-DAG: st.global.v4.b32
// CHECK-DAG: ld.global.v2.b32
// CHECK-DAG: st.global.v2.b32
// CHECK-DAG: shfl.sync.bfly.b32
// CHECK-DAG: sqrt.rn.f32
// CHECK-DAG: div.rn.f32
// CHECK-DAG: cvt.rn.bf16{{(x2)?}}.f32
// CHECK-DAG: cvt.rn.f16.f32
// CHECK-DAG: div.approx.ftz.f32
// CHECK-DAG: rcp.approx.ftz.f32
// CHECK-DAG: rsqrt.approx.ftz.f32
// CHECK-DAG: fma.rn.f32
// CHECK-NOT: sqrt.approx.f32

// No sqrt.approx from the compiler (printed with a tab before its operands);
// the fallback's inline sqrt.approx (for a bc2 outside [2^-40, 1]) only.
// ROOT: .visible .entry FlashAdamW(
// ROOT-NOT: {{[[:space:]]sqrt\.approx\.ftz\.f32[[:blank:]]{2}%}}
// ROOT: sqrt.approx.ftz.f32 %
// ROOT-NOT: {{[[:space:]]sqrt\.approx\.ftz\.f32[[:blank:]]{2}%}}
// ROOT: ret;

// IEEE: .visible .entry FlashAdamW(
// IEEE-NOT: sqrt.approx
// IEEE-NOT: div.approx
// IEEE-NOT: rcp.approx
// No contraction: no fma at all. The error bits' encode is the exact
// s = p * (Nmax * 2^mbits) (16256 = 127 * 2^7) rounded to the nearest
// integer by cvt.rni (EccExhaustiveTest).
// IEEE-NOT: fma.rn.f32
// IEEE: mul.rn.f32 [[S:%r[0-9]+]], {{%r[0-9]+}}, 0f467E0000;
// IEEE: cvt.rni.s32.f32 {{%r[0-9]+}}, [[S]];
// IEEE-NOT: fma.rn.f32

// Two states, a bf16 parameter: up to four waves of the resident blocks
// while each block keeps 128 tiles (chooseGridWaves, getGridMinTilesPerBlock).
// MANIFEST: "min_tiles_per_block": 128,
// MANIFEST: "waves": 4{{$}}

// SM80: .target sm_80

// FAST: .target sm_90
// FAST-DAG: sqrt.approx.f32
// FAST-DAG: fma.rn.f32

// WIDE: .visible .entry FlashAdamW(
// WIDE-DAG: ld.global.v4.b32
// WIDE-DAG: st.global.v4.b32
// WIDE-DAG: shfl.sync.bfly.b32
