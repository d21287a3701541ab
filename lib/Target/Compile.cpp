//===- Compile.cpp - qopt-opt's compile mode ------------------------------===//
//
// spec.qopt -> (frontend) -> qopt IR -> outline uniforms -> gpu -> NVVM ->
// PTX -> ptxas -> cubin -> fatbinary -> fatbin, or -> host object -> c++
// -shared -> host library, with the manifest beside the binary. Every failure
// is reported with its location and a non-zero exit.
//
//===----------------------------------------------------------------------===//

#include "qopt/Target/Compile.h"
#include "qopt/Target/Target.h"
#include "qopt/Conversion/Passes.h"
#include "qopt/Target/Host.h"
#include "qopt/Schedule/Passes.h"
#include "qopt/Transforms/Passes.h"

#include "qopt/Dialect/Qopt/QoptOps.h"
#include "qopt/Frontend/Frontend.h"
#if __has_include("qopt/Frontend/MLIRGen.h")
#include "qopt/Frontend/MLIRGen.h"
#define QOPT_HAVE_MLIRGEN 1
#endif

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>

using namespace mlir;
using namespace mlir::qopt;
namespace cl = llvm::cl;

namespace {
enum class Emit { Qopt, GPU, LLVM, PTX, Cubin, Fatbin, HostLLVM, HostObject,
                   HostLibrary };
} // namespace

