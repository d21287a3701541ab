//===- RetypeParam.cpp - Another float type for the parameter -------------===//
//
// Compiles one spec for bf16, f16 and f32 parameters (qopt-opt --param-type):
// the parameter and the gradient take the new type, an f32 parameter drops
// its error-correction bits, and the kernel gets a name of its own.
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Transforms/Passes.h"

#include "llvm/ADT/StringSwitch.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_RETYPEPARAM
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {
struct RetypeParamPass : public qopt::impl::RetypeParamBase<RetypeParamPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    FloatType newType = llvm::StringSwitch<FloatType>(type)
                       .Case("bf16", BFloat16Type::get(ctx))
                       .Case("f16", Float16Type::get(ctx))
                       .Case("f32", Float32Type::get(ctx))
                       .Default(FloatType());
    if (!newType) {
      module.emitError("qopt-retype-param: type must be bf16, f16 or f32, "
                       "got '")
          << type << "'";
      return signalPassFailure();
    }
    for (OptimizerOp optimizer : module.getOps<OptimizerOp>()) {
      if (optimizer.getParamType() == newType &&
          optimizer.getGradType() == newType)
        continue;
      optimizer.setParamType(newType);
      optimizer.setGradType(newType);
      // An f32 parameter is its own master weight (numerics.md §3).
      if (newType.isF32() && hasErrorBits(optimizer.getMaster()))
        optimizer.setMaster(MasterFormat::none);
      // Stochastic rounding is defined for bf16: an f32 parameter needs
      // none, an f16 one rounds to nearest (numerics.md, "Stochastic
      // rounding").
      // A Kahan compensation is bf16's too: the others round to nearest.
      if (hasCompensation(optimizer.getMaster()))
        optimizer.setMaster(MasterFormat::none);
      if (optimizer.getMaster() == MasterFormat::stochastic) {
        optimizer.setMaster(MasterFormat::none);
        optimizer.getUpdate().walk([](StoreParamOp store) {
          store.getKeyMutable().clear();
        });
      }
      std::string name = (optimizer.getSymName() + "_" + type).str();
      if (SymbolTable::lookupSymbolIn(module, name)) {
        optimizer.emitError("qopt-retype-param: cannot rename @")
            << optimizer.getSymName() << " to @" << name
            << ": the module already has a symbol of that name";
        return signalPassFailure();
      }
      optimizer.setSymName(name);
    }
  }
};
} // namespace
