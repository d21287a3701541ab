//===- FastModeTolerance.h - The stated tolerance of fast-mode kernels ----===//
//
// How far a kernel compiled with `qopt-opt --mode=fast` may be from the C++
// reference (docs/dsl.md, "Fast mode"), how it is measured, and the check.
// Shared by the host suite (test/host/HostFastModeTest.cpp) and the GPU suite
// (test/gpu/FastKernelNumericsTest.cpp).
//
// Per stream, with lr the step's learning rate and ulp16(x) = 2^-7 |x| (a
// bound on one bf16 ULP at x):
//   parameter (16-bit)  |fast - ref| in ULPs of its format at max(|ref|, lr);
//                       the fraction bit-equal;
//   master (float32,    |fast - ref| / (2^-7 |ref| + lr): one bf16 rounding of
//    the parameter and   the parameter plus one learning rate (Lion's sign(c)
//    its error bits      may flip where c is near zero: exactly 2 lr);
//    decoded)            the fraction with |fast - ref| <= 2^-20 max(|ref|, lr);
//   codes               |fast - ref| (a codebook's index into its ascending
//                       table); the fraction equal;
//   state (dequantized) |fast - ref| over the reference's absmax of the
//                       element's group or block;
//   scales, absmax      relative error; the fraction within 2^-20;
//   gradient            read-only: byte for byte;
//   every stream        NaN exactly where the reference has NaN, an infinity
//                       exactly where it has the same infinity.
//
//===----------------------------------------------------------------------===//
#ifndef QOPT_TEST_FAST_MODE_TOLERANCE_H
#define QOPT_TEST_FAST_MODE_TOLERANCE_H

#include "qopt/reference/Step.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace qopt::fastmode {

namespace ref = qopt::ref;

constexpr double kUnchecked = std::numeric_limits<double>::infinity();
/// What counts as "close" for the master and the scales.
constexpr double kClose = 0x1p-20;

/// A stated tolerance (see the file comment for the units). kUnchecked is
/// not checked.
struct Tolerance {
  double paramMaxUlp;    ///< ULPs of the parameter's format at max(|ref|, lr)
  double paramMinEqual;  ///< fraction of parameters bit-equal
  double masterMax;      ///< |fast - ref| / (2^-7 |ref| + lr)
  double masterMinClose; ///< fraction with |fast - ref| <= 2^-20 max(|ref|, lr)
  double codeMaxDelta;   ///< |fast code - ref code|
  double codeMinEqual;   ///< fraction of codes equal
  double stateMax;       ///< |fast - ref| dequantized / the reference's group absmax
  double scaleMaxRel;    ///< relative error of a scale or absmax
  double scaleMinClose;  ///< fraction of scales within 2^-20 relative
};

/// One fast step from the reference's state (every stream set to the
/// reference's before the step). The parameter and master bounds are what
/// one step can do: one bf16 rounding apart, plus Lion's sign flip (2 lr);
/// the others are the host figures (docs/dsl.md) with 2x headroom or more.
// clang-format off
constexpr Tolerance kOneStep = {
    /*paramMaxUlp=*/1,      /*paramMinEqual=*/0.999,
    /*masterMax=*/2,        /*masterMinClose=*/0.995,
    /*codeMaxDelta=*/1,     /*codeMinEqual=*/0.999,
    /*stateMax=*/0x1p-5,    /*scaleMaxRel=*/0x1p-9,
    /*scaleMinClose=*/0.995};
// clang-format on

/// Six steps from the same start, the fast kernel and the reference each
/// stepping its own streams: a code one unit off feeds the next steps, and a
/// codebook index near zero may move by tens (its table is dense there), so
/// codes are bounded through the dequantized state. Measured figures with
/// 2x headroom or more.
// clang-format off
constexpr Tolerance kTrajectory = {
    /*paramMaxUlp=*/16,          /*paramMinEqual=*/0.999,
    /*masterMax=*/2,             /*masterMinClose=*/0.99,
    /*codeMaxDelta=*/kUnchecked, /*codeMinEqual=*/0.995,
    /*stateMax=*/0x1p-4,         /*scaleMaxRel=*/0x1p-5,
    /*scaleMinClose=*/0.99};
// clang-format on

/// What one stream kind measured, over every tensor and step of a run.
struct Figures {
  int64_t count = 0;     ///< elements compared
  int64_t equal = 0;     ///< bit-equal, equal, or close (per stream)
  double maxError = 0;   ///< in the stream's unit
  int64_t nonFinite = 0; ///< elements whose NaN/inf disagree

  void add(double error, bool same) {
    ++count;
    equal += same;
    if (!(error <= maxError)) // a NaN error counts as infinite
      maxError = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
  }
  void addNonFinite() {
    ++nonFinite;
    add(std::numeric_limits<double>::infinity(), false);
  }
  double fraction() const { return count ? double(equal) / double(count) : 1.0; }
};

