//===- Inputs.h - qopt-step inputs ------------------------------*- C++ -*-===//
//
// The tensors qopt-step steps: read from the --in files, sorted into
// parameter groups, checked against the kernel's streams, completed with the
// initial state where asked, and the hyperparameters and tables. Everything
// is checked here, before anything runs.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TOOLS_QOPT_STEP_INPUTS_H
#define QOPT_TOOLS_QOPT_STEP_INPUTS_H

#include "Kernels.h"
#include "Options.h"

#include "qopt/safetensors/SafeTensors.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qopt::step {

namespace st = qopt::st;

/// A codebook table of the kernel, with where it came from.
struct Table {
  std::string name;
  std::string from; ///< for messages
  std::vector<float> values;
};

/// A tensor of an input file.
struct Source {
  const st::Tensor *tensor = nullptr;
  std::string file; ///< the --in file it is in
  std::string name; ///< its name there
  std::string where() const { return file + ": tensor '" + name + "'"; }
};

/// One parameter tensor and its streams, as found in the inputs.
struct Group {
  std::string name;
  std::vector<std::optional<Source>> streams; ///< by ABI stream index
  std::map<int64_t, Source> gradAt;           ///< <name>/g@<step>
  /// Any tensor of the group, for messages about a missing parameter.
  std::optional<Source> any;
};

/// A stream's data for the step: from a file or made here.
struct Stream {
  std::vector<int64_t> shape;
  const st::Tensor *src = nullptr; ///< the input tensor, or null: `owned`
  std::vector<uint8_t> owned;      ///< made by --init-missing-state
  bool initialized = false;
  const std::vector<uint8_t> &bytes() const { return src ? src->data : owned; }
};

/// A tensor ready to step.
struct Tensor {
  std::string name;
  int64_t numel = 0;
  std::vector<int64_t> shape;
  std::vector<Stream> streams;               ///< by ABI stream index
  std::map<int64_t, const Source *> gradFor; ///< step -> gradient
};

/// Loads every input and sorts its tensors into parameter groups and tables.
struct Inputs {
  std::vector<st::File> files;
  std::map<std::string, Group> groups;
  std::map<std::string, Source> tables;
};

/// Loads every --in file and sorts its tensors into parameter groups and
/// tables; throws Failure naming the file and tensor at fault.
Inputs readInputs(const Options &o, const KernelInfo &k);
/// Every table the kernel takes, from --table or the inputs.
std::vector<Table> resolveTables(const Options &o, const KernelInfo &k, const Inputs &in);
/// The tensors to step: every stream checked against the kernel, missing
/// state made with --init-missing-state, a gradient for every step.
std::vector<Tensor> buildTensors(const Options &o, const KernelInfo &k, const Inputs &in,
                                 const std::vector<Table> &tables);
/// The --hyper values, checked against the manifest (UsageError for a
/// mistake); `storage` keeps the names the result points to.
std::vector<qopt_hyper> resolveHypers(const Options &o, const KernelInfo &k,
                                      std::vector<std::string> &storage);
/// Evaluates every step's uniforms; throws Failure at a NaN.
void checkUniforms(const Options &o, const KernelInfo &k,
                   const std::vector<qopt_hyper> &hypers);

/// --table NAME=SRC: dynamic-signed, dynamic-unsigned or FILE[:TENSOR].
std::vector<float> loadTableSource(const std::string &name, const std::string &src);
/// The initial bytes of a state stream or the error bits per the runtime's
/// state layout.
std::vector<uint8_t> initialBytes(const qopt_buffer_layout &l);

} // namespace qopt::step

#endif // QOPT_TOOLS_QOPT_STEP_INPUTS_H
