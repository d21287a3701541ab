// RUN: qopt-opt %s --qopt-outline-uniforms --qopt-plan-kernel=threads-per-block=100 --convert-qopt-to-gpu -split-input-file -verify-diagnostics

// expected-error @+1 {{threads-per-block must be a multiple of 32 in [32, 1024], got 100}}
qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %p = qopt.load_param : f32
    qopt.store_param %p : f32
  }
}
