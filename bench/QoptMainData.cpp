//===- QoptMainData.cpp - qopt-main's list data and reference steps -------===//
#include "QoptMainData.h"

#include "qopt/reference/Codebook.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace qopt::bench;

namespace qopt::mainjob {

/// Group/block size of each reference stream in ABI order (1 per element).
std::vector<int64_t> refStreamPer(const ref::StepSpec &s) {
  std::vector<int64_t> per = {1};
  if (s.master != ref::Master::None)
    per.push_back(1);
  per.push_back(1); // gradient
  for (const ref::StateScheme &st : s.states) {
    per.push_back(1);
    if (st.kind == ref::StateKind::Group)
      per.push_back(st.group.group);
    else if (st.kind == ref::StateKind::Codebook)
      per.push_back(st.block);
  }
  return per;
}
size_t gradIndex(const ref::StepSpec &s) { return s.master == ref::Master::None ? 1 : 2; }

/// Host data of the list, shared by both optimizers: float32 masters and
/// bf16 gradients for each step.

/// Realistic spread: weights N(0, 0.02), LayerNorm weights 1 + N(0, 0.05),
/// biases N(0, 0.01); gradients N(0, sigma_k^2) with sigma_k log-uniform in
/// [1e-4, 1e-1] per tensor (jittered per step), 0.2% of elements x10..x100,
/// and 30% of the embedding's rows exactly zero (tokens not in the batch).
HostData makeHostData(std::vector<NamedShape> shapes, int steps) {
  HostData h;
  h.shapes = std::move(shapes);
  const size_t T = h.shapes.size();
  for (const auto &s : h.shapes)
    h.numels.push_back(s.numel());
  h.master.resize(T);
  h.grads.assign(size_t(steps), std::vector<std::vector<uint16_t>>(T));
  h.gradScale.resize(T);
  for (size_t k = 0; k < T; ++k) {
    Rng r(mix(0x6a7, k));
    h.gradScale[k] = std::pow(10.0, -4.0 + 3.0 * r.uniform());
    h.master[k].resize(size_t(h.numels[k]));
    for (auto &g : h.grads)
      g[k].resize(size_t(h.numels[k]));
  }
  // Jobs: (tensor, chunk of 1 Mi elements).
  const int64_t chunk = 1 << 20;
  std::vector<std::pair<size_t, int64_t>> jobs;
  for (size_t k = 0; k < T; ++k)
    for (int64_t off = 0; off < h.numels[k]; off += chunk)
      jobs.push_back({k, off});
  parallelFor(jobs.size(), [&](size_t j) {
    auto [k, off] = jobs[j];
    const NamedShape &sh = h.shapes[k];
    int64_t end = std::min(h.numels[k], off + chunk);
    bool isLnWeight = sh.name.find("ln_") != std::string::npos &&
                      sh.name.find(".weight") != std::string::npos;
    bool isBias = sh.name.find(".bias") != std::string::npos;
    Rng r(mix(mix(0x3a57e4, k), uint64_t(off)));
    for (int64_t i = off; i < end; ++i) {
      float z = r.normal();
      h.master[k][size_t(i)] = isLnWeight ? 1.0f + 0.05f * z : (isBias ? 0.01f : 0.02f) * z;
    }
    int64_t rowLen = sh.shape.size() == 2 ? sh.shape[1] : h.numels[k];
    for (size_t s = 0; s < h.grads.size(); ++s) {
      Rng rs(mix(mix(0x9d1, k * 16 + s), uint64_t(off)));
      Rng jitter(mix(0x77, k * 16 + s));
      double sigma = h.gradScale[k] * (0.8 + 0.4 * jitter.uniform());
      uint16_t *g = h.grads[s][k].data();
      for (int64_t i = off; i < end; ++i) {
        double v = sigma * rs.normal();
        if (rs.uniform() < 0.002)
          v *= std::pow(10.0, 1.0 + rs.uniform());
        if (sh.name == "wte") {
          // Whether a row has a zero gradient this step: from the row index.
          Rng row(mix(0x2e40 + s, uint64_t(i / rowLen)));
          if (row.uniform() < 0.3)
            v = 0.0;
        }
        g[i] = toBF16(float(v));
      }
    }
  });
  return h;
}

/// The initial parameter (and error-bit) bytes of a tensor for an optimizer:
/// the bf16 parameter rounded to nearest even from the float32 master, and
/// the error bits of the runtime's qopt_error_bits_init (chunks in parallel).
void initialParam(const ref::StepSpec &spec, const std::vector<float> &master,
                  std::vector<uint8_t> &param, std::vector<uint8_t> &ecc) {
  const int64_t n = int64_t(master.size());
  const int64_t chunk = 1 << 20;
  param.assign(size_t(n) * 2, 0);
  bool hasEcc = spec.master == ref::Master::EccI8 || spec.master == ref::Master::EccI16;
  qopt_dtype e = spec.master == ref::Master::EccI16 ? QOPT_DTYPE_INT16 : QOPT_DTYPE_INT8;
  size_t es = e == QOPT_DTYPE_INT8 ? 1 : 2;
  if (hasEcc)
    ecc.assign(size_t(n) * es, 0);
  else
    ecc.clear();
  parallelFor(size_t((n + chunk - 1) / chunk), [&](size_t c) {
    int64_t off = int64_t(c) * chunk, len = std::min(chunk, n - off);
    if (hasEcc) {
      BQ(qopt_error_bits_init(QOPT_DTYPE_BF16, e, master.data() + off, len,
                              param.data() + size_t(off) * 2, ecc.data() + size_t(off) * es));
    } else {
      for (int64_t i = off; i < off + len; ++i) {
        uint16_t b = toBF16(master[size_t(i)]);
        std::memcpy(&param[size_t(i) * 2], &b, 2);
      }
    }
  });
}

/// Steps one tensor `steps` times with the C++ reference, from the stream
/// bytes `init` (ABI order) and one bf16 gradient per step, in chunks of
/// `chunk` elements stepped in parallel (chunk is a multiple of 4096, so no
/// group or block straddles two chunks and the result is the whole tensor's).
std::vector<std::vector<uint8_t>> referenceSteps(const ref::StepSpec &spec, int64_t n,
                                                 const std::vector<std::vector<uint8_t>> &init,
                                                 const std::vector<const uint16_t *> &grads,
                                                 int64_t chunk) {
  const std::vector<int64_t> per = refStreamPer(spec);
  if (per.size() != init.size())
    throw std::runtime_error("reference and manifest disagree on the number of streams");
  std::vector<std::vector<uint8_t>> out = init;
  std::vector<int64_t> offs;
  for (int64_t off = 0; off < n; off += chunk)
    offs.push_back(off);
  if (offs.empty())
    return out;
  const size_t gi = gradIndex(spec);
  parallelFor(offs.size(), [&](size_t c) {
    int64_t off = offs[c], len = std::min(chunk, n - off);
    ref::TensorBuffers t = ref::makeTensor(spec, len);
    std::vector<ref::Buffer *> bufs = t.streams();
    std::vector<size_t> esize(bufs.size()), first(bufs.size());
    for (size_t s = 0; s < bufs.size(); ++s) {
      esize[s] = ref::dtypeSize(bufs[s]->dtype());
      first[s] = size_t(off / per[s]) * esize[s];
      if (s == gi)
        continue;
      std::memcpy(bufs[s]->data(), init[s].data() + first[s], bufs[s]->bytes());
    }
    for (size_t step = 0; step < grads.size(); ++step) {
      std::memcpy(bufs[gi]->data(), grads[step] + off, size_t(len) * 2);
      ref::step(spec, t, int64_t(step) + 1);
    }
    for (size_t s = 0; s < bufs.size(); ++s)
      if (s != gi)
        std::memcpy(out[s].data() + first[s], bufs[s]->data(), bufs[s]->bytes());
    std::memcpy(out[gi].data() + first[gi], bufs[gi]->data(), bufs[gi]->bytes());
  });
  return out;
}

} // namespace qopt::mainjob
