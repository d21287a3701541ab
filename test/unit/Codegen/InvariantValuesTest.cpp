//===- InvariantValuesTest.cpp - The update's launch and tensor values ----===//
//
// getInvariantValues on shipped specs after qopt-outline-uniforms: the ops
// whose value is the same on every lane of a launch (arithmetic of uniforms,
// constants and whole-step reductions) or of a tensor (its per-tensor
// reductions too), in update order, against the lists read off each spec's
// formulas by hand: FlashAdamWClip's clip coefficient min(1, max_grad_norm /
// (norm + 1e-6)); LAMB8bit's trust ratio of the tensor's norms ||p|| and
// ||u|| and its condition (with one launch flag); StableAdamW's RMS clip
// lr / max(1, sqrt(mean)); none in FlashAdamW, whose update reads no
// reduction.
//
//===----------------------------------------------------------------------===//

#include "qopt/Codegen/UpdateLowering.h"
#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Frontend/Frontend.h"
#include "qopt/Frontend/MLIRGen.h"
#include "qopt/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"

#include "gtest/gtest.h"

#include <string>
#include <utility>
#include <vector>

using namespace mlir;
using namespace mlir::qopt;

namespace {

using Scoped = std::vector<std::pair<std::string, UpdateScope>>;
constexpr UpdateScope L = UpdateScope::Launch, T = UpdateScope::Tensor;

/// The invariant ops of spec `path` (relative to specs/), in update order:
/// each op's name and scope.
Scoped invariantsOf(const std::string &path) {
  std::string file = std::string(QOPT_SPECS_DIR) + "/" + path;
  auto buffer = llvm::MemoryBuffer::getFile(file);
  if (!buffer) {
    ADD_FAILURE() << "cannot read " << file;
    return {};
  }
  frontend::ParsedSpec parsed =
      frontend::parseSpecString((*buffer)->getBuffer(), file);
  if (!parsed.spec) {
    ADD_FAILURE() << file << ": " << parsed.diagnostics.front().rendered;
    return {};
  }
  MLIRContext context;
  OwningOpRef<ModuleOp> module = frontend::mlirGen(context, *parsed.spec);
  if (!module) {
    ADD_FAILURE() << file << ": MLIRGen failed";
    return {};
  }
  PassManager pm(&context);
  pm.addPass(createOutlineUniforms());
  if (failed(pm.run(*module))) {
    ADD_FAILURE() << file << ": qopt-outline-uniforms failed";
    return {};
  }
  OptimizerOp optimizer = *module->getOps<OptimizerOp>().begin();
  llvm::DenseMap<Value, UpdateScope> scopes = getInvariantValues(optimizer);
  Scoped out;
  for (Operation &op : optimizer.getUpdate().getBody().front())
    if (op.getNumResults() == 1)
      if (auto it = scopes.find(op.getResult(0)); it != scopes.end())
        out.push_back({op.getName().getStringRef().str(), it->second});
  EXPECT_EQ(out.size(), scopes.size()) << "a scope for a value of no op";
  return out;
}

TEST(InvariantValuesTest, FlashAdamWClipsByOneValueOfTheLaunch) {
  Scoped want = {{"arith.addf", L}, {"arith.divf", L}, {"arith.minimumf", L}};
  EXPECT_EQ(invariantsOf("reductions/flash_adamw_clip.qopt"), want);
}

TEST(InvariantValuesTest, LambTrustRatioIsOneValueOfTheTensor) {
  // a uniform times ||p||, ||u|| > that, a uniform != 0 (the launch's),
  // both, ||p||'s product / ||u||, the select of the ratio.
  Scoped want = {{"arith.mulf", T},  {"arith.cmpf", T}, {"arith.cmpf", L},
                 {"arith.andi", T},  {"arith.divf", T}, {"arith.select", T}};
  EXPECT_EQ(invariantsOf("reductions/lamb8bit.qopt"), want);
}

TEST(InvariantValuesTest, StableAdamWClipIsOneValueOfTheTensor) {
  // sqrt(mean), > 1, its max with 1, a uniform / that, times a uniform,
  // 1 - that.
  Scoped want = {{"math.sqrt", T},  {"arith.cmpf", T}, {"arith.select", T},
                 {"arith.divf", T}, {"arith.mulf", T}, {"arith.subf", T}};
  EXPECT_EQ(invariantsOf("reductions/stable_adamw.qopt"), want);
}

TEST(InvariantValuesTest, FlashAdamWHasNone) {
  EXPECT_EQ(invariantsOf("flash_adamw.qopt"), Scoped{});
}

} // namespace
