//===- Manifest.cpp - The JSON manifest of each kernel's ABI --------------===//
//
// Written next to every binary so that the runtime, which has no LLVM or MLIR,
// knows each kernel's arguments, streams, dtypes, group and block sizes, launch
// shape and the expressions of its launch-uniform scalars (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Target.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Schedule/TuningPolicy.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::qopt;
namespace json = llvm::json;

/// The manifest's name of a stream element type.
static std::string dtypeName(Type type) {
  if (type.isF32()) return "f32";
  if (type.isBF16()) return "bf16";
  if (type.isF16()) return "f16";
  if (auto i = dyn_cast<IntegerType>(type))
    return (i.isUnsigned() ? "uint" : "int") + std::to_string(i.getWidth());
  return "unknown";
}

/// The runtime's bound on a uniform expression's nesting (docs/abi.md,
/// "Uniforms"); the compiler refuses a deeper one rather than write a
/// manifest that no runtime loads.
static constexpr unsigned kMaxUniformLevels = 2048;
/// The nodes of every uniform of a manifest written out as trees: a value
/// used twice is written twice, so a chain of squarings doubles the tree at
/// each step (22 of them were a 862 MB manifest).
static constexpr uint64_t kMaxUniformNodes = uint64_t(1) << 20;

/// One uniform value as an expression tree: a number, a hyperparameter name
/// or "step", or [op, operands...]. `level` is the value's depth in its tree
/// (1 at the root); `nodes` counts the nodes written so far.
static FailureOr<json::Value> expressionOf(Value value, unsigned level,
                                           uint64_t &nodes) {
  Operation *op = value.getDefiningOp();
  if (!op)
    return failure();
  if (level > kMaxUniformLevels)
    return op->emitOpError("is part of a uniform expression that nests deeper "
                           "than ")
           << kMaxUniformLevels
           << " levels, the runtime's limit (docs/abi.md, \"Uniforms\")";
  if (++nodes > kMaxUniformNodes)
    return op->emitOpError("is part of uniform expressions that, written out "
                           "as trees in the manifest, exceed ")
           << kMaxUniformNodes << " nodes (a value used twice is written twice)";
  if (auto hyper = dyn_cast<HyperValueOp>(op))
    return json::Value(hyper.getHyper().str());
  if (isa<StepCountOp>(op))
    return json::Value("step");
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    if (auto f = dyn_cast<FloatAttr>(constant.getValue()))
      return json::Value(f.getValueAsDouble());
    if (auto i = dyn_cast<IntegerAttr>(constant.getValue()))
      return json::Value(i.getType().isInteger(1) ? double(i.getValue().getBoolValue())
                                                  : double(i.getInt()));
    return op->emitOpError("constant cannot be written to a manifest");
  }
  StringRef name = llvm::TypeSwitch<Operation *, StringRef>(op)
      .Case<arith::AddFOp>([](auto) { return "add"; })
      .Case<arith::SubFOp>([](auto) { return "sub"; })
      .Case<arith::MulFOp>([](auto) { return "mul"; })
      .Case<arith::DivFOp>([](auto) { return "div"; })
      .Case<arith::NegFOp>([](auto) { return "neg"; })
      .Case<math::PowFOp>([](auto) { return "pow"; })
      .Case<math::SqrtOp>([](auto) { return "sqrt"; })
      .Case<math::ExpOp>([](auto) { return "exp"; })
      .Case<math::LogOp>([](auto) { return "log"; })
      .Case<math::TanhOp>([](auto) { return "tanh"; })
      .Case<math::Atan2Op>([](auto) { return "atan2"; })
      .Case<math::AbsFOp>([](auto) { return "abs"; })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([](auto) { return "max"; })
      .Case<arith::MinimumFOp, arith::MinNumFOp>([](auto) { return "min"; })
      .Case<arith::SelectOp>([](auto) { return "select"; })
      .Case<arith::AndIOp>([](auto) { return "and"; })
      .Case<arith::OrIOp>([](auto) { return "or"; })
      .Case<arith::XOrIOp>([](auto) { return "ne"; })
      .Case<arith::UIToFPOp>([](auto) { return ""; })
      .Case<arith::CmpFOp>([](arith::CmpFOp cmp) -> StringRef {
        switch (cmp.getPredicate()) {
        case arith::CmpFPredicate::OLT: case arith::CmpFPredicate::ULT: return "lt";
        case arith::CmpFPredicate::OLE: case arith::CmpFPredicate::ULE: return "le";
        case arith::CmpFPredicate::OGT: case arith::CmpFPredicate::UGT: return "gt";
        case arith::CmpFPredicate::OGE: case arith::CmpFPredicate::UGE: return "ge";
        case arith::CmpFPredicate::OEQ: case arith::CmpFPredicate::UEQ: return "eq";
        case arith::CmpFPredicate::ONE: case arith::CmpFPredicate::UNE: return "ne";
        default: return "?";
        }
      })
      .Default([](Operation *) { return "?"; });
  if (name == "?")
    return op->emitOpError("cannot be evaluated by the runtime as a uniform "
                           "scalar");
  // A bool widened to a number is the bool itself (0.0 / 1.0).
  if (name.empty())
    return expressionOf(op->getOperand(0), level, nodes);
  json::Array expr{json::Value(name.str())};
  for (Value operand : op->getOperands()) {
    FailureOr<json::Value> sub = expressionOf(operand, level + 1, nodes);
    if (failed(sub))
      return failure();
    expr.push_back(std::move(*sub));
  }
  return json::Value(std::move(expr));
}

