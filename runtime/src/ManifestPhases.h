//===- ManifestPhases.h - A manifest's argument names and phases ----------===//
//
// The argument vocabulary that the step's "args" and each phase's share, the
// "reductions", and the "phases" and "reduction_workspace" of a kernel with
// reductions (docs/abi.md, "Reductions", "Step reductions"), for
// Manifest.cpp.
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

/// The "reductions": kinds, scopes, each step reduction's uniform slot
/// (len(uniforms) + s). Needs the uniforms.
void parseReductions(const Reader &r, const json &root, Manifest &m);

/// Whether "phases" are a GPU kernel's (phases with "args"; a host
/// manifest's have none).
bool hasGpuPhases(const json &root);

/// A GPU kernel's "phases" and "reduction_workspace", both or neither; each
/// phase's arguments checked against what its grid can take; a combine
/// (grid one) last, exactly where there are step reductions. A host
/// manifest's phases: partials and combine. Needs the tables and the
/// reductions.
void parsePhases(const Reader &r, const json &root, Manifest &m);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_MANIFESTPHASES_H
