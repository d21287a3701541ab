//===- Codebook.cpp - Blockwise codebook quantization (seed 000) ----------===//
#include "qopt/reference/Codebook.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace qopt::ref {

std::array<float, 255> codebookMidpoints(const float *qmap) {
  std::array<float, 255> mid{};
  for (int k = 0; k < 255; ++k)
    mid[k] = (qmap[k] + qmap[k + 1]) * 0.5f; // seed 000: (qmap[:-1] + qmap[1:]) * 0.5
  return mid;
}

uint8_t codebookCode(float c, const std::array<float, 255> &mid) {
  // seed 000: torch.bucketize(c, mid), right=False: the first k with mid[k] >= c, i.e. the number
  // of midpoints for which mid[k] >= c fails (strictly below c; all 255 for a NaN c).
  int count = 0;
  for (int k = 0; k < 255; ++k)
    if (!(mid[k] >= c))
      ++count;
  return static_cast<uint8_t>(count);
}

static void checkBlock(int64_t n, int64_t block, const char *what) {
  if (block < 1)
    throw std::invalid_argument(std::string(what) + ": block size must be >= 1, got " +
                                std::to_string(block));
  if (n < 0)
    throw std::invalid_argument(std::string(what) + ": negative element count");
}

void codebookQuantize(const float *x, int64_t n, int64_t block, const float *qmap, uint8_t *codes,
                      float *absmax, Overflow overflow, NumericsCounts *counts) {
  checkBlock(n, block, "codebookQuantize");
  const std::array<float, 255> mid = codebookMidpoints(qmap);
  for (int64_t b = 0, begin = 0; begin < n; ++b, begin += block) {
    const int64_t end = std::min(n, begin + block); // partial last block: valid elements only
    // seed 000: absmax = xb.abs().amax(-1) (NaN-propagating)
    float am = 0.0f;
    bool nan = false;
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(x[i]);
      if (std::isnan(a))
        nan = true;
      else if (a > am)
        am = a;
    }
    if (nan)
      am = std::nanf("");
    if (overflow == Overflow::Saturate && !std::isfinite(am)) {
      if (counts)
        ++counts->nonfinite;
      am = nan ? 0.0f : std::numeric_limits<float>::max(); // NaN: restart from zero
    }
    absmax[b] = am;
    // seed 000: c = xb / absmax.clamp(min=1e-30)  (clamp keeps a NaN)
    const float d = (std::isnan(am) || am >= 1e-30f) ? am : 1e-30f;
    for (int64_t i = begin; i < end; ++i)
      codes[i] = codebookCode(x[i] / d, mid);
  }
}

void codebookDequantize(const uint8_t *codes, const float *absmax, int64_t n, int64_t block,
                        const float *qmap, float *out) {
  checkBlock(n, block, "codebookDequantize");
  for (int64_t i = 0; i < n; ++i)
    out[i] = qmap[codes[i]] * absmax[i / block]; // seed 000: qmap[code] * absmax
}

std::vector<float> torchLinspace(float start, float end, int64_t steps, const LinspaceModel &model) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  if (steps <= 0)
    return out;
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  // start + step*i below halfway, end - step*(steps-1-i) from halfway on; fused or not.
  auto formula = [&](int64_t i, bool fused) -> float {
    if (i < halfway) {
      const float fi = static_cast<float>(i);
      return fused ? std::fma(step, fi, start) : start + step * fi;
    }
    const float fj = static_cast<float>(steps - 1 - i);
    return fused ? std::fma(-step, fj, end) : end - step * fj;
  };
  // torch's vectorized_loop: two vectors of w floats per iteration while 2w remain, then the
  // scalar formula for the tail. Lane k of a vector is base + k*step (k = 1 is a plain add).
  const int64_t w = std::max(1, model.vectorWidth);
  auto vector = [&](int64_t at) {
    const float base = formula(at, model.fmaBase);
    out[at] = base;
    for (int64_t k = 1; k < w; ++k) {
      const float fk = static_cast<float>(k);
      out[at + k] = (k == 1) ? base + step : (model.fmaLane ? std::fma(fk, step, base) : base + fk * step);
    }
  };
  int64_t i = 0;
  if (w > 1)
    for (; i + 2 * w <= steps; i += 2 * w) {
      vector(i);
      vector(i + w);
    }
  for (; i < steps; ++i)
    out[i] = formula(i, model.fmaScalar);
  return out;
}

std::vector<float> createDynamicMap(bool isSigned, int maxExponentBits, int totalBits,
                                    const LinspaceModel &model) {
  if (maxExponentBits < 1 || totalBits < 2 || totalBits > 8 || maxExponentBits > totalBits - 1)
    throw std::invalid_argument("createDynamicMap: need 1 <= max_exponent_bits <= total_bits - 1 <= 7");
  std::vector<double> data; // the values, as the library's Python list of floats
  const int fractionBits = totalBits - 1;
  const int64_t extra = (int64_t{1} << (fractionBits - maxExponentBits)) - 1;
  auto addLevel = [&](int64_t items, int level) {
    const std::vector<float> edges = torchLinspace(0.1f, 1.0f, items + 1, model);
    // Python: 10 ** (level - (E - 1)) (an int for exponent >= 0, else a float64 pow), then
    // times a float32 tensor: one float32 multiply by f32(scale).
    const int e10 = level - (maxExponentBits - 1);
    const double scale = e10 >= 0 ? std::pow(10.0, e10) : std::pow(10.0, static_cast<double>(e10));
    const float scale32 = static_cast<float>(scale);
    for (int64_t k = 0; k < items; ++k) {
      const float mean = (edges[k] + edges[k + 1]) / 2.0f; // (b[:-1] + b[1:]) / 2.0
      data.push_back(static_cast<double>(scale32 * mean));
      if (isSigned)
        data.push_back(static_cast<double>((-scale32) * mean));
    }
  };
  int level = 0;
  for (level = 0; level < maxExponentBits; ++level)
    addLevel(int64_t{1} << (level + fractionBits - maxExponentBits + (isSigned ? 0 : 1)), level);
  if (extra > 0)
    addLevel(extra, maxExponentBits - 1); // the library reuses the last level's scale
  data.push_back(0.0);
  data.push_back(1.0);
  if (data.size() != (size_t{1} << totalBits))
    throw std::logic_error("createDynamicMap: " + std::to_string(data.size()) + " values, expected " +
                           std::to_string(size_t{1} << totalBits));
  data.resize(256, 0.0);
  std::sort(data.begin(), data.end());
  return std::vector<float>(data.begin(), data.end());
}

} // namespace qopt::ref