static json::Object stateObject(StateOp state) {
  json::Object object{{"name", state.getSymName().str()}};
  Attribute scheme = state.getScheme();
  if (auto plain = dyn_cast<PlainSchemeAttr>(scheme)) {
    object["scheme"] = "plain";
    object["dtype"] = dtypeName(plain.getStorage());
  } else if (auto codebook = dyn_cast<CodebookSchemeAttr>(scheme)) {
    object["scheme"] = "codebook";
    object["block"] = codebook.getBlock();
    object["overflow"] = stringifyOverflow(codebook.getOverflow()).str();
  } else if (auto group = dyn_cast<GroupSchemeAttr>(scheme)) {
    object["scheme"] = "group";
    IntegerType storage = group.getStorage();
    // A 4-bit code's signedness as its 8-bit type's, and its width: its
    // stream holds two codes a byte (docs/abi.md).
    object["storage"] = dtypeName(IntegerType::get(
        storage.getContext(), 8, storage.getSignedness()));
    if (isPacked(group))
      object["bits"] = int64_t(4);
    object["group"] = group.getGroupSize();
    object["companding"] = stringifyCompanding(group.getCompanding()).str();
    object["scale_dtype"] = dtypeName(group.getScale());
    object["rounding"] = stringifyRounding(group.getRounding()).str();
    object["scale_divisor"] = stringifyScaleDivisor(group.getDivisor()).str();
    object["overflow"] = stringifyOverflow(group.getOverflow()).str();
  }
  return object;
}

/// The GPU kernel's launches before its step and their workspace
/// (docs/abi.md, "Reductions"): the reduce pre-pass over the step's tiles
/// and the finish, one block per tensor, of convert-qopt-to-gpu.
static void addReductionPhases(json::Object &kernel, OptimizerOp optimizer,
                               KernelPlanAttr plan,
                               ArrayRef<std::string> tableArgs,
                               int64_t numReductions, int64_t numGlobal) {
  StringRef name = optimizer.getSymName();
  // The pre-pass's block is of its own plan's threads (the step's tile).
  KernelPlanAttr reducePlan = chooseReducePassPlan(optimizer, plan);
  json::Array reduceArgs{"descriptors", "tile_map", "num_tiles", "uniforms"};
  for (const std::string &t : tableArgs)
    reduceArgs.push_back(t);
  reduceArgs.push_back("reduction_partials");
  int64_t perTensor = numReductions - numGlobal;
  json::Array finishArgs{"descriptors", "num_tensors", "uniforms",
                         "reduction_partials"};
  if (perTensor)
    finishArgs.push_back("reduction_values");
  if (numGlobal)
    finishArgs.push_back("step_partials");
  json::Array phases{
      json::Object{{"name", "reduce"},
                   {"entry", (name + "_reduce").str()},
                   {"grid", "tiles"},
                   {"threads_per_block", reducePlan.getThreads()},
                   {"args", std::move(reduceArgs)}},
      json::Object{{"name", "finish"},
                   {"entry", (name + "_finish").str()},
                   {"grid", "tensors"},
                   {"threads_per_block", kReductionFinishThreads},
                   {"args", std::move(finishArgs)}}};
  if (numGlobal)
    phases.push_back(json::Object{
        {"name", "combine"},
        {"entry", (name + "_combine").str()},
        {"grid", "one"},
        {"threads_per_block", kReductionFinishThreads},
        {"args", json::Array{"num_step_tensors", "step_partials", "uniforms"}}});
  kernel["phases"] = std::move(phases);
  int64_t chunksPerTile = plan.getTile() / kReductionChunk;
  json::Object workspace{
      {"chunk_elements", kReductionChunk},
      {"partial_bytes_per_tile", chunksPerTile * numReductions * 8},
      {"value_bytes_per_tensor", perTensor * 4}};
  if (numGlobal)
    workspace["step_partial_bytes_per_tensor"] = numGlobal * 8;
  kernel["reduction_workspace"] = std::move(workspace);
}