namespace {
/// Command-line options of the compile mode. Constructed only in compile mode,
/// so that they never meet MlirOptMain's options of the same names.
struct CompileOptions {
  cl::OptionCategory compileCategory{"qopt-opt compile options"};
  cl::opt<std::string> inputFilename{cl::Positional,
                                            cl::desc("<spec.qopt | input.mlir>"),
                                            cl::init("-"),
                                            cl::cat(compileCategory)};
  cl::opt<std::string> outputFilename{"o", cl::desc("Output file"),
                                             cl::value_desc("path"),
                                             cl::init("-"),
                                             cl::cat(compileCategory)};
  cl::opt<Emit> emitKind{
    "emit", cl::desc("What to emit"), cl::init(Emit::Qopt),
    cl::values(clEnumValN(Emit::Qopt, "qopt", "qopt IR, uniforms outlined"),
               clEnumValN(Emit::GPU, "gpu", "gpu dialect kernels"),
               clEnumValN(Emit::LLVM, "llvm", "LLVM IR for NVPTX"),
               clEnumValN(Emit::PTX, "ptx", "PTX assembly"),
               clEnumValN(Emit::Cubin, "cubin", "cubin (needs ptxas)"),
               clEnumValN(Emit::Fatbin, "fatbin",
                            "fatbin with sm_80 and sm_90 cubins and PTX "
                            "(needs ptxas and fatbinary)"),
               clEnumValN(Emit::HostLLVM, "host-llvm",
                          "optimized LLVM IR of the host function"),
               clEnumValN(Emit::HostObject, "host-object",
                          "host object file (ELF, PIC)"),
               clEnumValN(Emit::HostLibrary, "host-library",
                          "host shared library and its manifest (needs "
                          "c++)")),
    cl::cat(compileCategory)};
  cl::opt<std::string> arch{"arch",
                                   cl::desc("GPU architecture (sm_80, sm_90)"),
                                   cl::init("sm_90"), cl::cat(compileCategory)};
  cl::opt<std::string> mode{"mode",
                                   cl::desc("strict (bit-exact) or fast"),
                                   cl::init("strict"), cl::cat(compileCategory)};
  cl::opt<std::string> manifestFilename{
    "manifest",
    cl::desc("Where to write the kernel manifest (default: next to -o, "
             "<stem>.manifest.json, for ptx/cubin/fatbin)"),
    cl::value_desc("path"), cl::init(""), cl::cat(compileCategory)};
  cl::opt<int64_t> threadsPerBlock{
      "threads-per-block",
      cl::desc("Threads per block (0: 512 with async copies (group states, "
               "no codebook, a 16-bit parameter), for two or more states "
               "without a codebook, or for two or more states with codebook "
               "blocks of at most 256 and an f32 parameter; else 256)"),
      cl::init(0), cl::cat(compileCategory)};
  cl::opt<bool> tabulateCodes{
      "tabulate-codes",
      cl::desc("Dequantize 8-bit codes through compile-time tables (exact)"),
      cl::init(true), cl::cat(compileCategory)};
  cl::opt<int64_t> elementsPerThread{
      "elements-per-thread",
      cl::desc("Consecutive elements each GPU thread owns per tile (0: "
               "8 with async copies, else 16 for one state and 8 for more, "
               "more where a block needs a larger tile; at most the smallest "
               "group or block: a larger number is lowered to it, as the "
               "manifest's elements_per_thread shows)"),
      cl::init(0), cl::cat(compileCategory)};
  cl::opt<bool> exactUniformDivision{
      "exact-uniform-division",
      cl::desc("Divide by lane-uniform values through a proven reciprocal "
               "(exact; off by default: measured slower on the H200; "
               "implies --guarded-ieee=false)"),
      cl::init(false), cl::cat(compileCategory)};
  cl::opt<bool> checkedRounding{
      "checked-rounding",
      cl::desc("Strict mode: round quantization codes through approximate "
               "arithmetic where a margin proves the IEEE code (exact)"),
      cl::init(true), cl::cat(compileCategory)};
  cl::opt<bool> guardedIeee{
      "guarded-ieee",
      cl::desc("Strict mode: the update's IEEE division and square root as "
               "ptxas's fast-path sequence with one range check per thread "
               "(exact)"),
      cl::init(true), cl::cat(compileCategory)};
  cl::opt<AsyncCopy> asyncCopy{
      "async-copy",
      cl::desc("Copy each full tile's read streams into shared memory up to "
               "three tiles ahead with cp.async, so its loads are in flight "
               "while the tiles before it compute (exact; the manifest asks "
               "for the dynamic shared memory: 2 to 4 stages within 160 KiB, "
               "with codebook states within 99 KiB with their tables; "
               "streams of 4, 8 or a power of two times 16 bytes per "
               "thread)"),
      cl::values(clEnumValN(AsyncCopy::Auto, "auto",
                            "on for group states without a codebook and "
                            "a 16-bit parameter, and for two or more "
                            "states with codebook blocks of at most 256 "
                            "and a 16-bit parameter (measured on the H200), "
                            "else off"),
                 clEnumValN(AsyncCopy::On, "on", "always"),
                 clEnumValN(AsyncCopy::Off, "off", "never")),
      cl::init(AsyncCopy::Auto), cl::cat(compileCategory)};
  cl::opt<std::string> paramType{
    "param-type",
    cl::desc("Parameter and gradient type of the kernel: bf16, f16 or f32 "
             "(default: the spec's). An f32 parameter drops the spec's "
             "error bits; a changed type renames the kernel <name>_<type> "
             "(qopt-retype-param)"),
    cl::value_desc("type"), cl::init(""), cl::cat(compileCategory)};
  cl::opt<bool> gradScaling{
      "grad-scaling",
      cl::desc("Fuse GradScaler's unscale and inf/NaN skip into the step: "
               "hyperparameters grad_scale and found_inf, a kernel renamed "
               "<name>_scaled (qopt-fuse-grad-scaling)"),
      cl::init(false), cl::cat(compileCategory)};
  cl::opt<bool> codebookBuckets{
      "codebook-buckets",
      cl::desc("Codebook codes from one entry of a table of buckets of "
               "normalized values in dynamic shared memory (exact; the full "
               "search where a bucket holds more than one midpoint)"),
      cl::init(true), cl::cat(compileCategory)};
  cl::opt<bool> bulkCopy{
      "bulk-copy",
      cl::desc("Staged kernels on sm_90 and newer: fill the stages with bulk "
               "copies of whole tiles (cp.async.bulk) and a barrier per stage "
               "instead of each thread's cp.async (same results, the same "
               "shared memory; measured slower on the H200)"),
      cl::init(false), cl::cat(compileCategory)};
  cl::opt<int64_t> tileClaims{
      "tile-claims",
      cl::desc("Tiles past each block's static range claimed this many at a "
               "time from the launch's work counters (-1: the measured choice, "
               "chooseTileClaims; 0: none; never for staged kernels)"),
      cl::init(-1), cl::cat(compileCategory)};
  cl::opt<int64_t> tileClaimsStaticEighths{
      "tile-claims-static-eighths",
      cl::desc("The eighths of the tiles each block steps in its static range "
               "before it claims (1 to 8; 0: chooseTileClaims' choice, 5 with "
               "--tile-claims=n); no claims where --tile-claims or the choice "
               "makes none"),
      cl::init(0), cl::cat(compileCategory)};
  cl::opt<unsigned> hostOptLevel{"O", cl::Prefix,
                                 cl::desc("LLVM optimization level of host "
                                          "code (-O0 to -O3)"),
                                 cl::init(2), cl::cat(compileCategory)};
  cl::opt<std::string> hostCpu{
    "host-cpu",
    cl::desc("CPU of host code: empty for the triple's baseline, 'native', "
             "or an LLVM CPU name"),
    cl::init(""), cl::cat(compileCategory)};
};
} // namespace

