// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel="threads-per-block=96 elements-per-thread=4" --convert-qopt-to-gpu -verify-diagnostics

// A tile of 96 threads x 4 elements cannot hold whole blocks of 256.
qopt.optimizer @O param "p" : bf16 master none grad "g" : bf16 {
  // expected-error @+1 {{group or block of 256 elements does not divide the tile of 384 elements (96 threads of 4)}}
  qopt.state @m : #qopt.codebook<block = 256>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    qopt.store_state @m, %g : f32
    qopt.store_param %p : f32
  }
}
