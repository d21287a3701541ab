// RUN: qopt-opt %s --qopt-plan-kernel --convert-qopt-to-gpu -verify-diagnostics
// RUN: qopt-opt %s --qopt-plan-kernel=target=host --convert-qopt-to-host -verify-diagnostics

// A qopt.skip_if whose flag varies per element cannot skip a launch.
qopt.optimizer @O param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %z = arith.constant 0.0 : f32
    %flag = arith.cmpf ogt, %g, %z : f32
    %f = arith.select %flag, %g, %z : f32
    // expected-error @+1 {{needs a launch-uniform flag (a qopt.uniform or a constant); run qopt-outline-uniforms first}}
    qopt.skip_if %f : f32
    qopt.store_param %g : f32
  }
}
