//===- QoptOps.h - qopt operations ------------------------------*- C++ -*-===//
//
// Declares the operations of the qopt dialect.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_DIALECT_QOPT_QOPTOPS_H
#define QOPT_DIALECT_QOPT_QOPTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include <string>
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "qopt/Dialect/Qopt/QoptDialect.h"

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
  int64_t perElements;///< 1 for per-element streams, else the group/block size.
  bool written;       ///< read-write (param, error bits, states) or read-only.
  int stateIndex;     ///< index into getStates(), or -1.
};

/// The streams of `optimizer` in ABI order.
llvm::SmallVector<StreamInfo> getStreams(OptimizerOp optimizer);

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

/// A kernel's launch shape: `threads` per block of `lanes` elements each.
struct TileShape {
  int64_t threads, lanes;
  int64_t tile() const { return threads * lanes; }
};

/// The launch shape for the requested threads and lanes (<= 0: chosen, see
/// getThreadsPerBlock and getElementsPerThread), checked: threads a multiple
/// of 32 in [32, 1024], and verifyTileShape. The GPU kernel, the host library
/// (which walks the same tiles) and the manifest all take it from here.
FailureOr<TileShape> resolveTileShape(OptimizerOp optimizer,
                                      int64_t requestedThreads,
                                      int64_t requestedLanes);

/// The smallest group or block size of the optimizer's states (4096 if none).
int64_t getMinGroupSize(OptimizerOp optimizer);

/// Threads per GPU block: `requested`, or with `requested <= 0` the measured
/// best on the H200 (bench/NOTES.md: 512 for two or more group states, else
/// 256).
int64_t getThreadsPerBlock(OptimizerOp optimizer, int64_t requested);

/// Consecutive elements per GPU thread (the lanes of a host chunk): the
/// `requested` number, or with `requested <= 0` the measured best on the H200
/// (bench/NOTES.md: 16 for one state, 8 with codebook states, else 4) raised
/// until `threads` such threads cover the largest block; never more than the smallest group, so that a thread's lanes lie in
/// one group. The tile is `threads` times this.
int64_t getElementsPerThread(OptimizerOp optimizer, int64_t threads,
                             int64_t requested);
} // namespace mlir::qopt

#endif // QOPT_DIALECT_QOPT_QOPTOPS_H
