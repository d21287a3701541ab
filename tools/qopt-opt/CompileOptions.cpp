//===- CompileOptions.cpp - qopt-opt's compile-mode command line ----------===//
//
// The flags of `qopt-opt spec.qopt --emit=...`: parsed and checked here, then
// handed to the compile library (qopt/Target/Compile.h) as one request. The
// pass options behind them are forwarded as the passes' generated option
// structs (KernelOptions).
//
//===----------------------------------------------------------------------===//

#include "CompileOptions.h"

#include "qopt/Target/Compile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::qopt;
namespace cl = llvm::cl;

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
  cl::opt<EmitKind> emitKind{
    "emit", cl::desc("What to emit"), cl::init(EmitKind::Qopt),
    cl::values(clEnumValN(EmitKind::Qopt, "qopt", "qopt IR, uniforms outlined"),
               clEnumValN(EmitKind::GPU, "gpu", "gpu dialect kernels"),
               clEnumValN(EmitKind::LLVM, "llvm", "LLVM IR for NVPTX"),
               clEnumValN(EmitKind::PTX, "ptx", "PTX assembly"),
               clEnumValN(EmitKind::Cubin, "cubin", "cubin (needs ptxas)"),
               clEnumValN(EmitKind::Fatbin, "fatbin",
                            "fatbin with sm_80 and sm_90 cubins and PTX "
                            "(needs ptxas and fatbinary)"),
               clEnumValN(EmitKind::HostLLVM, "host-llvm",
                          "optimized LLVM IR of the host function"),
               clEnumValN(EmitKind::HostObject, "host-object",
                          "host object file (ELF, PIC)"),
               clEnumValN(EmitKind::HostLibrary, "host-library",
                          "host shared library and its manifest (needs "
                          "c++)")),
    cl::cat(compileCategory)};
  cl::opt<std::string> arch{"arch",
                                   cl::desc("GPU architecture (sm_80, sm_90)"),
                                   cl::init("sm_90"), cl::cat(compileCategory)};
  /// A string, so that a wrong one gets this tool's message; checkFlags
  /// turns it into the passes' ArithMode.
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
      cl::desc("Threads per block (0: 512 with async copies (group or 16-bit "
               "states, a 16-bit parameter), for two or more states "
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
               "8, 16 for one group state unstaged, more where a block needs a "
               "larger tile; at most the smallest "
               "group or block: a larger number is lowered to it, as the "
               "manifest's elements_per_thread shows)"),
      cl::init(0), cl::cat(compileCategory)};
  cl::opt<bool> exactUniformDivision{
      "exact-uniform-division",
      cl::desc("Divide by lane-uniform values through a proven reciprocal "
               "(exact; off by default, docs/tuning.md \"Proven uniform "
               "division\"; implies --guarded-ieee=false)"),
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
                            "on for states that are all group or 16-bit "
                            "plain ones and a 16-bit parameter, and for two or more "
                            "states with codebook blocks of at most 256 "
                            "and a 16-bit parameter (docs/tuning.md \"Async "
                            "copies\"), else off"),
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
  cl::opt<std::string> overflow{
      "overflow",
      cl::desc("Overflow policy of every quantized state: saturate (a scale "
               "that does not fit its type stores the largest finite value, "
               "counted) or ieee (the authors' infinity), default: the "
               "spec's (qopt-set-overflow; docs/numerics.md \"Overflow\")"),
      cl::value_desc("policy"), cl::init(""), cl::cat(compileCategory)};
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
               "shared memory; off by default, docs/tuning.md \"Bulk "
               "copies\")"),
      cl::init(false), cl::cat(compileCategory)};
  cl::opt<bool> bulkCopyProducer{
      "bulk-copy-producer",
      cl::desc("Staged kernels on sm_90 and newer with two or more group "
               "states (the policy's choice) and no codebook state, reduction "
               "or group across warps: bulk copies issued by one warp more per "
               "block, the other warps waiting for a stage and counting "
               "themselves done with it on its mbarrier (same results; the "
               "manifest's launch.producer_warps; off by default, "
               "docs/tuning.md#producer-warp)"),
      cl::init(false), cl::cat(compileCategory)};
  cl::opt<bool> splitAbsmaxBarrier{
      "split-absmax-barrier",
      cl::desc("Codebook blocks that span warps, on sm_90 and newer: the "
               "warps' maxima exchanged through an mbarrier's arrive (once "
               "the tile's states are computed) and wait (before their codes) "
               "instead of one bar.sync (same results; docs/tuning.md "
               "\"Split absmax barrier\")"),
      cl::init(true), cl::cat(compileCategory)};
  cl::opt<int64_t> l2PrefetchTiles{
      "l2-prefetch-tiles",
      cl::desc("On sm_90 and newer: the full tile this many tiles ahead (at "
               "most 1024) is prefetched into L2 (-1: the measured choice, "
               "docs/tuning.md \"L2 prefetch\"; 0: none); a staged kernel "
               "takes it only past the tiles its copies run ahead, by each "
               "thread's lines"),
      cl::init(-1), cl::cat(compileCategory)};
  cl::opt<L2PrefetchKind> l2PrefetchKind{
      "l2-prefetch-kind",
      cl::desc("Who issues an unstaged kernel's L2 prefetch, where it has "
               "one (--l2-prefetch-tiles or the measured choice)"),
      cl::values(clEnumValN(L2PrefetchKind::Auto, "auto",
                            "the measured choice (docs/tuning.md \"L2 "
                            "prefetch\")"),
                 clEnumValN(L2PrefetchKind::Bulk, "bulk",
                            "thread 0: one cp.async.bulk.prefetch.L2 of each "
                            "read stream's tile"),
                 clEnumValN(L2PrefetchKind::Lines, "lines",
                            "every thread: prefetch.global.L2 of its own "
                            "lanes")),
      cl::init(L2PrefetchKind::Auto), cl::cat(compileCategory)};
  cl::opt<RegisterPrefetch> registerPrefetch{
      "register-prefetch",
      cl::desc("Unstaged kernels: the next full tile's read streams (not "
               "packed 4-bit codes) loaded into registers before the current "
               "tile's work, the loop carrying them (same results)"),
      cl::values(clEnumValN(RegisterPrefetch::Auto, "auto",
                            "the measured choice (docs/tuning.md "
                            "\"Register prefetch\")"),
                 clEnumValN(RegisterPrefetch::On, "on",
                            "every unstaged kernel's step (not the reduce "
                            "pre-pass)"),
                 clEnumValN(RegisterPrefetch::Off, "off", "never")),
      cl::init(RegisterPrefetch::Auto), cl::cat(compileCategory)};
  cl::opt<int64_t> minBlocksPerSM{
      "min-blocks-per-sm",
      cl::desc("The blocks per multiprocessor the kernel's registers are "
               "bounded for (nvvm.minctasm; -1: the measured choice, "
               "docs/tuning.md \"Register bounds\"; 0: no bound; at most "
               "2048 threads in all, e.g. 8 blocks of 256)"),
      cl::init(-1), cl::cat(compileCategory)};
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

