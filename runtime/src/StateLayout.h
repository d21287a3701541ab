//===- StateLayout.h - Sizes and initial values of a kernel's buffers ----===//
#ifndef QOPT_RUNTIME_SRC_STATELAYOUT_H
#define QOPT_RUNTIME_SRC_STATELAYOUT_H

#include "Manifest.h"

namespace qopt::rt {

/// Elements of stream `s` for a tensor of `numel` elements.
int64_t streamCount(const StreamDesc &s, int64_t numel);
/// Bytes of stream `s` for a tensor of `numel` elements; throws on overflow.
uint64_t streamBytes(const StreamDesc &s, int64_t numel);

/// The code a codebook quantizer gives 0.0 (see qopt_codebook_zero_code).
uint8_t codebookZeroCode(const float *qmap);

/// One entry per stream, in stream order (see qopt_manifest_state_layout).
std::vector<qopt_buffer_layout> stateLayout(const Manifest &m, int64_t numel,
                                            const float *const *hostTables,
                                            size_t numTables);

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_STATELAYOUT_H
