//===- SetOverflow.cpp - One overflow policy for every quantized state ----===//
//
// qopt-opt --overflow: every group and codebook state of every optimizer
// takes the policy given, whatever its spec wrote (docs/numerics.md,
// "Overflow").
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Transforms/Passes.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_SETOVERFLOW
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;

namespace {
struct SetOverflowPass : public qopt::impl::SetOverflowBase<SetOverflowPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<Overflow> overflow = symbolizeOverflow(policy);
    if (!overflow) {
      module.emitError("qopt-set-overflow: policy must be saturate or ieee, "
                       "got '")
          << policy << "'";
      return signalPassFailure();
    }
    for (OptimizerOp optimizer : module.getOps<OptimizerOp>())
      for (StateOp state : getStates(optimizer)) {
        Attribute scheme = state.getScheme();
        if (auto g = dyn_cast<GroupSchemeAttr>(scheme))
          state.setSchemeAttr(GroupSchemeAttr::get(
              g.getContext(), g.getStorage(), g.getGroupSize(),
              g.getCompanding(), g.getScale(), g.getRounding(),
              g.getDivisor(), *overflow));
        else if (auto c = dyn_cast<CodebookSchemeAttr>(scheme))
          state.setSchemeAttr(
              CodebookSchemeAttr::get(c.getContext(), c.getBlock(), *overflow));
      }
  }
};
} // namespace