/// The request the flags describe.
static CompileRequest makeRequest(const CompileOptions &opts) {
  CompileRequest request;
  request.inputFilename = opts.inputFilename;
  request.outputFilename = opts.outputFilename;
  request.manifestFilename = opts.manifestFilename;
  request.emit = opts.emitKind;
  request.paramType = opts.paramType;
  request.gradScaling = opts.gradScaling;
  request.overflow = opts.overflow;

  KernelOptions &kernel = request.kernel;
  kernel.chip = opts.arch;
  kernel.tabulateCodes = opts.tabulateCodes;
  kernel.exactUniformDivision = opts.exactUniformDivision;
  kernel.plan.threadsPerBlock = opts.threadsPerBlock;
  kernel.plan.elementsPerThread = opts.elementsPerThread;
  kernel.plan.asyncCopy = opts.asyncCopy;
  kernel.plan.tileClaims = opts.tileClaims;
  kernel.plan.tileClaimsStaticEighths = opts.tileClaimsStaticEighths;
  kernel.plan.codebookBuckets = opts.codebookBuckets;
  kernel.plan.bulkCopy = opts.bulkCopy;
  kernel.plan.producerWarp = opts.bulkCopyProducer;
  kernel.plan.splitAbsmaxBarrier = opts.splitAbsmaxBarrier;
  kernel.plan.l2PrefetchTiles = opts.l2PrefetchTiles;
  kernel.plan.l2PrefetchKind = opts.l2PrefetchKind;
  kernel.plan.registerPrefetch = opts.registerPrefetch;
  kernel.plan.minBlocksPerSM = opts.minBlocksPerSM;
  ArithMode mode = opts.mode == "fast" ? ArithMode::Fast : ArithMode::Strict;
  kernel.lowering.mode = mode;
  kernel.lowering.checkedRounding = opts.checkedRounding;
  // The proven uniform division rewrites the arith.divf the lowering leaves;
  // the guarded sequence would leave none for it.
  kernel.lowering.guardedIeee = opts.guardedIeee && !opts.exactUniformDivision;

  request.host.lowering.mode = mode;
  request.host.optLevel = opts.hostOptLevel;
  request.host.cpu = opts.hostCpu;
  return request;
}

/// Whether --`flag`'s `value` is -1 (chosen), 0 (`zero`) or a number of
/// `unit` up to `max`; reports it otherwise.
static LogicalResult checkChosenOrUpTo(llvm::StringRef flag, int64_t value,
                                       llvm::StringRef zero,
                                       llvm::StringRef unit, int64_t max) {
  if (value >= -1 && value <= max)
    return success();
  llvm::errs() << "qopt-opt: error: --" << flag << " takes -1 (chosen), 0 ("
               << zero << ") or a number of " << unit << " up to " << max
               << ", got " << value << "\n";
  return failure();
}

