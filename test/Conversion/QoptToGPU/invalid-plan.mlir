// RUN: qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-gpu -verify-diagnostics
// RUN: not qopt-opt %s --qopt-outline-uniforms --convert-qopt-to-host 2>&1 | FileCheck %s --check-prefix=HOST

// The lowerings follow the launch plan and choose none of their own: without
// qopt-plan-kernel they stop.
// HOST: needs a launch plan (qopt-plan-kernel target=host) before convert-qopt-to-host

// expected-error @+1 {{needs a launch plan (qopt-plan-kernel) before convert-qopt-to-gpu}}
qopt.optimizer @Unplanned param "p" : f32 master none grad "g" : f32 {
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %pn = arith.subf %p, %g : f32
    qopt.store_param %pn : f32
  }
}
