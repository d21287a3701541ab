//===- ReductionOrder.h - The fixed order of a per-tensor reduction -*- C++ -*-===//
//
// docs/numerics.md §7 as IR that both lowerings emit: the neutral term, the
// combination `⊕`, the pairwise tree over a sequence of partials built one
// leaf at a time on a stack of complete subtrees, and the one rounding of the
// result. The GPU's finish kernel and the host function differ only in where
// the partials come from and how the leaves of a chunk are summed.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_CODEGEN_REDUCTIONORDER_H
#define QOPT_CODEGEN_REDUCTIONORDER_H

#include "qopt/Dialect/Qopt/QoptOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::qopt {

/// The neutral term: -0 for sums (x + -0 = x for every x), -inf for the
/// maximum.
double reductionIdentity(ReductionKind kind);

/// `x ⊕ y` (float64): addition, or IEEE 754-2019 maximum for `max`.
Value combineReduction(OpBuilder &b, Location loc, ReductionKind kind, Value x,
                       Value y);

/// Pushes leaf number `leafIndex` of the tree (`leaves`, one float64 per
/// reduction) onto `stacks` (one float64 array per reduction, `depth` complete
/// subtrees on each): the leaf merges with the subtrees below it as often as
/// `leafIndex` has trailing ones, each merge `older ⊕ newer`. Returns the new
/// depth (i64).
Value pushTreeLeaf(OpBuilder &b, Location loc, ArrayRef<ReductionKind> kinds,
                   ArrayRef<Value> stacks, ValueRange leaves, Value leafIndex,
                   Value depth);

/// The tree's value from its stacks: the `depth` subtrees left, newest first,
/// each `older ⊕ acc` from `identities` (one per reduction). The padding of
/// the tree to a power of two is identities, which change none of its nodes.
SmallVector<Value> foldTreeStacks(OpBuilder &b, Location loc,
                                  ArrayRef<ReductionKind> kinds,
                                  ArrayRef<Value> stacks, Value depth,
                                  ValueRange identities);

/// The float32 value of a reduction from its float64 accumulation `acc`: /
/// `n` (f64, the tensor's element count) for mean and rms, the correctly
/// rounded square root (`sqrt`, the target's) for norm and rms, one rounding
/// to float32, and a NaN as `qnan` (the canonical quiet NaN, f32).
Value finishReduction(OpBuilder &b, Location loc, ReductionKind kind, Value acc,
                      Value n, Value qnan,
                      llvm::function_ref<Value(Value)> sqrt);

} // namespace mlir::qopt

#endif // QOPT_CODEGEN_REDUCTIONORDER_H
