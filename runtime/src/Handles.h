//===- Handles.h - The C API's opaque handles -----------------------------===//
//
// What the C API's handle types hold: a reference to the runtime's object
// (shared, so that a kernel keeps its manifest and context alive).
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_RUNTIME_SRC_HANDLES_H
#define QOPT_RUNTIME_SRC_HANDLES_H

#include "Buffer.h"
#include "Context.h"
#include "Kernel.h"
#include "Manifest.h"
#include "Registry.h"

#include <memory>

struct qopt_context {
  qopt::rt::ContextPtr impl;
  /// qopt_buffer_alloc's buffers; declared after impl, so freed before it.
  std::unique_ptr<qopt::rt::Buffers> buffers;
};
struct qopt_manifest {
  qopt::rt::ManifestPtr impl;
};
struct qopt_registry {
  std::shared_ptr<qopt::rt::Registry> impl;
};
struct qopt_kernel {
  qopt::rt::KernelPtr impl;
};

#endif // QOPT_RUNTIME_SRC_HANDLES_H