static CompileOptions *opts = nullptr;

/// Chips that a fatbin carries cubins for.
static const char *const kFatbinChips[] = {"sm_80", "sm_90"};

/// sm_80 and newer, with an optional architecture-specific suffix (sm_90a),
/// that LLVM's NVPTX backend knows (an unknown one makes it warn and then
/// abort in instruction selection).
static bool isSupportedChip(llvm::StringRef chip) {
  unsigned sm = 0;
  llvm::StringRef number = chip;
  if (!number.consume_front("sm_"))
    return false;
  number.consume_back("a") || number.consume_back("f");
  if (number.getAsInteger(10, sm) || sm < 80)
    return false;
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return true; // no NVPTX backend to ask: gpu-module-to-binary will say
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "sm_80", ""));
  return !info || info->isCPUStringValid(chip);
}

static LogicalResult writeOutput(llvm::StringRef path, llvm::StringRef data) {
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output) {
    llvm::errs() << "qopt-opt: error: " << error << "\n";
    return failure();
  }
  output->os() << data;
  output->keep();
  return success();
}

/// Whether `text` is a spec rather than MLIR: its first word, after blank
/// space and // comments, is `optimizer` (an MLIR file starts with `module`,
/// an op name or an attribute alias, never that word).
static bool looksLikeSpec(llvm::StringRef text) {
  while (true) {
    text = text.ltrim();
    if (!text.consume_front("//"))
      break;
    text = text.drop_until([](char c) { return c == '\n'; });
  }
  return text.starts_with("optimizer") &&
         (text.size() == 9 || !(std::isalnum(static_cast<unsigned char>(text[9])) ||
                                text[9] == '_' || text[9] == '.'));
}

