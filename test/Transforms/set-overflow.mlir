// RUN: qopt-opt %s --qopt-set-overflow=policy=ieee | FileCheck %s --check-prefix=IEEE
// RUN: qopt-opt %s --qopt-set-overflow=policy=saturate | FileCheck %s --check-prefix=SAT
// RUN: not qopt-opt %s --qopt-set-overflow=policy=wrap 2>&1 | FileCheck %s --check-prefix=BAD

// Every group and codebook state takes the policy, whatever it had; plain
// states, the name and the update do not change.
// IEEE: qopt.optimizer @Mixed param "p" : bf16 master ecc_i8 grad "g" : bf16
// IEEE-NEXT: qopt.state @a : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax, overflow = ieee>
// IEEE-NEXT: qopt.state @b : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f32, rounding = half_even, divisor = stored_scale, overflow = ieee>
// IEEE-NEXT: qopt.state @c : #qopt.codebook<block = 256, overflow = ieee>
// IEEE-NEXT: qopt.state @d : #qopt.plain<storage = f32>
// SAT: qopt.optimizer @Mixed param "p" : bf16 master ecc_i8 grad "g" : bf16
// SAT-NEXT: qopt.state @a : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
// SAT-NEXT: qopt.state @b : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f32, rounding = half_even, divisor = stored_scale>
// SAT-NEXT: qopt.state @c : #qopt.codebook<block = 256>
// SAT-NEXT: qopt.state @d : #qopt.plain<storage = f32>
qopt.optimizer @Mixed param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  qopt.state @a : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @b : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f32, rounding = half_even, divisor = stored_scale, overflow = ieee>
  qopt.state @c : #qopt.codebook<block = 256, overflow = ieee>
  qopt.state @d : #qopt.plain<storage = f32>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    qopt.store_state @a, %g : f32
    qopt.store_state @b, %g : f32
    qopt.store_state @c, %g : f32
    qopt.store_state @d, %g : f32
    qopt.store_param %p : f32
  }
}

// BAD: error: qopt-set-overflow: policy must be saturate or ieee, got 'wrap'
