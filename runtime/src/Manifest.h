//===- Manifest.h - A kernel's manifest: streams, uniforms, launch shape --===//
//
// The parsed form of `<kernel>.manifest.json` (docs/abi.md). Parsing checks
// every field and the consistency between param/grad/states and the stream
// list, so the rest of the runtime can trust it; errors name the file and the
// field. Manifests are immutable once parsed and shared by reference.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_MANIFEST_H
#define QOPT_RUNTIME_SRC_MANIFEST_H

#include "UniformExpr.h"
#include "qopt/runtime.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qopt::rt {

struct StreamDesc {
  std::string name;
  std::string state; ///< owning state, "" for param/error bits/grad
  qopt_stream_role role = QOPT_ROLE_PARAM;
  qopt_dtype dtype = QOPT_DTYPE_INVALID;
  qopt_stream_per per = QOPT_PER_ELEMENT;
  int64_t perSize = 1;
  qopt_access access = QOPT_ACCESS_READ;
};

struct HyperDesc {
  std::string name;
  double defaultValue = 0;
  bool hasDefault = false;
  bool isBool = false;
};

struct StateDesc {
  enum class Scheme { Plain, Group, Codebook };
  std::string name;
  Scheme scheme = Scheme::Plain;
  qopt_dtype dtype = QOPT_DTYPE_INVALID;      ///< plain dtype or code storage
  qopt_dtype scaleDtype = QOPT_DTYPE_INVALID; ///< group scales
  int64_t group = 0;                          ///< group size
  int bits = 8; ///< group: bits per code; 4 packs two codes a byte
  int64_t block = 0;                          ///< codebook block size
  size_t table = 0;                           ///< codebook: index in tables
  /// Group and codebook: "overflow" is "saturate" (the kernel keeps the
  /// state finite and counts; docs/numerics.md). Absent: ieee.
  bool saturates = false;
};

struct TableDesc {
  std::string name;
  std::string state;
  qopt_dtype dtype = QOPT_DTYPE_F32;
  int64_t count = 256;
};

struct BinaryDesc {
  qopt_binary_format format = QOPT_BINARY_PTX;
  std::string arch;  ///< e.g. "sm_90"; "" = the manifest's arch
  std::string path;  ///< resolved against the manifest's directory
};

struct HostDesc {
  std::string library; ///< resolved against the manifest's directory
  std::string symbol;
};

/// One kernel argument, in the manifest's "args" order.
struct ArgDesc {
  /// WorkCounters: a kernel with tile claims (docs/abi.md). NumericsCounters:
  /// a kernel with a saturating state, QOPT_NUMERICS_COUNTERS int64 values.
  /// ReductionPartials, ReductionValues: the runtime's reduction workspace
  /// (docs/abi.md, "Reductions"); NumTensors: the list's tensors (int64).
  /// StepPartials: the step's float64 accumulation rows of the step
  /// reductions (the finish writes its launch's rows, the combine reads all
  /// of them); NumStepTensors: the step's tensors over all launches (int64).
  enum class Kind {
    Descriptors,
    TileMap,
    NumTiles,
    Uniforms,
    Table,
    WorkCounters,
    NumericsCounters,
    ReductionPartials,
    ReductionValues,
    NumTensors,
    StepPartials,
    NumStepTensors
  };
  Kind kind = Kind::Descriptors;
  size_t table = 0; ///< Table: index into tables
};

/// A launch before the step (docs/abi.md, "Reductions"): the reduce
/// pre-pass over the step's tiles, the finish, one block per tensor, or the
/// combine of the step reductions, one block. A host manifest's phases
/// (`partials` over tiles, `combine` one call) have no threads or args.
struct PhaseDesc {
  enum class Grid { Tiles, Tensors, One };
  std::string name, entry;
  Grid grid = Grid::Tiles;
  int64_t threadsPerBlock = 1;
  std::vector<ArgDesc> args;
};

/// The bytes of the reduction workspace a list needs: chunk partials per
/// tile (float64) and values per tensor (float32).
struct ReductionWorkspace {
  int64_t partialBytesPerTile = 0;
  int64_t valueBytesPerTensor = 0;
  int64_t stepPartialBytesPerTensor = 0; ///< S * 8
};

/// One entry of the manifest's "reductions", in update order: a per-tensor
/// reduction (index r_t among those) or a step reduction (index s among
/// those, its value in uniform slot `uniform` = len(uniforms) + s).
struct ReductionDesc {
  qopt_reduction_kind kind = QOPT_REDUCTION_SUM;
  qopt_reduction_scope scope = QOPT_REDUCTION_SCOPE_TENSOR;
  int64_t uniform = -1; ///< step reductions only
  size_t index = 0;     ///< among the reductions of its scope
};