/// Checks the flags' values and their combination; reports the first that
/// does not hold.
static LogicalResult checkFlags(const CompileOptions &opts,
                                const CompileRequest &request) {
  if (opts.mode != "strict" && opts.mode != "fast") {
    llvm::errs() << "qopt-opt: error: --mode must be 'strict' or 'fast', got '"
                 << opts.mode << "'\n";
    return failure();
  }
  if (!opts.paramType.empty() && opts.paramType != "bf16" &&
      opts.paramType != "f16" && opts.paramType != "f32") {
    llvm::errs() << "qopt-opt: error: --param-type must be bf16, f16 or f32, "
                    "got '"
                 << opts.paramType << "'\n";
    return failure();
  }
  if (!opts.overflow.empty() && opts.overflow != "saturate" &&
      opts.overflow != "ieee") {
    llvm::errs() << "qopt-opt: error: --overflow must be saturate or ieee, "
                    "got '"
                 << opts.overflow << "'\n";
    return failure();
  }
  if (opts.tileClaims < -1 || opts.tileClaimsStaticEighths < 0 ||
      opts.tileClaimsStaticEighths > 8) {
    llvm::errs() << "qopt-opt: error: --tile-claims takes -1 (chosen), 0 "
                    "(none) or a positive number, and "
                    "--tile-claims-static-eighths 0 (chosen) or 1 to 8; got "
                 << opts.tileClaims << " and "
                 << opts.tileClaimsStaticEighths << "\n";
    return failure();
  }
  if (failed(checkChosenOrUpTo("l2-prefetch-tiles", opts.l2PrefetchTiles,
                               "none", "tiles",
                               PlanRequest::kMaxL2PrefetchTiles)) ||
      failed(checkChosenOrUpTo("min-blocks-per-sm", opts.minBlocksPerSM,
                               "no bound", "blocks",
                               PlanRequest::kMaxMinBlocksPerSM)))
    return failure();
  if (opts.threadsPerBlock < 0 || opts.elementsPerThread < 0) {
    llvm::errs() << "qopt-opt: error: --threads-per-block and "
                    "--elements-per-thread take 0 (chosen) or a positive "
                    "number, got "
                 << opts.threadsPerBlock << " and " << opts.elementsPerThread
                 << "\n";
    return failure();
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
    bool writesManifest = opts.emitKind == EmitKind::PTX ||
                          opts.emitKind == EmitKind::Cubin ||
                          opts.emitKind == EmitKind::Fatbin ||
                          opts.emitKind == EmitKind::HostLibrary;
    std::string manifest = writesManifest ? getManifestPath(request) : "";
    for (const std::string &out : {std::string(opts.outputFilename), manifest})
      if (same(out, opts.inputFilename)) {
        llvm::errs() << "qopt-opt: error: '" << out
                     << "' is the input; refusing to write over it\n";
        return failure();
      }
    if (same(manifest, opts.outputFilename)) {
      llvm::errs() << "qopt-opt: error: the manifest and the output are both '"
                   << manifest << "'; give -o or --manifest another path\n";
      return failure();
    }
  }
  if (!isSupportedChip(opts.arch)) {
    llvm::errs() << "qopt-opt: error: --arch must be a chip LLVM's NVPTX "
                    "backend knows, sm_80 or newer (sm_80, sm_86, sm_89, "
                    "sm_90, sm_90a, sm_100, ...), got '"
                 << opts.arch << "'\n";
    return failure();
  }
  if ((opts.emitKind == EmitKind::Cubin || opts.emitKind == EmitKind::Fatbin) &&
      opts.outputFilename == "-") {
    llvm::errs() << "qopt-opt: error: --emit=cubin and --emit=fatbin write "
                    "binary data; give an output file with -o\n";
    return failure();
  }
  if ((opts.emitKind == EmitKind::HostObject ||
       opts.emitKind == EmitKind::HostLibrary) &&
      opts.outputFilename == "-") {
    llvm::errs() << "qopt-opt: error: --emit=host-object and "
                    "--emit=host-library write binary data; give an output "
                    "file with -o\n";
    return failure();
  }
  // Every output, not only host code: a level a PTX compile ignores is
  // still a mistake in the command.
  if (opts.hostOptLevel > 3) {
    llvm::errs() << "qopt-opt: error: -O must be 0 to 3, got "
                 << opts.hostOptLevel << "\n";
    return failure();
  }

  return success();
}

int mlir::qopt::compileMain(int argc, char **argv, DialectRegistry &registry) {
  llvm::InitLLVM init(argc, argv);
  CompileOptions opts;
  cl::HideUnrelatedOptions(opts.compileCategory);
  cl::ParseCommandLineOptions(argc, argv, "qopt-opt: compile a .qopt spec\n");
  CompileRequest request = makeRequest(opts);
  if (failed(checkFlags(opts, request)))
    return 1;
  return compileSpec(request, registry);
}
