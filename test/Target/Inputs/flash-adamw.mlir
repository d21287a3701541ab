qopt.optimizer @FlashAdamW param "p" : bf16 master ecc_i8 grad "g" : bf16 {
  qopt.hyper @lr = 1.0e-3 : f64
  qopt.hyper @beta1 = 0.9 : f64
  qopt.hyper @beta2 = 0.999 : f64
  qopt.hyper @eps = 1.0e-8 : f64
  qopt.hyper @weight_decay = 0.01 : f64
  qopt.state @m : #qopt.group<storage = si8, group_size = 32, companding = softsign, scale = f16, rounding = half_up, divisor = absmax>
  qopt.state @v : #qopt.group<storage = ui8, group_size = 32, companding = sqrt, scale = f16, rounding = half_up, divisor = absmax>
  qopt.update {
    %g = qopt.load_grad : f32
    %p = qopt.load_param : f32
    %m = qopt.load_state @m : f32
    %v = qopt.load_state @v : f32
    %lr = qopt.hyper_value @lr : f64
    %b1 = qopt.hyper_value @beta1 : f64
    %b2 = qopt.hyper_value @beta2 : f64
    %eps = qopt.hyper_value @eps : f64
    %wd = qopt.hyper_value @weight_decay : f64
    %step = qopt.step_count : f64
    %one = arith.constant 1.0 : f64
    %b1f = arith.truncf %b1 : f64 to f32
    %t0 = arith.mulf %b1f, %m : f32
    %omb1 = arith.subf %one, %b1 : f64
    %omb1f = arith.truncf %omb1 : f64 to f32
    %t1 = arith.mulf %omb1f, %g : f32
    %mn = arith.addf %t0, %t1 : f32
    %b2f = arith.truncf %b2 : f64 to f32
    %t2 = arith.mulf %b2f, %v : f32
    %omb2 = arith.subf %one, %b2 : f64
    %omb2f = arith.truncf %omb2 : f64 to f32
    %t3 = arith.mulf %omb2f, %g : f32
    %t4 = arith.mulf %t3, %g : f32
    %vn = arith.addf %t2, %t4 : f32
    %pw1 = math.powf %b1, %step : f64
    %bc1 = arith.subf %one, %pw1 : f64
    %pw2 = math.powf %b2, %step : f64
    %bc2 = arith.subf %one, %pw2 : f64
    %bc2f = arith.truncf %bc2 : f64 to f32
    %t5 = arith.divf %vn, %bc2f : f32
    %t6 = math.sqrt %t5 : f32
    %epsf = arith.truncf %eps : f64 to f32
    %den = arith.addf %t6, %epsf : f32
    %lrwd = arith.mulf %lr, %wd : f64
    %decay = arith.subf %one, %lrwd : f64
    %decayf = arith.truncf %decay : f64 to f32
    %t7 = arith.mulf %p, %decayf : f32
    %lrbc = arith.divf %lr, %bc1 : f64
    %lrbcf = arith.truncf %lrbc : f64 to f32
    %t8 = arith.mulf %lrbcf, %mn : f32
    %t9 = arith.divf %t8, %den : f32
    %pn = arith.subf %t7, %t9 : f32
    qopt.store_state @m, %mn : f32
    qopt.store_state @v, %vn : f32
    qopt.store_param %pn : f32
  }
}
