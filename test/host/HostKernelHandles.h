//===- HostKernelHandles.h - What the host kernel fixtures share ----------===//
//
// The strict and fast-mode host suites each load one kernel of a manifest
// into a host context: the codebook tables its launches take and the
// handles' teardown, in one place.
//
//===----------------------------------------------------------------------===//

#ifndef QOPT_TEST_HOST_HOSTKERNELHANDLES_H
#define QOPT_TEST_HOST_HOSTKERNELHANDLES_H

#include "qopt/reference/Step.h"
#include "qopt/runtime.h"

#include <vector>

namespace qopt::test {

/// The codebook tables a launch of `spec`'s kernel takes: each codebook
/// state's qmap, in state order (docs/abi.md, "Tables").
inline std::vector<const void *> codebookTables(const qopt::ref::StepSpec &spec) {
  std::vector<const void *> tables;
  for (const qopt::ref::StateScheme &st : spec.states)
    if (st.kind == qopt::ref::StateKind::Codebook)
      tables.push_back(st.qmap.data());
  return tables;
}

/// Destroys a fixture's handles, the last made first (each may be null).
inline void destroyHostKernel(qopt_kernel *kernel, qopt_registry *registry,
                              qopt_manifest *manifest, qopt_context *ctx) {
  qopt_kernel_destroy(kernel);
  qopt_registry_destroy(registry);
  qopt_manifest_destroy(manifest);
  qopt_context_destroy(ctx);
}

} // namespace qopt::test

#endif // QOPT_TEST_HOST_HOSTKERNELHANDLES_H
