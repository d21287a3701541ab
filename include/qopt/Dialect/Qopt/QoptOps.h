//===- QoptOps.h - qopt operations ------------------------------*- C++ -*-===//
//
// Declares the operations of the qopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTOPS_H
#define QOPT_DIALECT_QOPT_QOPTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

#include <optional>
#include <string>

namespace mlir::qopt {
class UpdateOp;
class UniformsOp;
class StateOp;
class HyperOp;
} // namespace mlir::qopt

#define GET_OP_CLASSES
#include "qopt/Dialect/Qopt/QoptOps.h.inc"

namespace mlir::qopt {
/// States of `optimizer` in declaration order: their order in the kernel ABI.
llvm::SmallVector<StateOp> getStates(OptimizerOp optimizer);
/// Hyperparameters of `optimizer` in declaration order.
llvm::SmallVector<HyperOp> getHypers(OptimizerOp optimizer);

/// What one stream of a tensor holds (docs/abi.md).
enum class StreamRole { Param, ErrorBits, Grad, State, StateCodes, StateScales,
                        StateAbsmax };

/// One buffer per tensor in the kernel ABI, in ABI order.
struct StreamInfo {
  std::string name;   ///< `p`, `p.ecc`, `g`, `m.codes`, `m.scales`, ...
  StreamRole role;
  Type storage;       ///< bf16, f16, f32, si8, ui8 or si16.
  /// 1 for per-element streams, else the group/block size; 2 for packed
  /// 4-bit codes (a ui8 byte holds two elements' codes).
  int64_t perElements;
  bool written;       ///< read-write (param, error bits, states) or read-only.
  int stateIndex;     ///< index into getStates(), or -1.
  /// Two 4-bit codes per byte, the even element's in the low nibble.
  bool packed = false;
};

/// Whether `master` keeps error-correction bits beside the parameter.
inline bool hasErrorBits(MasterFormat master) {
  return master == MasterFormat::ecc_i8 || master == MasterFormat::ecc_i16;
}
/// Whether `master` keeps a bf16 Kahan compensation beside the parameter
/// (its stream `<param>.kahan`, role ErrorBits).
inline bool hasCompensation(MasterFormat master) {
  return master == MasterFormat::kahan_bf16;
}
/// Whether a group scheme's codes are 4 bits, two per byte.
inline bool isPacked(GroupSchemeAttr scheme) {
  return scheme.getStorage().getWidth() == 4;
}

/// The streams of `optimizer` in ABI order.
llvm::SmallVector<StreamInfo> getStreams(OptimizerOp optimizer);

/// The streams the update reads (indices into getStreams), in the order of
/// their first load: a load_param reads the parameter and its error bits, a
/// load_state the state's values or codes and then its scales or absmax.
llvm::SmallVector<unsigned> getReadStreams(OptimizerOp optimizer);

/// The name of a stream role in manifests (`param`, `error_bits`, ...).
llvm::StringRef stringifyStreamRole(StreamRole role);

/// The group or block size of a quantized state (the span of its absmax); 0
/// for a plain state.
int64_t getReductionSize(StateOp state);

/// Checks that `threads` threads of `lanes` elements make a tile that holds
/// whole groups and blocks, each of whole `lanes`-element vectors; emits an
/// error on the offending state otherwise.
LogicalResult verifyTileShape(OptimizerOp optimizer, int64_t threads,
                              int64_t lanes);

/// Whether verifyTileShape accepts `threads` x `lanes` (`lanes` positive),
/// without emitting.
bool fitsTileShape(OptimizerOp optimizer, int64_t threads, int64_t lanes);

/// The overflow policy of a quantized state (group or codebook), or
/// std::nullopt for a plain state.
std::optional<Overflow> getOverflow(StateOp state);

/// Whether the kernel of `optimizer` counts its saturated and non-finite
/// groups (docs/abi.md, "Numerics counters"): some state saturates.
bool countsNumerics(OptimizerOp optimizer);

/// The slots of the numerics counters: int64 values a kernel adds to.
enum class NumericsCounter : int64_t {
  /// Groups and blocks whose finite scale did not fit its type and
  /// saturated.
  SaturatedGroups = 0,
  /// Groups and blocks holding a NaN or an infinity, stored saturated.
  NonfiniteGroups = 1,
};
/// The number of numerics counters a kernel takes.
inline constexpr int64_t kNumNumericsCounters = 2;

/// The update's qopt.reduce ops, in order: reduction `i` of the ABI
/// (docs/abi.md, "Reductions").
llvm::SmallVector<ReduceOp> getReductions(OptimizerOp optimizer);

/// The update's reductions of one scope: per-tensor (`global` false) or
/// whole-step (`global` true), in update order.
llvm::SmallVector<ReduceOp> getReductions(OptimizerOp optimizer, bool global);

/// The position of `op` among the update's reductions of its scope: a
/// per-tensor value's index in `reduction_values`, a whole-step value's
/// among the step's (docs/abi.md, "Whole-step reductions").
unsigned getScopedReductionIndex(ReduceOp op);

/// The number of uniforms the optimizer's uniforms region yields: the
/// host-evaluated ones. Whole-step reduction `s` is uniform slot
/// `getNumHostUniforms(optimizer) + s`.
unsigned getNumHostUniforms(OptimizerOp optimizer);

/// The elements of a reduction's chunk: each chunk's partial is a pairwise
/// tree over this many elements (docs/numerics.md, "Reductions").
inline constexpr int64_t kReductionChunk = 2048;

/// Whether the GPU lowering of the optimizer's per-tensor reductions takes
/// `threads` x `lanes`: a tile of whole kReductionChunk-element chunks and
/// warps of a divisor of a chunk (docs/abi.md, "Reductions"). True for an
/// update without per-tensor or whole-step reductions.
bool fitsReductionChunks(OptimizerOp optimizer, int64_t threads,
                         int64_t lanes);

/// The threads of a block of the GPU's finish kernel, which reduces one
/// tensor's chunk partials (docs/abi.md, "Reductions"): a power of two, at
/// most 32 warps.
inline constexpr int64_t kReductionFinishThreads = 512;

/// The smallest group or block size of the optimizer's states (4096 if none).
int64_t getMinGroupSize(OptimizerOp optimizer);

/// The name of the discardable attribute that holds an optimizer's launch
/// plan (#qopt.kernel_plan, attached by qopt-plan-kernel).
inline constexpr llvm::StringLiteral kKernelPlanAttrName = "qopt.kernel_plan";

/// The launch plan attached to `optimizer`, or null before qopt-plan-kernel.
KernelPlanAttr getKernelPlan(OptimizerOp optimizer);
} // namespace mlir::qopt

#endif // QOPT_DIALECT_QOPT_QOPTOPS_H
