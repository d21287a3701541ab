/*===- kernels.h - The kernels shipped with qopt -------------------*- C -*-===*
 *
 * libqopt_kernels embeds every spec of specs/ as qopt-opt compiled it at build
 * time: a fatbin (sm_80 and sm_90 cubins plus PTX the driver JIT-compiles for
 * newer chips) where the CUDA toolkit was present at build time, else PTX, and
 * the manifest of each kernel. A trainer needs no compiler at run time.
 *
 *===----------------------------------------------------------------------===*/

#ifndef QOPT_KERNELS_H
#define QOPT_KERNELS_H

#include "qopt/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Number of shipped kernels.
QOPT_RUNTIME_API size_t qopt_shipped_kernel_count(void);

/// The spec name (file stem in specs/, e.g. "flash_adamw", or a variant of it:
/// "flash_adamw.f16", "flash_adamw.f32", "flash_adamw.scaled",
/// "flash_adamw.f32.scaled"; docs/abi.md, "Kernel variants") of shipped kernel
/// `index`, or NULL past the end. The string is static.
QOPT_RUNTIME_API const char *qopt_shipped_kernel_spec(size_t index);

/// Adds every shipped kernel to `registry` under its manifest's kernel name
/// (e.g. "FlashAdamW", "FlashAdamW_f32_scaled"), with its embedded binary. `num_added` may be NULL.
/// Errors as qopt_registry_add_manifest (a kernel name already present).
QOPT_RUNTIME_API qopt_status qopt_registry_add_shipped(qopt_registry *registry,
                                                       size_t *num_added);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* QOPT_KERNELS_H */