/// The host library's functions of a kernel with whole-step reductions
/// (docs/abi.md, "Whole-step reductions"): each tensor's accumulations,
/// then the tree over the step's.
static void addHostStepPhases(json::Object &kernel, StringRef name,
                              int64_t numGlobal) {
  kernel["phases"] = json::Array{
      json::Object{{"name", "partials"},
                   {"entry", (name + "_partials").str()},
                   {"grid", "tiles"}},
      json::Object{{"name", "combine"},
                   {"entry", (name + "_combine").str()},
                   {"grid", "one"}}};
  kernel["reduction_workspace"] = json::Object{
      {"chunk_elements", kReductionChunk},
      {"step_partial_bytes_per_tensor", numGlobal * 8}};
}

/// The manifest's `param`: its name, dtype and master format, and for
/// stochastic rounding the uniform its key's seed reads (the runtime checks
/// it is an integer in [0, 2^24)).
static json::Object paramObject(OptimizerOp optimizer) {
  std::string masterName;
  switch (optimizer.getMaster()) {
  case MasterFormat::none: masterName = "none"; break;
  case MasterFormat::ecc_i8: masterName = "ecc_int8"; break;
  case MasterFormat::ecc_i16: masterName = "ecc_int16"; break;
  case MasterFormat::stochastic: masterName = "stochastic"; break;
  case MasterFormat::kahan_bf16: masterName = "kahan_bf16"; break;
  }
  json::Object param{{"name", optimizer.getParamName().str()},
                     {"dtype", dtypeName(optimizer.getParamType())},
                     {"master", masterName}};
  optimizer.getUpdate().walk([&](StoreParamOp store) {
    if (!store.getKey().empty())
      if (auto u = store.getKey()[0].getDefiningOp<UniformOp>())
        param["seed_uniform"] = int64_t(u.getIndex());
  });
  return param;
}

/// The manifest's `launch`: the plan's tile, shared memory and grid fields,
/// with tile claims their counts, with a producer warp its count.
static json::Object launchObject(KernelPlanAttr plan, size_t numStreams,
                                 bool producerWarp) {
  json::Object launch{
      {"threads_per_block", plan.getThreads()},
      {"elements_per_thread", plan.getLanes()},
      {"tile_elements", plan.getTile()},
      {"descriptor_bytes", int64_t(16 + 8 * numStreams)},
      {"shared_bytes", plan.getSharedBytes()},
      {"suggested_blocks_per_sm", plan.getSuggestedBlocksPerSm()},
      {"waves", plan.getWaves()},
      {"min_tiles_per_block", plan.getMinTilesPerBlock()}};
  if (producerWarp)
    launch["producer_warps"] = 1;
  if (plan.getClaimTiles() > 0)
    launch["tile_claims"] =
        json::Object{{"tiles", plan.getClaimTiles()},
                     {"static_eighths", plan.getClaimStaticEighths()}};
  return launch;
}