struct RunFigures {
  Figures param, master, codes, state, scales;
  int64_t gradChanged = 0; ///< bytes of the read-only gradient that changed
};

/// Whether NaN and infinities disagree.
inline bool nonFiniteDisagree(float got, float want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) != std::isnan(want);
  if (std::isinf(got) || std::isinf(want))
    return got != want;
  return false;
}

/// The spacing of `dtype` (f32, bf16, f16) at magnitude x > 0.
inline double ulpOf(ref::DType dtype, double x) {
  int mantissa = dtype == ref::DType::F32 ? 23 : dtype == ref::DType::BF16 ? 7 : 10;
  int minExponent = dtype == ref::DType::F16 ? -14 : -126;
  return std::ldexp(1.0, std::max(std::ilogb(x), minExponent) - mantissa);
}

/// A float stream (parameter or plain state): ULPs at max(|ref|, floor).
inline void measureUlps(const ref::Buffer &got, const ref::Buffer &want, double floor, Figures &f) {
  std::vector<float> g = got.toFloats(), w = want.toFloats();
  size_t esize = ref::dtypeSize(want.dtype());
  for (size_t i = 0; i < w.size(); ++i) {
    bool same =
        std::memcmp(got.raw().data() + i * esize, want.raw().data() + i * esize, esize) == 0;
    if (nonFiniteDisagree(g[i], w[i]))
      f.addNonFinite();
    else if (!std::isfinite(w[i]))
      f.add(0, true);
    else
      f.add(std::fabs(double(g[i]) - double(w[i])) /
                ulpOf(want.dtype(), std::max({std::fabs(double(w[i])), floor, 1e-45})),
            same);
  }
}

/// The master weights (see the file comment).
inline void measureMaster(const std::vector<float> &g, const std::vector<float> &w, double lr,
                          Figures &f) {
  for (size_t i = 0; i < w.size(); ++i) {
    if (nonFiniteDisagree(g[i], w[i])) {
      f.addNonFinite();
      continue;
    }
    if (!std::isfinite(w[i])) {
      f.add(0, true);
      continue;
    }
    double a = std::fabs(double(w[i]));
    double delta = std::fabs(double(g[i]) - double(w[i]));
    f.add(delta / (0x1p-7 * a + lr), delta <= kClose * std::max(a, lr));
  }
}

/// Scales and absmax: relative error.
inline void measureScales(const std::vector<float> &g, const std::vector<float> &w, Figures &f) {
  for (size_t i = 0; i < w.size(); ++i) {
    if (nonFiniteDisagree(g[i], w[i])) {
      f.addNonFinite();
      continue;
    }
    if (!std::isfinite(w[i])) {
      f.add(0, true);
      continue;
    }
    double delta = std::fabs(double(g[i]) - double(w[i]));
    double rel = delta == 0  ? 0
                 : w[i] == 0 ? std::numeric_limits<double>::infinity()
                             : delta / std::fabs(double(w[i]));
    f.add(rel, rel <= kClose);
  }
}

/// Codes (int8, uint8; codebook indices into an ascending table).
/// A code of a group or block whose stored scale is 0 in both (a block the
/// overflow policy restarted: docs/numerics.md, "Overflow") dequantizes to 0
/// whatever it is, and is not compared; `gotScales`/`wantScales` hold one
/// value per `chunk` codes.
inline void measureCodes(const ref::Buffer &got, const ref::Buffer &want,
                         const std::vector<float> &gotScales,
                         const std::vector<float> &wantScales, int64_t chunk, Figures &f) {
  for (int64_t i = 0; i < want.count(); ++i) {
    size_t block = size_t(i / chunk);
    if (block < wantScales.size() && wantScales[block] == 0 && gotScales[block] == 0)
      continue;
    int64_t g, w;
    if (want.dtype() == ref::DType::I8) {
      g = got.as<int8_t>()[i];
      w = want.as<int8_t>()[i];
    } else {
      g = got.as<uint8_t>()[i];
      w = want.as<uint8_t>()[i];
    }
    f.add(double(std::llabs(g - w)), g == w);
  }
}

/// A quantized state dequantized: |fast - ref| over the reference's absmax
/// of the element's group or block (`chunk` elements).
inline void measureState(const std::vector<float> &g, const std::vector<float> &w, int64_t chunk,
                         Figures &f) {
  for (size_t begin = 0; begin < w.size(); begin += size_t(chunk)) {
    size_t end = std::min(w.size(), begin + size_t(chunk));
    double absmax = 0;
    for (size_t i = begin; i < end; ++i)
      absmax = std::max(absmax, std::fabs(double(w[i])));
    for (size_t i = begin; i < end; ++i) {
      if (nonFiniteDisagree(g[i], w[i])) {
        f.addNonFinite();
        continue;
      }
      double delta = std::isfinite(w[i]) ? std::fabs(double(g[i]) - double(w[i])) : 0;
      f.add(delta == 0                            ? 0
            : std::isfinite(absmax) && absmax > 0 ? delta / absmax
                                                  : std::numeric_limits<double>::infinity(),
            delta == 0);
    }
  }
}

