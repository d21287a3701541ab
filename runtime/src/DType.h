//===- DType.h - dtype names and sizes of the kernel ABI ------------------===//
#ifndef QOPT_RUNTIME_SRC_DTYPE_H
#define QOPT_RUNTIME_SRC_DTYPE_H

#include "qopt/runtime.h"

#include <cstddef>
#include <string_view>

namespace qopt::rt {

/// Bytes per element; 0 for an invalid dtype.
inline size_t dtypeSize(qopt_dtype d) {
  switch (d) {
  case QOPT_DTYPE_F32:
    return 4;
  case QOPT_DTYPE_BF16:
  case QOPT_DTYPE_F16:
  case QOPT_DTYPE_INT16:
    return 2;
  case QOPT_DTYPE_INT8:
  case QOPT_DTYPE_UINT8:
    return 1;
  default:
    return 0;
  }
}

/// The manifest name ("bf16"), or "invalid".
inline const char *dtypeName(qopt_dtype d) {
  switch (d) {
  case QOPT_DTYPE_F32:
    return "f32";
  case QOPT_DTYPE_BF16:
    return "bf16";
  case QOPT_DTYPE_F16:
    return "f16";
  case QOPT_DTYPE_INT8:
    return "int8";
  case QOPT_DTYPE_UINT8:
    return "uint8";
  case QOPT_DTYPE_INT16:
    return "int16";
  default:
    return "invalid";
  }
}

/// Parses a manifest dtype name; QOPT_DTYPE_INVALID if unknown.
inline qopt_dtype parseDtype(std::string_view s) {
  for (qopt_dtype d : {QOPT_DTYPE_F32, QOPT_DTYPE_BF16, QOPT_DTYPE_F16,
                       QOPT_DTYPE_INT8, QOPT_DTYPE_UINT8, QOPT_DTYPE_INT16})
    if (s == dtypeName(d))
      return d;
  return QOPT_DTYPE_INVALID;
}

inline const char *roleName(qopt_stream_role r) {
  switch (r) {
  case QOPT_ROLE_PARAM:
    return "param";
  case QOPT_ROLE_ERROR_BITS:
    return "error_bits";
  case QOPT_ROLE_GRAD:
    return "grad";
  case QOPT_ROLE_STATE:
    return "state";
  case QOPT_ROLE_STATE_CODES:
    return "state_codes";
  case QOPT_ROLE_STATE_SCALES:
    return "state_scales";
  case QOPT_ROLE_STATE_ABSMAX:
    return "state_absmax";
  }
  return "invalid";
}

} // namespace qopt::rt

#endif // QOPT_RUNTIME_SRC_DTYPE_H
