//===- Options.h - qopt-step command line -----------------------*- C++ -*-===//
//
// The command line of qopt-step, parsed and checked on its own: every mistake
// is a UsageError (exit status 2) before any file or kernel is touched.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TOOLS_QOPT_STEP_OPTIONS_H
#define QOPT_TOOLS_QOPT_STEP_OPTIONS_H

#include "qopt/runtime.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qopt::step {

struct Options {
  std::string kernel;
  qopt_backend backend = QOPT_BACKEND_HOST;
  int32_t device = 0;
  std::string kernelsDir; ///< --kernels (empty: not given)
  int64_t steps = 1;
  int64_t stepStart = 1;
  std::vector<std::pair<std::string, std::string>> hypers; ///< as given
  std::vector<std::pair<std::string, std::string>> tables; ///< NAME, SRC
  bool initMissingState = false;
  std::vector<std::string> inputs;
  std::string output;
  bool describe = false;
  std::string makeExample;
  std::vector<std::pair<std::string, std::vector<int64_t>>> exampleTensors;
  uint64_t seed = 1;
  bool noState = false;
  bool quiet = false;
};

/// Parses the command line; prints the usage and exits 0 for --help. Throws
/// UsageError for a mistake.
Options parseArgs(int argc, char **argv);

} // namespace qopt::step

#endif // QOPT_TOOLS_QOPT_STEP_OPTIONS_H
