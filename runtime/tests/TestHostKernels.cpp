//===- TestHostKernels.cpp - Host-backend twins of the test kernels -------===//
//
// qopt_test_sgd_f32_host has the host kernel ABI (qopt_host_kernel_fn) and
// does what kernels/qopt_test_sgd_f32.ptx does: p[i] -= uniforms[0] * g[i]
// over tiles of 1024, one float32 rounding per operation. It is compiled into
// the test binary and into libqopt_test_host_kernels.so (loaded by dlopen
// through a manifest's "host" field).
//
//===----------------------------------------------------------------------===//
#include <cstdint>
#include <cstring>

extern "C" __attribute__((visibility("default"))) void
qopt_test_sgd_f32_host(const void *descriptors, const int32_t *tile_map,
                       int64_t num_tiles, const float *uniforms,
                       const float *const *tables, int64_t tile_begin,
                       int64_t tile_end) {
  (void)num_tiles;
  (void)tables;
  const int64_t kTile = 1024;
  const auto *base = static_cast<const unsigned char *>(descriptors);
  const float u = uniforms[0];
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const unsigned char *d = base + 32 * static_cast<int64_t>(tile_map[t]);
    int64_t numel, first;
    float *p;
    const float *g;
    std::memcpy(&numel, d, 8);
    std::memcpy(&first, d + 8, 8);
    std::memcpy(&p, d + 16, 8);
    std::memcpy(&g, d + 24, 8);
    int64_t begin = (t - first) * kTile;
    int64_t end = begin + kTile < numel ? begin + kTile : numel;
    for (int64_t i = begin; i < end; ++i) {
      float prod = u * g[i];
      p[i] = p[i] - prod;
    }
  }
}