/// Loads the input as a spec (through the frontend) or as MLIR: a `.qopt`
/// file is a spec, a `.mlir` file MLIR, anything else (stdin included) what
/// its first word says.
static OwningOpRef<ModuleOp> loadInput(MLIRContext &context,
                                       llvm::SourceMgr &sourceMgr) {
  llvm::StringRef name = opts->inputFilename;
  std::string error;
  auto file = openInputFile(name, &error);
  if (!file) {
    llvm::errs() << "qopt-opt: error: " << error << "\n";
    return nullptr;
  }
  bool spec = name.ends_with(".qopt") ||
              (!name.ends_with(".mlir") && looksLikeSpec(file->getBuffer()));
  unsigned buffer = sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  if (spec) {
    std::unique_ptr<frontend::Spec> parsed = frontend::parseSpec(sourceMgr, buffer);
    if (!parsed)
      return nullptr;
#ifdef QOPT_HAVE_MLIRGEN
    return frontend::mlirGen(context, *parsed, sourceMgr);
#else
    llvm::errs() << "qopt-opt: error: this build has no MLIR generation\n";
    return nullptr;
#endif
  }
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// Attaches each optimizer's launch plan for `options` and `target`.
static LogicalResult planKernels(ModuleOp module, const KernelOptions &options,
                                 PlanTarget target) {
  PassManager pm(module.getContext());
  pm.addPass(createPlanKernel(getPlanKernelOptions(options, target)));
  return pm.run(module);
}

static std::string manifestPath() {
  if (!opts->manifestFilename.empty())
    return opts->manifestFilename;
  if (opts->outputFilename == "-")
    return "";
  llvm::SmallString<256> path(opts->outputFilename);
  llvm::sys::path::replace_extension(path, "manifest.json");
  return std::string(path);
}

int mlir::qopt::compileMain(int argc, char **argv, DialectRegistry &registry) {
  llvm::InitLLVM init(argc, argv);
  CompileOptions compileOptions;
  opts = &compileOptions;
  cl::HideUnrelatedOptions(opts->compileCategory);
  cl::ParseCommandLineOptions(argc, argv, "qopt-opt: compile a .qopt spec\n");

  if (opts->mode != "strict" && opts->mode != "fast") {
    llvm::errs() << "qopt-opt: error: --mode must be 'strict' or 'fast', got '"
                 << opts->mode << "'\n";
    return 1;
  }
  if (!opts->paramType.empty() && opts->paramType != "bf16" &&
      opts->paramType != "f16" && opts->paramType != "f32") {
    llvm::errs() << "qopt-opt: error: --param-type must be bf16, f16 or f32, "
                    "got '"
                 << opts->paramType << "'\n";
    return 1;
  }
  if (opts->tileClaims < -1 || opts->tileClaimsStaticEighths < 0 ||
      opts->tileClaimsStaticEighths > 8) {
    llvm::errs() << "qopt-opt: error: --tile-claims takes -1 (chosen), 0 "
                    "(none) or a positive number, and "
                    "--tile-claims-static-eighths 0 (chosen) or 1 to 8; got "
                 << opts->tileClaims << " and "
                 << opts->tileClaimsStaticEighths << "\n";
    return 1;
  }
  if (opts->threadsPerBlock < 0 || opts->elementsPerThread < 0) {
    llvm::errs() << "qopt-opt: error: --threads-per-block and "
                    "--elements-per-thread take 0 (chosen) or a positive "
                    "number, got "
                 << opts->threadsPerBlock << " and " << opts->elementsPerThread
                 << "\n";
    return 1;
  }
  // Never write over the input, nor the manifest over the binary.
  {
    auto same = [](llvm::StringRef a, llvm::StringRef b) {
      if (a == "-" || b == "-" || a.empty() || b.empty())
        return false;
      if (a == b)
        return true;
      bool equal = false;
      return !llvm::sys::fs::equivalent(a, b, equal) && equal;
    };
    bool writesManifest = opts->emitKind == Emit::PTX ||
                          opts->emitKind == Emit::Cubin ||
                          opts->emitKind == Emit::Fatbin ||
                          opts->emitKind == Emit::HostLibrary;
    std::string manifest = writesManifest ? manifestPath() : "";
    for (const std::string &out : {std::string(opts->outputFilename), manifest})
      if (same(out, opts->inputFilename)) {
        llvm::errs() << "qopt-opt: error: '" << out
                     << "' is the input; refusing to write over it\n";
        return 1;
      }
    if (same(manifest, opts->outputFilename)) {
      llvm::errs() << "qopt-opt: error: the manifest and the output are both '"
                   << manifest << "'; give -o or --manifest another path\n";
      return 1;
    }
  }
  if (!isSupportedChip(opts->arch)) {
    llvm::errs() << "qopt-opt: error: --arch must be a chip LLVM's NVPTX "
                    "backend knows, sm_80 or newer (sm_80, sm_86, sm_89, "
                    "sm_90, sm_90a, sm_100, ...), got '"
                 << opts->arch << "'\n";
    return 1;
  }
  bool host = opts->emitKind == Emit::HostLLVM ||
              opts->emitKind == Emit::HostObject ||
              opts->emitKind == Emit::HostLibrary;
  if ((opts->emitKind == Emit::Cubin || opts->emitKind == Emit::Fatbin) &&
      opts->outputFilename == "-") {
    llvm::errs() << "qopt-opt: error: --emit=cubin and --emit=fatbin write "
                    "binary data; give an output file with -o\n";
    return 1;
  }
  if ((opts->emitKind == Emit::HostObject ||
       opts->emitKind == Emit::HostLibrary) &&
      opts->outputFilename == "-") {
    llvm::errs() << "qopt-opt: error: --emit=host-object and "
                    "--emit=host-library write binary data; give an output "
                    "file with -o\n";
    return 1;
  }
  if (host && opts->hostOptLevel > 3) {
    llvm::errs() << "qopt-opt: error: -O must be 0 to 3, got "
                 << opts->hostOptLevel << "\n";
    return 1;
  }

  MLIRContext context(registry);
  // A diagnostic names the spec's source location; a dump of the whole op
  // would bury it.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = loadInput(context, sourceMgr);
  if (!module || failed(verify(*module)))
    return 1;

  KernelOptions options;
  options.chip = opts->arch;
  options.mode = opts->mode;
  options.threadsPerBlock = opts->threadsPerBlock;
  options.tabulateCodes = opts->tabulateCodes;
  options.exactUniformDivision = opts->exactUniformDivision;
  options.elementsPerThread = opts->elementsPerThread;
  options.checkedRounding = opts->checkedRounding;
  // The proven uniform division rewrites the arith.divf the lowering leaves;
  // the guarded sequence would leave none for it.
  options.guardedIeee = opts->guardedIeee && !opts->exactUniformDivision;
  options.codebookBuckets = opts->codebookBuckets;
  options.bulkCopy = opts->bulkCopy;
  options.tileClaims = opts->tileClaims;
  options.tileClaimsStaticEighths = opts->tileClaimsStaticEighths;
  options.asyncCopy = opts->asyncCopy;

  // Variants of the spec: another parameter type, fused grad scaling.
  if (!opts->paramType.empty() || opts->gradScaling) {
    PassManager pm(&context);
    if (!opts->paramType.empty()) {
      RetypeParamOptions retype;
      retype.type = opts->paramType;
      pm.addPass(createRetypeParam(retype));
    }
    if (opts->gradScaling)
      pm.addPass(createFuseGradScaling());
    if (failed(pm.run(*module)))
      return 1;
    if (opts->gradScaling)
      for (OptimizerOp op : module->getOps<OptimizerOp>())
        op.setSymName((op.getSymName() + "_scaled").str());
  }

  // Outline the uniforms unless the input already has them.
  bool outlined = false;
  module->walk([&](OptimizerOp op) { outlined |= bool(op.getUniforms()); });
  if (!outlined) {
    PassManager pm(&context);
    buildQoptOptimizationPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
  }
  if (opts->emitKind == Emit::Qopt) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return failed(writeOutput(opts->outputFilename, text)) ? 1 : 0;
  }

  // The launch plan, chosen once per target: the manifest and the lowering
  // read it.
  if (failed(planKernels(*module, options,
                         host ? PlanTarget::Host : PlanTarget::GPU)))
    return 1;

  // The manifest describes the kernel's ABI, so it is taken from the qopt IR.
  std::optional<llvm::json::Value> manifest;
  if (opts->emitKind == Emit::PTX || opts->emitKind == Emit::Cubin ||
      opts->emitKind == Emit::Fatbin) {
    llvm::StringRef format = opts->emitKind == Emit::PTX     ? "ptx"
                             : opts->emitKind == Emit::Cubin ? "cubin"
                                                       : "fatbin";
    FailureOr<llvm::json::Value> built = buildManifest(*module, options, format);
    if (failed(built))
      return 1;
    manifest = std::move(*built);
  }
  if (opts->emitKind == Emit::HostLibrary) {
    FailureOr<llvm::json::Value> built = buildManifest(*module, options, "host");
    if (failed(built))
      return 1;
    manifest = std::move(*built);
    makeHostManifest(*manifest,
                     llvm::sys::path::filename(opts->outputFilename));
  }
  HostOptions hostOptions;
  hostOptions.mode = options.mode;
  hostOptions.optLevel = opts->hostOptLevel;
  hostOptions.cpu = opts->hostCpu;

  std::string result;
  switch (opts->emitKind) {
  case Emit::Qopt:
    break;
  case Emit::GPU: {
    PassManager pm(&context);
    pm.addPass(createConvertQoptToGPU(getConvertQoptToGPUOptions(options)));
    if (failed(pm.run(*module)))
      return 1;
    llvm::raw_string_ostream os(result);
    module->print(os);
    break;
  }
  case Emit::LLVM: {
    FailureOr<std::string> ir = translateToLLVMIR(*module, options);
    if (failed(ir))
      return 1;
    result = *ir;
    break;
  }
  case Emit::PTX:
  case Emit::Cubin: {
    FailureOr<std::string> ptx = translateToPTX(*module, options);
    if (failed(ptx))
      return 1;
    result = *ptx;
    if (opts->emitKind == Emit::Cubin) {
      std::string error;
      FailureOr<std::string> cubin = assemblePTX(result, opts->arch, error);
      if (failed(cubin)) {
        llvm::errs() << "qopt-opt: error: cannot make a cubin: " << error
                     << "\n";
        return 1;
      }
      result = *cubin;
    }
    break;
  }
  case Emit::Fatbin: {
    // PTX for the oldest chip (the driver JIT-compiles it for newer ones) and
    // a cubin per chip, each from PTX generated for that chip.
    std::vector<std::pair<std::string, std::string>> cubins;
    std::string ptxForJit;
    for (const char *chip : kFatbinChips) {
      OwningOpRef<ModuleOp> clone = module->clone();
      KernelOptions chipOptions = options;
      chipOptions.chip = chip;
      // The chip's own plan (its L2 prefetch and bulk copies).
      if (failed(planKernels(*clone, chipOptions, PlanTarget::GPU)))
        return 1;
      FailureOr<std::string> ptx = translateToPTX(*clone, chipOptions);
      if (failed(ptx))
        return 1;
      std::string error;
      FailureOr<std::string> cubin = assemblePTX(*ptx, chip, error);
      if (failed(cubin)) {
        llvm::errs() << "qopt-opt: error: cannot make a cubin for " << chip
                     << ": " << error << "\n";
        return 1;
      }
      cubins.push_back({chip, *cubin});
      if (ptxForJit.empty())
        ptxForJit = *ptx;
    }
    std::string error;
    FailureOr<std::string> fatbin =
        createFatbin(ptxForJit, kFatbinChips[0], cubins, error);
    if (failed(fatbin)) {
      llvm::errs() << "qopt-opt: error: cannot make a fatbin: " << error
                   << "\n";
      return 1;
    }
    result = *fatbin;
    break;
  }
  case Emit::HostLLVM:
  case Emit::HostObject:
  case Emit::HostLibrary: {
    FailureOr<std::string> code =
        opts->emitKind == Emit::HostLLVM
            ? translateToHostLLVMIR(*module, hostOptions)
            : translateToHostObject(*module, hostOptions);
    if (failed(code))
      return 1;
    result = *code;
    if (opts->emitKind == Emit::HostLibrary) {
      std::string error;
      FailureOr<std::string> library = linkHostLibrary(result, error);
      if (failed(library)) {
        llvm::errs() << "qopt-opt: error: cannot make the host library: "
                     << error << "\n";
        return 1;
      }
      result = *library;
    }
    break;
  }
  }

  if (failed(writeOutput(opts->outputFilename, result)))
    return 1;
  if (manifest) {
    std::string path = manifestPath();
    if (!path.empty()) {
      // The binary written with -o, named relative to the manifest.
      if (opts->outputFilename != "-" && !host) {
        llvm::json::Object binary{
            {"format", opts->emitKind == Emit::PTX     ? "ptx"
                       : opts->emitKind == Emit::Cubin ? "cubin"
                                                   : "fatbin"},
            {"arch", opts->emitKind == Emit::Fatbin ? std::string(kFatbinChips[0])
                                                : std::string(opts->arch)},
            {"path", llvm::sys::path::filename(opts->outputFilename).str()}};
        manifest->getAsObject()->insert(
            {"binaries", llvm::json::Array{std::move(binary)}});
      }
      std::string text;
      llvm::raw_string_ostream os(text);
      os << llvm::formatv("{0:2}", *manifest) << "\n";
      if (failed(writeOutput(path, text)))
        return 1;
    }
  }
  return 0;
}