FailureOr<json::Value> mlir::qopt::buildManifest(ModuleOp module,
                                                 const KernelOptions &options,
                                                 StringRef format) {
  json::Array kernels;
  for (OptimizerOp optimizer : module.getOps<OptimizerOp>()) {
    UniformsOp uniforms = optimizer.getUniforms();
    if (!uniforms)
      return optimizer.emitOpError("needs qopt-outline-uniforms before a "
                                   "manifest can be written");
    KernelPlanAttr plan = getKernelPlan(optimizer);
    if (!plan)
      return optimizer.emitOpError("needs a launch plan (qopt-plan-kernel) "
                                   "before a manifest can be written");
    SmallVector<StreamInfo> streams = getStreams(optimizer);

    json::Array hypers;
    for (HyperOp hyper : getHypers(optimizer)) {
      json::Object h{{"name", hyper.getSymName().str()}};
      if (auto f = dyn_cast<FloatAttr>(hyper.getValue())) {
        h["default"] = f.getValueAsDouble();
      } else {
        h["default"] = cast<BoolAttr>(hyper.getValue()).getValue() ? 1.0 : 0.0;
        h["bool"] = true;
      }
      hypers.push_back(std::move(h));
    }

    json::Array states, tables;
    SmallVector<std::string> args = {"descriptors", "tile_map", "num_tiles",
                                     "uniforms"};
    for (StateOp state : getStates(optimizer)) {
      states.push_back(stateObject(state));
      if (isa<CodebookSchemeAttr>(state.getScheme())) {
        std::string table = (state.getSymName() + ".qmap").str();
        tables.push_back(json::Object{
            {"name", table}, {"dtype", "f32"}, {"count", 256}});
        args.push_back(table);
      }
    }

    json::Array streamArray;
    for (const StreamInfo &s : streams) {
      json::Object o{{"name", s.name},
                     {"role", stringifyStreamRole(s.role).str()},
                     {"dtype", dtypeName(s.storage)},
                     {"per", s.perElements == 1 ? "element" : "group"},
                     {"access", s.written ? "read_write" : "read"}};
      if (s.perElements != 1)
        o["group"] = s.perElements;
      streamArray.push_back(std::move(o));
    }

    json::Array uniformArray;
    Operation *yield = uniforms.getBody().front().getTerminator();
    uint64_t nodes = 0;
    for (auto [i, value] : llvm::enumerate(yield->getOperands())) {
      FailureOr<json::Value> expr = expressionOf(value, 1, nodes);
      if (failed(expr))
        return failure();
      uniformArray.push_back(json::Object{{"index", int64_t(i)},
                                          {"expr", std::move(*expr)}});
    }

    // Compiled with --grad-scaling (qopt-fuse-grad-scaling): the step
    // unscales its gradients and can be skipped (docs/abi.md).
    bool gradScaling = false;
    for (Operation &op : optimizer.getUpdate().getBody().front())
      gradScaling |= isa<SkipIfOp>(op) ||
                     (isa<LoadGradOp>(op) && cast<LoadGradOp>(op).getInvScale());

    // A GPU kernel with per-tensor reductions reads their values, which its
    // phases wrote; the host function computes its own.
    SmallVector<ReduceOp> reduceOps = getReductions(optimizer);
    int64_t numGlobal = getReductions(optimizer, /*global=*/true).size();
    bool gpuReductions = !reduceOps.empty() && format != "host";
    SmallVector<std::string> tableArgs(args.begin() + 4, args.end());
    if (gpuReductions && int64_t(reduceOps.size()) > numGlobal)
      args.push_back("reduction_values");
    if (plan.getClaimTiles() > 0)
      args.push_back("work_counters");
    if (countsNumerics(optimizer))
      args.push_back("numerics_counters");
    json::Array argArray;
    for (const std::string &a : args)
      argArray.push_back(a);
    json::Object param = paramObject(optimizer);
    // A GPU kernel with a producer warp is launched with one warp more than
    // its tile's threads (launch.producer_warps); version 2 keeps a runtime
    // that does not know the field from launching it short of that warp.
    bool producerWarp = plan.getProducerWarp() && format != "host";
    json::Object kernel{
        {"format", "qopt-manifest"},
        {"version", producerWarp ? 2 : 1},
        {"optimizer", optimizer.getSymName().str()},
        {"kernel", optimizer.getSymName().str()},
        {"mode", stringifyArithMode(options.lowering.mode).str()},
        {"arch", options.chip},
        {"binary_format", format.str()},
        {"param", std::move(param)},
        {"grad", json::Object{{"name", optimizer.getGradName().str()},
                              {"dtype", dtypeName(optimizer.getGradType())}}},
        {"hypers", std::move(hypers)},
        {"states", std::move(states)},
        {"streams", std::move(streamArray)},
        {"uniforms", std::move(uniformArray)},
        {"tables", std::move(tables)},
        {"args", std::move(argArray)},
        {"launch", launchObject(plan, streams.size(), producerWarp)}};
    // Per-tensor reductions (docs/abi.md, "Reductions"): the kernel computes
    // them itself, so a tile range it is called on must hold whole tensors.
    // A whole-step reduction's value is uniform slot `uniform`, after the
    // host-evaluated ones (docs/abi.md, "Whole-step reductions").
    json::Array reductions;
    for (ReduceOp reduce : reduceOps) {
      json::Object r{{"kind", stringifyReductionKind(reduce.getKind()).str()},
                     {"scope", reduce.getGlobal() ? "step" : "tensor"}};
      if (reduce.getGlobal())
        r["uniform"] = int64_t(getNumHostUniforms(optimizer) +
                               getScopedReductionIndex(reduce));
      reductions.push_back(std::move(r));
    }
    if (!reductions.empty())
      kernel["reductions"] = std::move(reductions);
    if (gpuReductions)
      addReductionPhases(kernel, optimizer, plan, tableArgs,
                         reduceOps.size(), numGlobal);
    else if (numGlobal)
      addHostStepPhases(kernel, optimizer.getSymName(), numGlobal);
    if (gradScaling)
      kernel["grad_scaling"] = json::Object{{"scale", "grad_scale"},
                                            {"found_inf", "found_inf"}};
    kernels.push_back(std::move(kernel));
  }
  // docs/abi.md: one kernel per binary and manifest.
  if (kernels.size() != 1)
    return module.emitError("expected exactly one qopt.optimizer to write a "
                            "manifest for, found ")
           << kernels.size();
  return std::move(kernels.front());
}

std::string mlir::qopt::getGpuManifestSymbol(StringRef entry) {
  return (entry + "_manifest").str();
}
