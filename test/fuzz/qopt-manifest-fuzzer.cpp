//===- qopt-manifest-fuzzer.cpp - libFuzzer target for the manifest reader ===//
//
// Feeds arbitrary bytes to qopt_manifest_parse and, for a manifest that
// parses, asks for everything the C API derives from it: its info, every
// stream, hyperparameter and table, the uniforms at two steps and the state
// layout of a tensor. The runtime's sources are compiled into the fuzzer
// (with the instrumentation). Aborts when the runtime breaks a promise:
// every failure is a status other than QOPT_ERROR_INTERNAL (an exception the
// runtime did not turn into a message of its own) with a message, and a
// parsed manifest answers every query about its own contents.
//
//===----------------------------------------------------------------------===//

#include "qopt/runtime.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

/// A failure must be one the runtime names; an internal error is a bug.
void require(qopt_status s, bool mayFail) {
  if (s == QOPT_SUCCESS)
    return;
  const char *msg = qopt_last_error();
  if (s == QOPT_ERROR_INTERNAL || !msg || !*msg || !mayFail)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  qopt_manifest *m = nullptr;
  qopt_status s = qopt_manifest_parse(reinterpret_cast<const char *>(data), size,
                                      "fuzz.manifest.json", &m);
  require(s, /*mayFail=*/true);
  if (s != QOPT_SUCCESS) {
    if (m)
      std::abort();
    return 0;
  }
  qopt_manifest_info info;
  require(qopt_manifest_get_info(m, &info), false);
  for (size_t i = 0; i < info.num_streams; ++i) {
    qopt_stream_info stream;
    require(qopt_manifest_get_stream(m, i, &stream), false);
  }
  for (size_t i = 0; i < info.num_hypers; ++i) {
    qopt_hyper_info hyper;
    require(qopt_manifest_get_hyper(m, i, &hyper), false);
  }
  for (size_t i = 0; i < info.num_tables; ++i) {
    qopt_table_info table;
    require(qopt_manifest_get_table(m, i, &table), false);
  }
  // Hyperparameters without a default, NaN results: named errors.
  std::vector<float> uniforms(info.num_uniforms + 1);
  require(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, uniforms.data(),
                                          uniforms.size()),
          true);
  require(qopt_manifest_evaluate_uniforms(m, nullptr, 0, INT64_MAX,
                                          uniforms.data(), uniforms.size()),
          true);
  // A state layout needs the tables: a linear one of 256 entries each.
  std::vector<float> table(256);
  for (int i = 0; i < 256; ++i)
    table[size_t(i)] = -1.0f + 2.0f * float(i) / 255.0f;
  std::vector<const float *> tables(info.num_tables, table.data());
  std::vector<qopt_buffer_layout> layout(info.num_streams + 1);
  for (int64_t numel : {int64_t(0), int64_t(4097)})
    require(qopt_manifest_state_layout(m, numel, tables.data(), tables.size(),
                                       layout.data(), layout.size()),
            true);
  require(qopt_manifest_destroy(m), false);
  return 0;
}
