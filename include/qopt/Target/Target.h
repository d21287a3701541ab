//===- Target.h - From qopt IR to PTX, cubin, fatbin and manifests -*- C++ -*-===//
//
// The back half of qopt-opt: the pass pipelines that lower an outlined qopt
// module through gpu/nvvm to PTX (upstream nvvm-attach-target,
// convert-gpu-to-nvvm, gpu-module-to-binary), ptxas and fatbinary for cubin
// and fatbin, and the JSON manifest of each kernel's ABI (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TARGET_TARGET_H
#define QOPT_TARGET_TARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "qopt/Conversion/Passes.h"
#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Schedule/Passes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"
#include <string>

namespace mlir::qopt {

/// How kernels are generated.
struct KernelOptions {
  std::string chip = "sm_90";  ///< nvvm-attach-target chip (sm_80, sm_90, ...).
  std::string mode = "strict"; ///< strict (bit-exact) or fast.
  int64_t threadsPerBlock = 0; ///< <= 0: chooseThreadsPerBlock's choice
  int64_t elementsPerThread = 0; ///< <= 0: chooseElementsPerThread's choice
  /// Dequantize 8-bit codes through compile-time tables (qopt-tabulate-codes,
  /// exact).
  bool tabulateCodes = true;
  /// Divide by lane-uniform values through a reciprocal with a proof of
  /// correct rounding (qopt-exact-uniform-division, exact).
  /// docs/tuning.md#exact-uniform-division
  bool exactUniformDivision = false;
  /// Strict mode: quantization codes through approximate arithmetic with a
  /// rounding-margin check and the IEEE chain as fallback (exact).
  bool checkedRounding = true;
  /// Strict mode: the update's div.rn / sqrt.rn as ptxas's fast-path
  /// sequence with its range check once per thread (exact).
  bool guardedIeee = true;
  /// Codebook codes through a bucket table of float bit patterns (exact).
  bool codebookBuckets = true;
  /// Staged kernels fill their stages with bulk copies (cp.async.bulk) on
  /// sm_90 and newer (qopt-plan-kernel bulk-copy; same results).
  /// docs/tuning.md#bulk-copy
  bool bulkCopy = false;
  /// Tiles past each block's static range claimed this many at a time from
  /// the launch's work counters (chooseTileClaims): -1 for the measured choice,
  /// 0 for none. Where a kernel claims, its static ranges hold
  /// tileClaimsStaticEighths / 8 of the tiles (1 to 8; 0 for the choice's
  /// share, 5 with n > 0).
  int64_t tileClaims = -1;
  int64_t tileClaimsStaticEighths = 0;
  /// Full tiles' read streams copied into shared memory up to three tiles
  /// ahead with cp.async (chooseTileStaging; Auto: chooseAsyncCopy's choice);
  /// the manifest asks for the shared memory.
  AsyncCopy asyncCopy = AsyncCopy::Auto;
};

/// The PTX ISA feature of nvvm-attach-target for `chip` (e.g. "+ptx80" for
/// sm_80..sm_90a, "+ptx86" for sm_100).
std::string getPTXFeatures(llvm::StringRef chip);

/// Adds qopt-outline-uniforms (when no qopt.uniforms region exists yet is
/// checked by the pass itself) and canonicalization/CSE of the update.
void buildQoptOptimizationPipeline(OpPassManager &pm);

/// Adds convert-qopt-to-gpu and the upstream passes down to gpu.module with
/// NVVM/LLVM dialect ops (no binary yet). The module's optimizers carry their
/// plans (qopt-plan-kernel with getPlanKernelOptions).
void buildQoptToNVVMPipeline(OpPassManager &pm, const KernelOptions &options);

/// qopt-plan-kernel's options for `options` and `target` (l2-prefetch and
/// bulk-copy where the chip has cp.async.bulk: sm_90 and newer).
PlanKernelOptions getPlanKernelOptions(const KernelOptions &options,
                                       PlanTarget target);

/// convert-qopt-to-gpu's options for `options`; the pipeline above and
/// `qopt-opt --emit=gpu` both take them from here.
ConvertQoptToGPUOptions getConvertQoptToGPUOptions(const KernelOptions &options);

/// Lowers `module` (qopt dialect, uniforms outlined, plans attached) to PTX
/// text. The module is consumed. Emits diagnostics and fails on error.
FailureOr<std::string> translateToPTX(ModuleOp module,
                                      const KernelOptions &options);

/// Lowers `module` to LLVM IR (NVPTX) text.
FailureOr<std::string> translateToLLVMIR(ModuleOp module,
                                         const KernelOptions &options);

/// Path of a CUDA toolkit program (ptxas, fatbinary): only $QOPT_CUDA_PATH/bin
/// when that variable is set; else $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, then
/// /usr/local/cuda/bin. Empty if none is found.
std::string findCudaProgram(llvm::StringRef name);

/// Assembles PTX into a cubin for `chip` with ptxas. On failure, `error`
/// holds ptxas' own message (or says that ptxas was not found).
FailureOr<std::string> assemblePTX(llvm::StringRef ptx, llvm::StringRef chip,
                                   std::string &error);

/// Packs cubins (one per chip) and the PTX into a fatbin with fatbinary.
FailureOr<std::string>
createFatbin(llvm::StringRef ptx, llvm::StringRef ptxChip,
             llvm::ArrayRef<std::pair<std::string, std::string>> cubins,
             std::string &error);

/// The manifest of the kernels in `module` (qopt dialect, uniforms outlined,
/// plans attached), one object per optimizer; `format` is ptx, cubin, fatbin
/// or host. The launch fields are the plan's.
FailureOr<llvm::json::Value> buildManifest(ModuleOp module,
                                           const KernelOptions &options,
                                           llvm::StringRef format);

} // namespace mlir::qopt

#endif // QOPT_TARGET_TARGET_H
