//===- Compile.cpp - From a spec to a binary and its manifest -------------===//
//
// spec.qopt -> (frontend) -> qopt IR -> outline uniforms -> launch plan ->
// gpu -> NVVM -> PTX -> ptxas -> cubin -> fatbinary -> fatbin, or -> host
// object -> c++ -shared -> host library, with the manifest beside the
// binary. Every failure is reported with its location and a non-zero exit.
// The command line that fills a CompileRequest is qopt-opt's
// (tools/qopt-opt/CompileOptions.cpp).
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
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>

using namespace mlir;
using namespace mlir::qopt;

/// Chips that a fatbin carries cubins for.
static const char *const kFatbinChips[] = {"sm_80", "sm_90"};

/// sm_80 and newer, with an optional architecture-specific suffix (sm_90a),
/// that LLVM's NVPTX backend knows (an unknown one makes it warn and then
/// abort in instruction selection).
bool mlir::qopt::isSupportedChip(llvm::StringRef chip) {
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
static OwningOpRef<ModuleOp> loadInput(llvm::StringRef name,
                                       MLIRContext &context,
                                       llvm::SourceMgr &sourceMgr) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      frontend::readInputFile(name, error);
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

std::string mlir::qopt::getManifestPath(const CompileRequest &request) {
  if (!request.manifestFilename.empty())
    return request.manifestFilename;
  if (request.outputFilename == "-")
    return "";
  llvm::SmallString<256> path(request.outputFilename);
  llvm::sys::path::replace_extension(path, "manifest.json");
  return std::string(path);
}

/// The binary written with -o as the manifest names it: relative to the
/// manifest's directory, where the runtime resolves it (just the file name
/// when both are written in one directory; "../lib/x.so" for -o lib/x.so
/// with --manifest=man/x.manifest.json).
static std::string getBinaryPathForManifest(const CompileRequest &request) {
  llvm::StringRef output = request.outputFilename;
  std::string manifest = getManifestPath(request);
  if (output == "-" || manifest.empty())
    return llvm::sys::path::filename(output).str();
  llvm::SmallString<256> out(output), dir(manifest);
  if (llvm::sys::fs::make_absolute(out) || llvm::sys::fs::make_absolute(dir))
    return llvm::sys::path::filename(output).str();
  llvm::sys::path::remove_dots(out, /*remove_dot_dot=*/true);
  llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  llvm::sys::path::remove_filename(dir);
  auto o = llvm::sys::path::begin(out), oEnd = llvm::sys::path::end(out);
  auto d = llvm::sys::path::begin(dir), dEnd = llvm::sys::path::end(dir);
  while (o != oEnd && d != dEnd && *o == *d) {
    ++o;
    ++d;
  }
  llvm::SmallString<256> relative;
  for (; d != dEnd; ++d)
    llvm::sys::path::append(relative, llvm::sys::path::Style::posix, "..");
  for (; o != oEnd; ++o)
    llvm::sys::path::append(relative, llvm::sys::path::Style::posix, *o);
  return std::string(relative);
}

static bool isHostEmit(EmitKind emit) {
  return emit == EmitKind::HostLLVM || emit == EmitKind::HostObject ||
         emit == EmitKind::HostLibrary;
}

/// The spec's variant (another parameter type, fused grad scaling, another
/// overflow policy) with its uniforms outlined, unless the input already has
/// them.
static LogicalResult prepareModule(ModuleOp module,
                                   const CompileRequest &request) {
  MLIRContext *context = module.getContext();
  if (!request.paramType.empty() || request.gradScaling ||
      !request.overflow.empty()) {
    PassManager pm(context);
    if (!request.overflow.empty()) {
      SetOverflowOptions overflow;
      overflow.policy = request.overflow;
      pm.addPass(createSetOverflow(overflow));
    }
    if (!request.paramType.empty()) {
      RetypeParamOptions retype;
      retype.type = request.paramType;
      pm.addPass(createRetypeParam(retype));
    }
    if (request.gradScaling)
      pm.addPass(createFuseGradScaling());
    if (failed(pm.run(module)))
      return failure();
    if (request.gradScaling)
      for (OptimizerOp op : module.getOps<OptimizerOp>())
        op.setSymName((op.getSymName() + "_scaled").str());
  }
  bool outlined = false;
  module->walk([&](OptimizerOp op) { outlined |= bool(op.getUniforms()); });
  if (outlined)
    return success();
  PassManager pm(context);
  buildQoptOptimizationPipeline(pm);
  return pm.run(module);
}

/// The manifest of a planned module for the emitted binary, if it has one.
/// The manifest describes the kernel's ABI, so it is taken from the qopt IR.
static FailureOr<std::optional<llvm::json::Value>>
buildRequestedManifest(ModuleOp module, const CompileRequest &request) {
  const KernelOptions &options = request.kernel;
  if (request.emit == EmitKind::PTX || request.emit == EmitKind::Cubin ||
      request.emit == EmitKind::Fatbin) {
    llvm::StringRef format = request.emit == EmitKind::PTX     ? "ptx"
                             : request.emit == EmitKind::Cubin ? "cubin"
                                                               : "fatbin";
    FailureOr<llvm::json::Value> built = buildManifest(module, options, format);
    if (failed(built))
      return failure();
    return std::optional<llvm::json::Value>(std::move(*built));
  }
  if (request.emit == EmitKind::HostLibrary) {
    FailureOr<llvm::json::Value> built = buildManifest(module, options, "host");
    if (failed(built))
      return failure();
    makeHostManifest(*built, getBinaryPathForManifest(request));
    return std::optional<llvm::json::Value>(std::move(*built));
  }
  return std::optional<llvm::json::Value>();
}

/// The host code's own manifest (docs/abi.md, "The host library's
/// manifest"): the one written beside a library, or for an object or LLVM IR
/// the one --emit=host-library would write for a library of the output's
/// name. `request.host` gets it, compact, under `<entry>_manifest`.
static LogicalResult embedHostManifest(
    ModuleOp module, CompileRequest &request,
    const std::optional<llvm::json::Value> &written) {
  std::optional<llvm::json::Value> manifest = written;
  if (!manifest) {
    FailureOr<llvm::json::Value> built =
        buildManifest(module, request.kernel, "host");
    if (failed(built))
      return failure();
    llvm::SmallString<128> library(
        request.outputFilename == "-"
            ? llvm::StringRef(built->getAsObject()->getString("kernel")
                                  .value_or("kernel"))
            : llvm::sys::path::filename(request.outputFilename));
    llvm::sys::path::replace_extension(library, "so");
    makeHostManifest(*built, library);
    manifest = std::move(*built);
  }
  const llvm::json::Object *host =
      manifest->getAsObject()->getObject("host");
  std::optional<llvm::StringRef> entry =
      host ? host->getString("symbol") : std::nullopt;
  if (!entry)
    return module.emitError("the host manifest names no entry symbol");
  request.host.manifestSymbol = getHostManifestSymbol(*entry);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *manifest;
  request.host.manifestJson = std::move(text);
  return success();
}

/// A fatbin: PTX for the oldest chip (the driver JIT-compiles it for newer
/// ones) and a cubin per chip, each from PTX generated and planned for that
/// chip (its L2 prefetch and bulk copies).
static FailureOr<std::string> compileFatbin(ModuleOp module,
                                            const KernelOptions &options) {
  std::vector<std::pair<std::string, std::string>> cubins;
  std::string ptxForJit;
  for (const char *chip : kFatbinChips) {
    OwningOpRef<ModuleOp> clone = module.clone();
    KernelOptions chipOptions = options;
    chipOptions.chip = chip;
    if (failed(planKernels(*clone, chipOptions, PlanTarget::GPU)))
      return failure();
    FailureOr<std::string> ptx = translateToPTX(*clone, chipOptions);
    if (failed(ptx))
      return failure();
    std::string error;
    FailureOr<std::string> cubin = assemblePTX(*ptx, chip, error);
    if (failed(cubin)) {
      llvm::errs() << "qopt-opt: error: cannot make a cubin for " << chip
                   << ": " << error << "\n";
      return failure();
    }
    cubins.push_back({chip, *cubin});
    if (ptxForJit.empty())
      ptxForJit = *ptx;
  }
  std::string error;
  FailureOr<std::string> fatbin =
      createFatbin(ptxForJit, kFatbinChips[0], cubins, error);
  if (failed(fatbin)) {
    llvm::errs() << "qopt-opt: error: cannot make a fatbin: " << error << "\n";
    return failure();
  }
  return *fatbin;
}

/// The host code of a planned module: LLVM IR, an object or a library.
static FailureOr<std::string> compileHost(ModuleOp module,
                                          const CompileRequest &request) {
  FailureOr<std::string> code =
      request.emit == EmitKind::HostLLVM
          ? translateToHostLLVMIR(module, request.host)
          : translateToHostObject(module, request.host);
  if (failed(code) || request.emit != EmitKind::HostLibrary)
    return code;
  std::string error;
  FailureOr<std::string> library = linkHostLibrary(*code, error);
  if (failed(library)) {
    llvm::errs() << "qopt-opt: error: cannot make the host library: " << error
                 << "\n";
    return failure();
  }
  return library;
}

/// The requested output of a planned module (not --emit=qopt).
static FailureOr<std::string> compileModule(ModuleOp module,
                                            const CompileRequest &request) {
  const KernelOptions &options = request.kernel;
  switch (request.emit) {
  case EmitKind::Qopt:
    break;
  case EmitKind::GPU: {
    PassManager pm(module.getContext());
    pm.addPass(createConvertQoptToGPU(options.lowering));
    if (failed(pm.run(module)))
      return failure();
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return text;
  }
  case EmitKind::LLVM:
    return translateToLLVMIR(module, options);
  case EmitKind::PTX:
    return translateToPTX(module, options);
  case EmitKind::Cubin: {
    FailureOr<std::string> ptx = translateToPTX(module, options);
    if (failed(ptx))
      return failure();
    std::string error;
    FailureOr<std::string> cubin = assemblePTX(*ptx, options.chip, error);
    if (failed(cubin))
      llvm::errs() << "qopt-opt: error: cannot make a cubin: " << error
                   << "\n";
    return cubin;
  }
  case EmitKind::Fatbin:
    return compileFatbin(module, options);
  case EmitKind::HostLLVM:
  case EmitKind::HostObject:
  case EmitKind::HostLibrary:
    return compileHost(module, request);
  }
  llvm_unreachable("unknown emit kind");
}

/// The GPU module's own manifest (docs/abi.md, "The GPU module's
/// manifest"): the one written beside the PTX, cubin or fatbin, before
/// writeManifest names the binary in it (where the files are is no part of
/// the ABI, and a binary does not depend on its file's name).
/// `request.kernel` gets it, compact, under `<entry>_manifest`, for every
/// PTX the binary is made of.
static void embedGpuManifest(const llvm::json::Value &manifest,
                             CompileRequest &request) {
  const llvm::json::Object &object = *manifest.getAsObject();
  llvm::StringRef entry = object.getString("entry").value_or(
      object.getString("kernel").value_or(""));
  request.kernel.manifestSymbol = getGpuManifestSymbol(entry);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << manifest;
  request.kernel.manifestJson = std::move(text);
}

/// The binaries that the manifest already at `path` names (PTX, cubin,
/// fatbin or host library; relative to its directory) and that still exist;
/// none where there is no readable manifest.
static std::vector<std::string> existingDescribedBinaries(llvm::StringRef path) {
  uint64_t size = 0;
  if (llvm::sys::fs::file_size(path, size) || size > (16u << 20))
    return {};
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return {};
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return {};
  }
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return {};
  std::vector<std::string> names;
  if (const llvm::json::Array *binaries = root->getArray("binaries"))
    for (const llvm::json::Value &b : *binaries)
      if (const llvm::json::Object *o = b.getAsObject())
        if (std::optional<llvm::StringRef> p = o->getString("path"))
          names.push_back(p->str());
  if (const llvm::json::Object *host = root->getObject("host"))
    if (std::optional<llvm::StringRef> lib = host->getString("library"))
      names.push_back(lib->str());
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  std::vector<std::string> existing;
  for (const std::string &n : names) {
    llvm::SmallString<256> full(dir);
    llvm::sys::path::append(full, n);
    if (llvm::sys::fs::exists(full))
      existing.push_back(n);
  }
  return existing;
}

