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

/// How kernels are generated: the chip, the pipeline's optional passes and
/// the options of the passes that take them, forwarded as their generated
/// option structs (each knob is declared once, in its pass's Passes.td).
struct KernelOptions {
  std::string chip = "sm_90"; ///< nvvm-attach-target chip (sm_80, sm_90, ...).
  /// qopt-plan-kernel's options: threads, lanes, async and bulk copies,
  /// tile claims, codebook buckets (getPlanKernelOptions adds the target and
  /// what the chip has).
  PlanKernelOptions plan;
  /// convert-qopt-to-gpu's options: the arithmetic mode, checked rounding,
  /// guarded IEEE division and square root.
  ConvertQoptToGPUOptions lowering;
  /// Dequantize 8-bit codes through compile-time tables (qopt-tabulate-codes,
  /// exact).
  bool tabulateCodes = true;
  /// Divide by lane-uniform values through a reciprocal with a proof of
  /// correct rounding (qopt-exact-uniform-division, exact).
  /// docs/tuning.md#exact-uniform-division
  bool exactUniformDivision = false;
  /// The module's own ABI description (docs/abi.md, "The GPU module's
  /// manifest"): when `manifestSymbol` is set, translateToPTX adds to each
  /// gpu.module a read-only global of that name holding `manifestJson` and a
  /// terminating NUL, which the runtime compares with the manifest it is
  /// given. It is data only: the kernels' code is the same without it.
  std::string manifestSymbol;
  std::string manifestJson;
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

/// qopt-plan-kernel's options for `options` and `target`: `options.plan`,
/// with l2-prefetch (either kind), bulk-copy and split-absmax-barrier only
/// where the chip has cp.async.bulk and mbarrier.try_wait (sm_90 and newer).
PlanKernelOptions getPlanKernelOptions(const KernelOptions &options,
                                       PlanTarget target);

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

/// The name of the global that holds a GPU module's manifest: its entry
/// point (the manifest's "entry", which is its "kernel") followed by
/// `_manifest`, as a host library's is `<host.symbol>_manifest`.
std::string getGpuManifestSymbol(llvm::StringRef entry);

/// The manifest of the kernels in `module` (qopt dialect, uniforms outlined,
/// plans attached), one object per optimizer; `format` is ptx, cubin, fatbin
/// or host. The launch fields are the plan's.
FailureOr<llvm::json::Value> buildManifest(ModuleOp module,
                                           const KernelOptions &options,
                                           llvm::StringRef format);

} // namespace mlir::qopt

#endif // QOPT_TARGET_TARGET_H
