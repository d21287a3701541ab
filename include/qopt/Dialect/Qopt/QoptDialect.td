//===- QoptDialect.td - The qopt dialect -------------------*- tablegen -*-===//
//
// The qopt dialect describes one fused optimizer step: the parameter and its
// master-weight format, the gradient, each state and its storage scheme, and the
// update as arith/math operations between loads and stores of those streams.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTDIALECT_TD
#define QOPT_DIALECT_QOPT_QOPTDIALECT_TD

include "mlir/IR/OpBase.td"

def Qopt_Dialect : Dialect {
  let name = "qopt";
  let summary = "Fused optimizer steps with quantized state";
  let description = [{
    A `qopt.optimizer` holds the declarations of one optimizer (hyperparameters,
    states and their schemes) and its `qopt.update` region. Inside the update,
    `qopt.load_*` operations produce float32 values per element (dequantized
    states, the reconstructed master weight, the gradient), upstream `arith` and
    `math` operations compute, and `qopt.store_*` operations requantize and store.
    Values of type f64 and i1 that depend only on hyperparameters and the step
    are launch-uniform; `qopt-outline-uniforms` moves them to a `qopt.uniforms`
    region that the runtime evaluates on the host.
  }];
  let cppNamespace = "::mlir::qopt";
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
}

class Qopt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Qopt_Dialect, mnemonic, traits>;

#endif // QOPT_DIALECT_QOPT_QOPTDIALECT_TD