/// The threads of a step kernel's block: the threads_per_block that compute
/// the tile and the producer warps after them (docs/abi.md, "Kernel
/// arguments"). Every launch and occupancy query of the step kernel uses it;
/// the phases have their own threads_per_block and no producer warps.
inline int64_t blockThreads(const qopt_launch_info &l) {
  return int64_t(l.threads_per_block) + 32 * int64_t(l.producer_warps);
}

struct Manifest {
  std::string source;  ///< file name or caller-given name, for messages
  std::string baseDir; ///< directory of `source` ("" = current directory)
  /// "version": 1, or 2 where the manifest may use the fields a version 1
  /// reader would ignore to its harm (launch.producer_warps).
  int64_t version = 1;
  std::string kernel, entry, optimizer, mode, arch;
  std::string paramName, gradName;
  qopt_dtype paramDtype = QOPT_DTYPE_INVALID;
  qopt_dtype gradDtype = QOPT_DTYPE_INVALID;
  qopt_dtype eccDtype = QOPT_DTYPE_INVALID; ///< INVALID without error bits
  /// param.master "stochastic": the bf16 param is rounded stochastically.
  bool stochastic = false;
  /// param.seed_uniform: the uniform that is stochastic rounding's seed (an
  /// integer in [0, 2^24), checked at each launch); -1 where not given.
  int64_t seedUniform = -1;
  /// param.master "kahan_bf16": the error-bits stream `<param>.kahan` is a
  /// bf16 Kahan compensation (eccDtype BF16).
  bool kahan = false;
  std::vector<HyperDesc> hypers;
  std::vector<StateDesc> states;
  std::vector<StreamDesc> streams;
  std::vector<Expr> uniforms;
  std::vector<TableDesc> tables;
  std::vector<ArgDesc> args;
  /// Launched in order before the step, on its stream; empty for a kernel
  /// without reductions (and for host manifests). A combine (grid One) is
  /// last: the phases before it are phase A of a step with step reductions.
  std::vector<PhaseDesc> phases;
  /// A host manifest with step reductions: `partials` then `combine`.
  std::vector<PhaseDesc> hostPhases;
  ReductionWorkspace workspace;
  /// "reductions", in update order, and how many are of each scope.
  std::vector<ReductionDesc> reductionList;
  size_t numTensorReductions = 0, numStepReductions = 0;
  /// "reductions" present: the host function computes a tensor's
  /// reductions in the range that holds its first tile, so a step's
  /// ranges hold whole tensors.
  bool reductions = false;
  qopt_launch_info launch{};
  /// launch.tile_claims (docs/abi.md, "Tile claims"): 0 and 0 without.
  /// Compared with a GPU module's own manifest; the launch does not read
  /// them (the work counters are an argument).
  struct TileClaims {
    int64_t tiles = 0, staticEighths = 0;
  } tileClaims;
  bool binariesListed = false; ///< "binaries" present (else use defaults)
  std::vector<BinaryDesc> binaries;
  std::optional<HostDesc> host;

  /// Index of hyperparameter `name`, or -1.
  long findHyper(std::string_view name) const;
  /// The uniform slots a kernel reads: the evaluated ones, then one per step
  /// reduction (written by the combine).
  size_t numUniforms() const { return uniforms.size() + numStepReductions; }
  /// The kinds of the step reductions, in order.
  std::vector<qopt_reduction_kind> stepKinds() const;
};

using ManifestPtr = std::shared_ptr<const Manifest>;

/// The manifest's name of a stream's "per" ("element", "group", "block").
inline const char *perName(qopt_stream_per per) {
  switch (per) {
  case QOPT_PER_ELEMENT:
    return "element";
  case QOPT_PER_GROUP:
    return "group";
  case QOPT_PER_BLOCK:
    return "block";
  }
  return "invalid";
}

/// Parses and checks a manifest. `source` names it in messages; its
/// directory resolves relative binary paths. Throws Error(QOPT_ERROR_MANIFEST)
/// naming the field.
ManifestPtr parseManifest(std::string_view json, const std::string &source);

/// Reads and parses a file. Throws Error(QOPT_ERROR_IO) if unreadable.
ManifestPtr loadManifest(const std::string &path);

/// Reads a whole file; throws Error(QOPT_ERROR_IO) naming it.
std::string readFile(const std::string &path);

/// Hyperparameter values in manifest order: given by name, else defaults.
/// Throws NOT_FOUND for an unknown name, INVALID_ARGUMENT for a missing
/// value without default, a repeated name or a bool that is not 0/1.
std::vector<double> resolveHypers(const Manifest &m, const qopt_hyper *hypers,
                                  size_t numHypers);

/// Evaluates every uniform and rounds it to float32 (docs/abi.md); the step
/// reductions' slots after them are 0.0 (numUniforms() values).
std::vector<float> evaluateUniforms(const Manifest &m,
                                    const qopt_hyper *hypers,
                                    size_t numHypers, int64_t step);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFEST_H
