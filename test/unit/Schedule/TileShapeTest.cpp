//===- TileShapeTest.cpp - The launch shape's fallback --------------------===//
//
// chooseTileShape takes the measured default (chooseThreadsPerBlock,
// chooseElementsPerThread) where the lowering takes it, and otherwise the
// nearest shape that holds whole groups, blocks and reduction chunks. For
// every spec built of one to three states drawn from group sizes 2 to 4096
// (8- and 4-bit), codebook blocks 32 to 4096 and a plain state, with and
// without a per-tensor or a whole-step reduction, the test checks: a shape
// is chosen exactly where the brute force over every shape the options allow
// finds one; the chosen shape obeys the rules as the test states them (not
// through the policy's own predicates); the default is kept where it obeys
// them; and a requested dimension is never changed.
//
//===----------------------------------------------------------------------===//

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Frontend/Frontend.h"
#include "qopt/Frontend/MLIRGen.h"
#include "qopt/Schedule/TuningPolicy.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::qopt;

namespace {

/// One state of a generated spec, as the rules see it.
struct StateKind {
  std::string scheme; // the DSL's type, e.g. "group<i8, 4>"
  int64_t size;       // group or block elements; 0 for a plain state
  bool packed;        // 4-bit codes
};

enum class Reduction { None, PerTensor, WholeStep };

/// The rules of docs/abi.md as the test states them: a tile of `threads`
/// (a multiple of 32 in [32, 1024]) x `lanes` holds whole groups and
/// blocks, each of whole `lanes`-element vectors; packed codes take an even
/// number of lanes; reductions take tiles of whole 2048-element chunks and
/// warps of a divisor of 2048 elements.
bool obeysRules(const std::vector<StateKind> &states, Reduction reduction,
                int64_t threads, int64_t lanes) {
  if (threads % 32 != 0 || threads < 32 || threads > 1024 || lanes < 1)
    return false;
  int64_t tile = threads * lanes;
  for (const StateKind &state : states) {
    if (state.size && (tile % state.size != 0 || state.size % lanes != 0))
      return false;
    if (state.packed && lanes % 2 != 0)
      return false;
  }
  if (reduction != Reduction::None &&
      (tile % 2048 != 0 || 2048 % (32 * lanes) != 0))
    return false;
  return true;
}

/// Any shape the options allow (lanes a power of two up to 16) that obeys
/// the rules, with `threads` or `lanes` held where positive.
bool anyShapeObeys(const std::vector<StateKind> &states, Reduction reduction,
                   int64_t threads, int64_t lanes) {
  for (int64_t t = 32; t <= 1024; t += 32)
    for (int64_t l = 1; l <= 16; l *= 2)
      if ((threads <= 0 || t == threads) && (lanes <= 0 || l == lanes) &&
          obeysRules(states, reduction, t, l))
        return true;
  return false;
}

std::string specText(const std::vector<StateKind> &states,
                     Reduction reduction) {
  std::string text = "optimizer Shape {\n  param p : bf16;\n  grad g : bf16;\n";
  for (size_t i = 0; i < states.size(); ++i)
    text += "  state s" + std::to_string(i) + " : " + states[i].scheme + ";\n";
  text += "  update {\n";
  std::string scale = "1";
  if (reduction == Reduction::PerTensor)
    scale = "(1 / (norm(g) + 1))";
  if (reduction == Reduction::WholeStep)
    scale = "(1 / (global_norm(g) + 1))";
  for (size_t i = 0; i < states.size(); ++i)
    text += "    s" + std::to_string(i) + " = 0.5 * s" + std::to_string(i) +
            " + 0.5 * g * " + scale + ";\n";
  text += "    p = p - 0.001 * g * " + scale + ";\n  }\n}\n";
  return text;
}

/// The spec's optimizer op, or null with a test failure.
class GeneratedSpec {
public:
  explicit GeneratedSpec(const std::string &text) {
    frontend::ParsedSpec parsed =
        frontend::parseSpecString(text, "generated.qopt");
    if (!parsed.spec) {
      ADD_FAILURE() << parsed.diagnostics.front().rendered << "\n" << text;
      return;
    }
    module = frontend::mlirGen(context, *parsed.spec);
    if (!module)
      ADD_FAILURE() << "MLIRGen failed\n" << text;
  }
  OptimizerOp optimizer() {
    return module ? *module->getOps<OptimizerOp>().begin() : OptimizerOp();
  }
  MLIRContext &getContext() { return context; }

private:
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

std::vector<StateKind> statePool() {
  std::vector<StateKind> pool = {{"f32", 0, false}};
  for (int64_t size = 2; size <= 4096; size *= 4)
    pool.push_back({"group<i8, " + std::to_string(size) + ">", size, false});
  for (int64_t size = 8; size <= 4096; size *= 8)
    pool.push_back(
        {"group<i4, " + std::to_string(size) + ", softsign>", size, true});
  for (int64_t size = 32; size <= 4096; size *= 4)
    pool.push_back({"codebook<" + std::to_string(size) + ">", size, false});
  return pool;
}

/// Checks chooseTileShape against the rules for one spec and one request.
void checkShape(const std::vector<StateKind> &states, Reduction reduction,
                int64_t requestedThreads, int64_t requestedLanes) {
  std::string text = specText(states, reduction);
  GeneratedSpec spec(text);
  OptimizerOp optimizer = spec.optimizer();
  ASSERT_TRUE(optimizer);
  ScopedDiagnosticHandler quiet(&spec.getContext(),
                                [](Diagnostic &) { return success(); });
  int64_t threads = chooseThreadsPerBlock(optimizer, requestedThreads);
  int64_t lanes = chooseElementsPerThread(optimizer, threads, requestedLanes);
  FailureOr<TileShape> shape =
      chooseTileShape(optimizer, requestedThreads, requestedLanes);
  SCOPED_TRACE(text + "requested " + std::to_string(requestedThreads) + " x " +
               std::to_string(requestedLanes));
  // chooseElementsPerThread holds a requested lanes to the smallest group.
  int64_t heldLanes = requestedLanes > 0 ? lanes : 0;
  bool exists = anyShapeObeys(states, reduction, requestedThreads, heldLanes);
  if (obeysRules(states, reduction, threads, lanes)) {
    ASSERT_TRUE(succeeded(shape));
    EXPECT_EQ(shape->threads, threads);
    EXPECT_EQ(shape->lanes, lanes);
    return;
  }
  if (!exists) {
    // No shape takes the reduction's chunks: the host's shape, or an error.
    if (succeeded(shape)) {
      EXPECT_TRUE(obeysRules(states, Reduction::None, shape->threads,
                             shape->lanes));
      EXPECT_NE(reduction, Reduction::None);
    }
    return;
  }
  ASSERT_TRUE(succeeded(shape));
  EXPECT_TRUE(obeysRules(states, reduction, shape->threads, shape->lanes))
      << shape->threads << " x " << shape->lanes;
  if (requestedThreads > 0)
    EXPECT_EQ(shape->threads, requestedThreads);
  if (requestedLanes > 0)
    EXPECT_EQ(shape->lanes, lanes);
}

TEST(TileShapeTest, ChosenWhereverAShapeFitsAndDefaultKeptWhereItFits) {
  std::vector<StateKind> pool = statePool();
  int fallbacks = 0;
  for (Reduction reduction :
       {Reduction::None, Reduction::PerTensor, Reduction::WholeStep})
    for (size_t i = 0; i < pool.size(); ++i)
      for (size_t j = i; j < pool.size(); ++j) {
        std::vector<StateKind> states = {pool[i], pool[j]};
        checkShape(states, reduction, 0, 0);
        GeneratedSpec spec(specText(states, reduction));
        if (!spec.optimizer())
          continue;
        int64_t threads = chooseThreadsPerBlock(spec.optimizer(), 0);
        if (!obeysRules(states, reduction, threads,
                        chooseElementsPerThread(spec.optimizer(), threads, 0)))
          ++fallbacks;
      }
  // The pool reaches the fallback: group<i8, 2> or <i4, 8> beside blocks of
  // 2048 or more, and two-lane tiles with reductions.
  EXPECT_GT(fallbacks, 5);
}

TEST(TileShapeTest, ThreeStates) {
  std::vector<StateKind> pool = statePool();
  for (size_t i = 1; i < pool.size(); i += 2)
    for (size_t j = 0; j < pool.size(); j += 3)
      checkShape({pool[i], pool[j], pool.back()}, Reduction::PerTensor, 0, 0);
}

TEST(TileShapeTest, RequestedDimensionsStay) {
  std::vector<StateKind> pool = statePool();
  for (int64_t threads : {0, 64, 256, 1024})
    for (int64_t lanes : {0, 2, 4, 16})
      for (size_t i = 0; i < pool.size(); i += 2)
        checkShape({pool[i], pool.back()}, Reduction::None, threads, lanes);
}

// The two specs of the fourteenth session's random generator that the
// default refused: their shapes, worked out by hand.
TEST(TileShapeTest, HandWorkedFallbacks) {
  {
    // lanes 4 (the group), 256 threads cover 1024: 512 cover the block.
    GeneratedSpec spec(specText({{"group<i8, 4>", 4, false},
                                 {"codebook<2048>", 2048, false}},
                                Reduction::None));
    ASSERT_TRUE(spec.optimizer());
    FailureOr<TileShape> shape = chooseTileShape(spec.optimizer(), 0, 0);
    ASSERT_TRUE(succeeded(shape));
    EXPECT_EQ(shape->threads, 512);
    EXPECT_EQ(shape->lanes, 4);
  }
  {
    // lanes 2, 512 threads: a 1024-element tile; a chunk needs 1024 threads.
    GeneratedSpec spec(
        specText({{"group<i8, 2>", 2, false}}, Reduction::PerTensor));
    ASSERT_TRUE(spec.optimizer());
    FailureOr<TileShape> shape = chooseTileShape(spec.optimizer(), 0, 0);
    ASSERT_TRUE(succeeded(shape));
    EXPECT_EQ(shape->threads, 1024);
    EXPECT_EQ(shape->lanes, 2);
    // The manifest's suggestion holds at most a multiprocessor's 2048
    // threads: two blocks of 1024.
    FailureOr<KernelPlanAttr> plan =
        chooseKernelPlan(spec.optimizer(), PlanRequest());
    ASSERT_TRUE(succeeded(plan));
    EXPECT_EQ(plan->getThreads(), 1024);
    EXPECT_LE(plan->getSuggestedBlocksPerSm(), 2);
  }
}

} // namespace