/// Adds how `got` (fast) differs from `want` (reference) to `figures`.
inline void measure(const ref::StepSpec &spec, double lr,
                    const std::vector<ref::TensorBuffers> &got,
                    const std::vector<ref::TensorBuffers> &want, RunFigures &figures) {
  for (size_t k = 0; k < want.size(); ++k) {
    const ref::TensorBuffers &g = got[k], &w = want[k];
    measureUlps(g.param, w.param, lr, figures.param);
    measureMaster(ref::readMaster(spec, g), ref::readMaster(spec, w), lr, figures.master);
    for (size_t i = 0; i < w.grad.bytes(); ++i)
      figures.gradChanged += g.grad.raw()[i] != w.grad.raw()[i];
    for (size_t s = 0; s < w.states.size(); ++s) {
      const ref::StateScheme &scheme = spec.states[s];
      const ref::StateBuffers &gs = g.states[s], &ws = w.states[s];
      if (ref::isFloatDType(ws.values.dtype())) { // a plain state, as a parameter
        measureUlps(gs.values, ws.values, 0, figures.param);
        continue;
      }
      int64_t chunk =
          scheme.kind == ref::StateKind::Codebook ? scheme.block : scheme.group.group;
      measureCodes(gs.values, ws.values, gs.scales.toFloats(), ws.scales.toFloats(), chunk,
                   figures.codes);
      measureState(ref::readState(spec, g, s), ref::readState(spec, w, s), chunk, figures.state);
      measureScales(gs.scales.toFloats(), ws.scales.toFloats(), figures.scales);
    }
  }
}

/// The violations of `tol` by `f`; empty when within the tolerance.
inline std::vector<std::string> violations(const RunFigures &f, const Tolerance &tol) {
  std::vector<std::string> out;
  auto say = [&](const std::string &what, double got, const char *cmp, double bound) {
    std::ostringstream os;
    os << what << " " << got << " " << cmp << " " << bound;
    out.push_back(os.str());
  };
  const std::pair<const char *, const Figures *> all[] = {{"parameter", &f.param},
                                                          {"master", &f.master},
                                                          {"codes", &f.codes},
                                                          {"state", &f.state},
                                                          {"scales", &f.scales}};
  for (auto [name, figures] : all)
    if (figures->nonFinite)
      say(std::string(name) + ": elements whose NaN/inf disagree with the reference",
          double(figures->nonFinite), ">", 0);
  auto atMost = [&](const char *what, double got, double bound) {
    if (got > bound)
      say(what, got, ">", bound);
  };
  auto atLeast = [&](const char *what, double got, double bound) {
    if (got < bound)
      say(what, got, "<", bound);
  };
  atMost("parameter: max ULPs at max(|ref|, lr)", f.param.maxError, tol.paramMaxUlp);
  atLeast("parameter: fraction bit-equal", f.param.fraction(), tol.paramMinEqual);
  atMost("master: max |fast - ref| / (2^-7 |ref| + lr)", f.master.maxError, tol.masterMax);
  atLeast("master: fraction within 2^-20 max(|ref|, lr)", f.master.fraction(), tol.masterMinClose);
  atMost("codes: max |fast - ref|", f.codes.maxError, tol.codeMaxDelta);
  atLeast("codes: fraction equal", f.codes.fraction(), tol.codeMinEqual);
  atMost("state: max |fast - ref| / group absmax", f.state.maxError, tol.stateMax);
  atMost("scales: max relative error", f.scales.maxError, tol.scaleMaxRel);
  atLeast("scales: fraction within 2^-20", f.scales.fraction(), tol.scaleMinClose);
  if (f.gradChanged)
    say("gradient: bytes changed", double(f.gradChanged), ">", 0);
  return out;
}

/// One line of figures.
inline std::string describe(const RunFigures &f) {
  std::ostringstream os;
  os.precision(6);
  os << "param " << f.param.fraction() * 100 << "% equal, max " << f.param.maxError
     << " ulp; master " << f.master.fraction() * 100 << "% close, max " << f.master.maxError
     << "; codes " << f.codes.fraction() * 100 << "% equal, max |d| " << f.codes.maxError
     << "; state max " << f.state.maxError << " of absmax; scales " << f.scales.fraction() * 100
     << "% close, max rel " << f.scales.maxError << " [" << f.param.count << " params, "
     << f.codes.count << " codes, " << f.scales.count << " scales]";
  return os.str();
}

} // namespace qopt::fastmode

#endif // QOPT_TEST_FAST_MODE_TOLERANCE_H
