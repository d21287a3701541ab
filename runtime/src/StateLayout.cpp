//===- StateLayout.cpp - Sizes and initial values of a kernel's buffers --===//
#include "StateLayout.h"

#include "DType.h"
#include "Error.h"
#include "TileMap.h"

#include <cmath>

namespace qopt::rt {

int64_t streamCount(const StreamDesc &s, int64_t numel) {
  return s.per == QOPT_PER_ELEMENT ? numel : tilesOf(numel, s.perSize);
}

uint64_t streamBytes(const StreamDesc &s, int64_t numel) {
  uint64_t count = static_cast<uint64_t>(streamCount(s, numel));
  uint64_t size = dtypeSize(s.dtype);
  if (count != 0 && size > UINT64_MAX / count)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "stream '", s.name, "' of ", numel,
         " elements overflows 64-bit byte counts");
  return count * size;
}

uint8_t codebookZeroCode(const float *qmap) {
  for (int k = 0; k < 256; ++k)
    if (!std::isfinite(qmap[k]))
      fail(QOPT_ERROR_INVALID_ARGUMENT, "codebook table entry ", k, " is ",
           qmap[k], " (must be finite)");
  for (int k = 0; k < 255; ++k)
    if (qmap[k + 1] < qmap[k])
      fail(QOPT_ERROR_INVALID_ARGUMENT, "codebook table is not ascending: "
           "entry ", k + 1, " (", qmap[k + 1], ") < entry ", k, " (", qmap[k],
           ")");
  int code = 0;
  for (int k = 0; k < 255; ++k) {
    float mid = (qmap[k] + qmap[k + 1]) * 0.5f;
    if (mid < 0.0f)
      ++code;
  }
  return static_cast<uint8_t>(code);
}

std::vector<qopt_buffer_layout> stateLayout(const Manifest &m, int64_t numel,
                                            const float *const *hostTables,
                                            size_t numTables) {
  if (numel < 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "numel ", numel, " is negative");
  if (hostTables && numTables != m.tables.size())
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", m.kernel, "' has ",
         m.tables.size(), " table(s), got ", numTables);
  std::vector<qopt_buffer_layout> out;
  for (const StreamDesc &s : m.streams) {
    qopt_buffer_layout b{};
    b.name = s.name.c_str();
    b.role = s.role;
    b.dtype = s.dtype;
    b.per = s.per;
    b.per_size = s.perSize;
    b.count = streamCount(s, numel);
    b.bytes = streamBytes(s, numel);
    b.fill_bits = 0;
    b.fill_value = 0.0;
    switch (s.role) {
    case QOPT_ROLE_PARAM:
    case QOPT_ROLE_GRAD:
      b.init = QOPT_INIT_CALLER;
      break;
    case QOPT_ROLE_ERROR_BITS:
      b.init = QOPT_INIT_FROM_MASTER;
      break;
    case QOPT_ROLE_STATE_CODES: {
      const StateDesc *st = nullptr;
      for (const StateDesc &d : m.states)
        if (d.name == s.state)
          st = &d;
      if (st && st->scheme == StateDesc::Scheme::Codebook) {
        const TableDesc &t = m.tables[st->table];
        if (!hostTables) {
          b.init = QOPT_INIT_CODEBOOK_ZERO;
        } else {
          if (!hostTables[st->table])
            fail(QOPT_ERROR_INVALID_ARGUMENT, "table '", t.name,
                 "' (index ", st->table, ") is NULL");
          uint8_t code = codebookZeroCode(hostTables[st->table]);
          b.init = QOPT_INIT_FILL;
          b.fill_bits = code;
          b.fill_value = code;
        }
      } else {
        b.init = QOPT_INIT_FILL; // group codes: 0 decodes to 0
      }
      break;
    }
    case QOPT_ROLE_STATE:
    case QOPT_ROLE_STATE_SCALES:
    case QOPT_ROLE_STATE_ABSMAX:
      b.init = QOPT_INIT_FILL; // +0.0 in every float format is all-zero bits
      break;
    }
    out.push_back(b);
  }
  return out;
}

} // namespace qopt::rt
