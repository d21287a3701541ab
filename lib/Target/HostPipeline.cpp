//===- HostPipeline.cpp - qopt IR to host LLVM IR and objects -------------===//
//
// convert-qopt-to-host, then the upstream conversions to the LLVM dialect,
// translation to LLVM IR, LLVM's -O pipeline and the host TargetMachine.
// Strict mode forbids FP contraction in the TargetMachine too, so that no
// backend fuses a multiply and an add whatever the CPU.
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Host.h"

#include "qopt/Conversion/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace mlir::qopt;

void mlir::qopt::buildQoptToHostPipeline(OpPassManager &pm,
                                         const HostOptions &options) {
  pm.addPass(createConvertQoptToHost(options.lowering));
  // Folds the bitcasts around 16-bit floats, so none reaches LLVM.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

/// The TargetMachine for the host triple and `options.cpu`.
static std::unique_ptr<llvm::TargetMachine>
createHostTargetMachine(const HostOptions &options, std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  std::string cpu = options.cpu.empty() ? "generic" : options.cpu;
  if (options.cpu != "native" && !options.cpu.empty()) {
    // An unknown CPU makes LLVM warn and then abort in code generation.
    std::unique_ptr<llvm::MCSubtargetInfo> info(
        target->createMCSubtargetInfo(triple, "generic", ""));
    if (info && !info->isCPUStringValid(cpu)) {
      error = "--host-cpu '" + cpu + "' is not a CPU LLVM knows for " +
              triple.str() + " (give 'native', an LLVM CPU name such as " +
              "x86-64-v3, or nothing for the baseline)";
      return nullptr;
    }
  }
  std::string features;
  if (options.cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      features += (features.empty() ? "" : ",") +
                  std::string(feature.second ? "+" : "-") +
                  feature.first().str();
  }
  llvm::TargetOptions targetOptions;
  targetOptions.AllowFPOpFusion = options.lowering.mode == ArithMode::Fast
                                      ? llvm::FPOpFusion::Fast
                                      : llvm::FPOpFusion::Strict;
  static const llvm::CodeGenOptLevel levels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
      llvm::CodeGenOptLevel::Default, llvm::CodeGenOptLevel::Aggressive};
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      levels[std::min(options.optLevel, 3u)]));
  if (!machine)
    error = "cannot create a target machine for " + triple.str() + " (cpu " +
            cpu + ")";
  return machine;
}

/// Lowers `module` to an optimized LLVM module for `machine`.
static std::unique_ptr<llvm::Module>
lowerToLLVM(ModuleOp module, const HostOptions &options,
            llvm::TargetMachine &machine, llvm::LLVMContext &llvmContext) {
  if (options.optLevel > 3) {
    module.emitError("the host optimization level must be 0 to 3, got ")
        << options.optLevel;
    return nullptr;
  }
  MLIRContext *context = module.getContext();
  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  PassManager pm(context);
  buildQoptToHostPipeline(pm, options);
  if (failed(pm.run(module)))
    return nullptr;
  if (module.getOps<LLVM::LLVMFuncOp>().empty()) {
    module.emitError("the module holds no qopt.optimizer to compile");
    return nullptr;
  }
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "qopt_host");
  if (!llvmModule) {
    module.emitError("cannot translate the host module to LLVM IR");
    return nullptr;
  }
  llvmModule->setTargetTriple(machine.getTargetTriple());
  llvmModule->setDataLayout(machine.createDataLayout());
  auto optimize = makeOptimizingTransformer(options.optLevel,
                                            /*sizeLevel=*/0, &machine);
  if (llvm::Error error = optimize(llvmModule.get())) {
    module.emitError("LLVM's optimizer failed: ")
        << llvm::toString(std::move(error));
    return nullptr;
  }
  // The library's own manifest, after the optimizer (nothing reads it here):
  // an exported, NUL-terminated constant the runtime finds with dlsym.
  if (!options.manifestSymbol.empty()) {
    if (llvmModule->getNamedValue(options.manifestSymbol)) {
      module.emitError("the host module already defines '")
          << options.manifestSymbol << "', the name of its manifest constant";
      return nullptr;
    }
    llvm::Constant *text = llvm::ConstantDataArray::getString(
        llvmContext, options.manifestJson, /*AddNull=*/true);
    auto *global = new llvm::GlobalVariable(
        *llvmModule, text->getType(), /*isConstant=*/true,
        llvm::GlobalValue::ExternalLinkage, text, options.manifestSymbol);
    global->setAlignment(llvm::Align(1));
  }
  return llvmModule;
}

FailureOr<std::string>
mlir::qopt::translateToHostLLVMIR(ModuleOp module, const HostOptions &options) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createHostTargetMachine(options, error);
  if (!machine)
    return module.emitError(error);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      lowerToLLVM(module, options, *machine, llvmContext);
  if (!llvmModule)
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  llvmModule->print(os, nullptr);
  return text;
}

FailureOr<std::string>
mlir::qopt::translateToHostObject(ModuleOp module, const HostOptions &options) {
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine =
      createHostTargetMachine(options, error);
  if (!machine)
    return module.emitError(error);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      lowerToLLVM(module, options, *machine, llvmContext);
  if (!llvmModule)
    return failure();
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("the host target cannot emit an object file");
  codegen.run(*llvmModule);
  return std::string(object.str());
}
