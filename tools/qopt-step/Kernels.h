//===- Kernels.h - The kernel qopt-step runs --------------------*- C++ -*-===//
//
// Which kernel --kernel names, where it is loaded from, and its manifest's
// facts (streams, hyperparameters, tables) that the inputs are checked
// against.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TOOLS_QOPT_STEP_KERNELS_H
#define QOPT_TOOLS_QOPT_STEP_KERNELS_H

#include "Options.h"

#include "qopt/runtime.hpp"

#include <string>
#include <vector>

namespace qopt::step {

/// A kernel found by --kernel: the registry that holds it and its key.
struct ResolvedKernel {
  qopt::Registry registry;
  std::string name;  ///< the registry key
  std::string where; ///< where it came from, for messages
};

/// Finds --kernel: a manifest file, or a kernel or spec name in --kernels,
/// $QOPT_KERNEL_DIR, the shipped kernels (CUDA) or the build tree. Throws
/// Failure naming where it looked.
ResolvedKernel resolveKernel(const Options &o);

/// "<dir>/flash_adamw.manifest.json" -> "flash_adamw".
std::string specStem(const std::string &source);

/// The safetensors dtype of an ABI dtype ("?" for none).
const char *stDtype(qopt_dtype d);
/// The bytes of one element of an ABI dtype.
size_t dtypeBytes(qopt_dtype d);
/// The ABI name of a dtype ("bf16").
const char *abiName(qopt_dtype d);

/// A kernel's manifest with its streams, hyperparameters and tables at hand.
struct KernelInfo {
  qopt::Manifest manifest;
  qopt_manifest_info info;
  std::vector<qopt_stream_info> streams;
  std::vector<qopt_hyper_info> hypers;
  std::vector<qopt_table_info> tables;
  size_t paramIndex = 0, gradIndex = 0;
  std::string paramName, gradName;

  explicit KernelInfo(qopt::Manifest m) : manifest(std::move(m)) {
    info = manifest.info();
    for (size_t i = 0; i < info.num_streams; ++i) {
      streams.push_back(manifest.stream(i));
      if (streams.back().role == QOPT_ROLE_PARAM)
        paramIndex = i;
      if (streams.back().role == QOPT_ROLE_GRAD)
        gradIndex = i;
    }
    for (size_t i = 0; i < info.num_hypers; ++i)
      hypers.push_back(manifest.hyper(i));
    for (size_t i = 0; i < info.num_tables; ++i)
      tables.push_back(manifest.table(i));
    paramName = streams[paramIndex].name;
    gradName = streams[gradIndex].name;
  }
  std::vector<std::string> streamNames() const {
    std::vector<std::string> n;
    for (const qopt_stream_info &s : streams)
      n.push_back(s.name);
    return n;
  }
  std::vector<std::string> tableNames() const {
    std::vector<std::string> n;
    for (const qopt_table_info &t : tables)
      n.push_back(t.name);
    return n;
  }
  /// What a stream belongs to, for messages and for initializing a state
  /// as a whole: "state m", "the error bits".
  std::string unitOf(size_t j) const {
    const qopt_stream_info &s = streams[j];
    if (s.role == QOPT_ROLE_ERROR_BITS)
      return "the error bits";
    return std::string("state ") + s.state;
  }
};

/// "one per element", "one per group of 32".
std::string perText(const qopt_stream_info &s);

} // namespace qopt::step

#endif // QOPT_TOOLS_QOPT_STEP_KERNELS_H
