//===- ManifestPhases.h - A manifest's argument names and phases ----------===//
//
// The argument vocabulary that the step's "args" and each phase's share, and
// the "phases" and "reduction_workspace" of a kernel with per-tensor
// reductions (docs/abi.md, "Reductions"), for Manifest.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_MANIFESTPHASES_H
#define QOPT_RUNTIME_SRC_MANIFESTPHASES_H

#include "Manifest.h"
#include "ManifestReader.h"

namespace qopt::rt {

/// The argument `name` (an argument keyword or a table's name) into `out`;
/// false when it is neither.
bool parseArgName(const Manifest &m, const std::string &name, ArgDesc &out);

/// Whether the kernel has "reductions"; "phases" and "reduction_workspace",
/// both or neither; each phase's
/// arguments checked against what its grid can take. Needs the tables.
void parsePhases(const Reader &r, const json &root, Manifest &m);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFESTPHASES_H
