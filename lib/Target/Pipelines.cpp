//===- Pipelines.cpp - qopt IR to NVVM, LLVM IR and PTX -------------------===//
//
// The upstream path: nvvm-attach-target (the chip chosen; upstream defaults
// to sm_50, which CUDA 13's ptxas rejects), scf-to-cf and convert-gpu-to-nvvm
// inside each gpu.module, then gpu-module-to-binary{format=isa} for PTX.
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Target.h"

#include "qopt/Conversion/Passes.h"
#include "qopt/Schedule/Passes.h"
#include "qopt/Transforms/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::qopt;

/// The number of an sm_NN[a|f] chip (90 for sm_90a), 0 for anything else.
static unsigned getChipNumber(llvm::StringRef chip) {
  unsigned sm = 0;
  llvm::StringRef digits = chip.drop_front(3).rtrim("af");
  if (!chip.starts_with("sm_") || digits.getAsInteger(10, sm))
    return 0;
  return sm;
}

std::string mlir::qopt::getPTXFeatures(llvm::StringRef chip) {
  unsigned sm = getChipNumber(chip);
  if (!sm)
    return "+ptx80";
  // The oldest PTX ISA that knows the chip (PTX ISA notes): 8.0 for sm_90,
  // 8.6 for sm_100/101, 8.7 for sm_120, 8.8 for sm_103 and sm_121.
  if (sm >= 121 || sm == 103)
    return "+ptx88";
  if (sm >= 120)
    return "+ptx87";
  if (sm >= 100)
    return "+ptx86";
  return "+ptx80";
}

void mlir::qopt::buildQoptOptimizationPipeline(OpPassManager &pm) {
  pm.addPass(createOutlineUniforms());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
}

PlanKernelOptions mlir::qopt::getPlanKernelOptions(const KernelOptions &options,
                                                  PlanTarget target) {
  PlanKernelOptions plan = options.plan;
  plan.target = target;
  // cp.async.bulk.prefetch.L2 and cp.async.bulk are sm_90's; the L2
  // prefetch by lines takes the same gate, as the policy holds for sm_90
  // and newer only (docs/tuning.md#l2-prefetch).
  bool bulk = getChipNumber(options.chip) >= 90;
  plan.l2Prefetch = plan.l2Prefetch && bulk;
  plan.bulkCopy = plan.bulkCopy && bulk;
  plan.producerWarp = plan.producerWarp && bulk;
  // mbarrier.try_wait is sm_90's too.
  plan.splitAbsmaxBarrier = plan.splitAbsmaxBarrier && bulk;
  return plan;
}

void mlir::qopt::buildQoptToNVVMPipeline(OpPassManager &pm,
                                         const KernelOptions &options) {
  pm.addPass(createConvertQoptToGPU(options.lowering));

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = getPTXFeatures(options.chip);
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &gpuModule = pm.nest<gpu::GPUModuleOp>();
  if (options.tabulateCodes)
    gpuModule.addPass(createTabulateCodes());
  if (options.exactUniformDivision)
    gpuModule.addPass(createExactUniformDivision());
  gpuModule.addPass(createSCFToControlFlowPass());
  gpuModule.addPass(createConvertGpuOpsToNVVMOps());
  gpuModule.addPass(createCanonicalizerPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// The module's own manifest (KernelOptions::manifestSymbol): a read-only
/// byte array in global memory (.global; the constant bank is the tables'
/// and is 64 KiB) with external linkage, so that cuModuleGetGlobal finds it
/// in the PTX, cubin and fatbin alike. Added last to each gpu.module, after
/// the kernels were lowered, so that no pass sees it and the kernels' code
/// is unchanged.
static LogicalResult addManifestGlobal(ModuleOp module,
                                       const KernelOptions &options) {
  if (options.manifestSymbol.empty())
    return success();
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    if (SymbolTable::lookupSymbolIn(gpuModule, options.manifestSymbol))
      return gpuModule.emitError("the GPU module already defines '")
             << options.manifestSymbol << "', the name of its manifest global";
    OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
    std::string text = options.manifestJson;
    text.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), text.size());
    LLVM::GlobalOp::create(b, gpuModule.getLoc(), type, /*isConstant=*/true,
                           LLVM::Linkage::External, options.manifestSymbol,
                           b.getStringAttr(text), /*alignment=*/1,
                           /*addrSpace=*/1);
  }
  return success();
}

FailureOr<std::string>
mlir::qopt::translateToPTX(ModuleOp module, const KernelOptions &options) {
  {
    PassManager pm(module.getContext());
    buildQoptToNVVMPipeline(pm, options);
    if (failed(pm.run(module)) || failed(addManifestGlobal(module, options)))
      return failure();
  }
  PassManager pm(module.getContext());
  GpuModuleToBinaryPassOptions toBinary;
  toBinary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(toBinary));
  // The kernels call no libdevice function, but the NVVM serializer looks for
  // libdevice in the CUDA toolkit and reports a missing one as an error (with
  // the whole module as a note) although it goes on and succeeds. PTX needs no
  // toolkit: drop that one report.
  ScopedDiagnosticHandler dropLibdevice(
      module.getContext(), [](Diagnostic &diag) {
        return success(diag.str().find("LibDevice path:") == 0);
      });
  if (failed(pm.run(module)))
    return failure();

  std::string ptx;
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (Attribute object : binary.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  // gpu-module-to-binary null-terminates the assembly for the driver's JIT.
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  if (ptx.empty())
    return module.emitError("the module holds no qopt.optimizer to compile");
  return ptx;
}

FailureOr<std::string>
mlir::qopt::translateToLLVMIR(ModuleOp module, const KernelOptions &options) {
  PassManager pm(module.getContext());
  buildQoptToNVVMPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    llvm::LLVMContext llvmContext;
    std::unique_ptr<llvm::Module> llvmModule =
        translateModuleToLLVMIR(gpuModule, llvmContext, gpuModule.getName());
    if (!llvmModule)
      return gpuModule.emitError("cannot translate to LLVM IR");
    llvmModule->setTargetTriple(llvm::Triple("nvptx64-nvidia-cuda"));
    llvmModule->print(os, nullptr);
  }
  return text;
}