/// Writes `manifest` where the request says, naming the binary written with
/// -o relative to its directory. Where that overwrites the manifest of
/// another binary that stays beside it (`-o x.ptx`, then `-o x.so` in one
/// folder), a warning names it: that binary no longer loads through the
/// manifest.
static LogicalResult writeManifest(llvm::json::Value manifest,
                                   const CompileRequest &request) {
  std::string path = getManifestPath(request);
  if (path.empty())
    return success();
  std::string written = request.outputFilename == "-"
                            ? std::string()
                            : getBinaryPathForManifest(request);
  for (const std::string &old : existingDescribedBinaries(path))
    if (old != written)
      llvm::errs() << "qopt-opt: warning: " << path << " described " << old
                   << ", which stays beside it; the manifest written now "
                      "describes "
                   << (written.empty() ? std::string("no file") : written)
                   << " only, so " << old
                   << " no longer loads through it (write the outputs under "
                      "different names, or this manifest elsewhere with "
                      "--manifest=PATH)\n";
  if (request.outputFilename != "-" && !isHostEmit(request.emit)) {
    llvm::json::Object binary{
        {"format", request.emit == EmitKind::PTX     ? "ptx"
                   : request.emit == EmitKind::Cubin ? "cubin"
                                                     : "fatbin"},
        {"arch", request.emit == EmitKind::Fatbin
                     ? std::string(kFatbinChips[0])
                     : request.kernel.chip},
        {"path", getBinaryPathForManifest(request)}};
    manifest.getAsObject()->insert(
        {"binaries", llvm::json::Array{std::move(binary)}});
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", manifest) << "\n";
  return writeOutput(path, text);
}

int mlir::qopt::compileSpec(const CompileRequest &request,
                            DialectRegistry &registry) {
  MLIRContext context(registry);
  // A diagnostic names the spec's source location; a dump of the whole op
  // would bury it.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      loadInput(request.inputFilename, context, sourceMgr);
  if (!module || failed(verify(*module)) ||
      failed(prepareModule(*module, request)))
    return 1;
  if (request.emit == EmitKind::Qopt) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return failed(writeOutput(request.outputFilename, text)) ? 1 : 0;
  }

  // The launch plan, chosen once per target: the manifest and the lowering
  // read it.
  PlanTarget target =
      isHostEmit(request.emit) ? PlanTarget::Host : PlanTarget::GPU;
  if (failed(planKernels(*module, request.kernel, target)))
    return 1;
  FailureOr<std::optional<llvm::json::Value>> manifest =
      buildRequestedManifest(*module, request);
  if (failed(manifest))
    return 1;
  // One manifest, built once: the binary embeds it and it is written beside.
  CompileRequest compiled = request;
  if (isHostEmit(request.emit) &&
      failed(embedHostManifest(*module, compiled, *manifest)))
    return 1;
  if (!isHostEmit(request.emit) && *manifest)
    embedGpuManifest(**manifest, compiled);
  FailureOr<std::string> result = compileModule(*module, compiled);
  if (failed(result) || failed(writeOutput(request.outputFilename, *result)))
    return 1;
  if (*manifest && failed(writeManifest(std::move(**manifest), request)))
    return 1;
  return 0;
}
