//===- StepPhases.cpp - The launches of a step, and its two phases --------===//
//
// A step with step reductions (docs/abi.md, "Step reductions") runs in two
// phases over all its launches: phase A writes each tensor's float64
// accumulations (row base + k of the step, base the tensors of the earlier
// launches), phase B combines the step's rows into each launch's uniform
// slots U + s and steps. Without step reductions a step is today's: each
// launch once, in order. Every launch is validated, and its uniforms
// evaluated, before anything is launched.
//
//===----------------------------------------------------------------------===//
#include "StepPhases.h"

#include "Error.h"
#include "Handles.h"
#include "TileMap.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>

namespace qopt::rt {

namespace {

const char *kindName(qopt_reduction_kind k) {
  switch (k) {
  case QOPT_REDUCTION_SUM:
    return "sum";
  case QOPT_REDUCTION_MEAN:
    return "mean";
  case QOPT_REDUCTION_MAX:
    return "max";
  case QOPT_REDUCTION_NORM:
    return "norm";
  case QOPT_REDUCTION_RMS:
    return "rms";
  }
  return "?";
}

std::string kindList(const std::vector<qopt_reduction_kind> &kinds) {
  std::string s = "[";
  for (size_t i = 0; i < kinds.size(); ++i)
    s += cat(i ? ", " : "", kindName(kinds[i]));
  return s + "]";
}

/// The step's S (0 without step reductions): every launch's kernel has the
/// same list of step reduction kinds where any has one (a kernel combines
/// rows of exactly its own kinds).
size_t stepReductions(const qopt_launch *launches, size_t n) {
  size_t first = n;
  for (size_t i = 0; i < n && first == n; ++i)
    if (launches[i].kernel &&
        launches[i].kernel->impl->manifest()->numStepReductions > 0)
      first = i;
  if (first == n)
    return 0;
  const Manifest &a = *launches[first].kernel->impl->manifest();
  std::vector<qopt_reduction_kind> kinds = a.stepKinds();
  for (size_t i = 0; i < n; ++i) {
    if (!launches[i].kernel)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "launch ", i, ": kernel is NULL");
    const Manifest &b = *launches[i].kernel->impl->manifest();
    std::vector<qopt_reduction_kind> other = b.stepKinds();
    if (other != kinds)
      fail(QOPT_ERROR_VALIDATION, "launches ", first, " and ", i,
           " of one step have different step reductions: kernel '", a.kernel,
           "' has ", kindList(kinds), ", kernel '", b.kernel, "' has ",
           kindList(other), " (a whole-step reduction reads every launch's "
           "tensors, so every kernel of the step computes the same ones)");
  }
  return kinds.size();
}

/// The identity of a step reduction's accumulation: what an empty tensor's
/// row holds (the tree's padding).
double identity(qopt_reduction_kind k) {
  return k == QOPT_REDUCTION_MAX ? -INFINITY : 0.0;
}

} // namespace

//===----------------------------------------------------------------------===//
// One launch's phases
//===----------------------------------------------------------------------===//

void Kernel::setHostPhase(const std::string &phase, void (*fn)()) {
  const Manifest &m = *manifest_;
  if (ctx_->backend() != QOPT_BACKEND_HOST)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", m.kernel, "' is not a host "
         "kernel: its phases are launches of its module");
  if (m.numStepReductions == 0)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel '", m.kernel, "' has no step "
         "reductions, so no host phases");
  std::lock_guard<std::mutex> lock(mu_);
  if (phase == "partials")
    hostPartials_ = reinterpret_cast<qopt_host_partials_fn>(fn);
  else if (phase == "combine")
    hostCombine_ = reinterpret_cast<qopt_host_combine_fn>(fn);
  else
    fail(QOPT_ERROR_INVALID_ARGUMENT, "unknown host phase '", phase,
         "' (expected partials or combine)");
}

void Kernel::begin(LaunchRun &r, const std::vector<float> *hostUniforms,
                   const StepBuffers &extra, size_t stepWorkspaceBytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const Manifest &m = *manifest_;
  r.counters = takesCounters() ? extra.counters : nullptr;
  if (ctx_->backend() == QOPT_BACKEND_HOST) {
    if (!hostFn_ || !hostPartials_ || !hostCombine_)
      fail(QOPT_ERROR_UNSUPPORTED, "kernel '", m.kernel, "' has step "
           "reductions but no host ",
           !hostFn_ ? "function" : !hostPartials_ ? "partials function"
                                                  : "combine function",
           " (a host library's manifest names them in \"phases\"; a "
           "qopt_kernel_create_host kernel is given them with "
           "qopt_kernel_set_host_phase)");
    // The combine completes a copy of the uniforms (the caller's stay as
    // they are); the step reads it.
    r.uniforms.assign(m.numUniforms(), 0.0f);
    if (hostUniforms)
      std::copy(hostUniforms->begin(), hostUniforms->end(), r.uniforms.begin());
    else if (extra.deviceUniforms)
      std::copy(extra.deviceUniforms, extra.deviceUniforms + m.uniforms.size(),
                r.uniforms.begin());
    return;
  }
  cu::RelaxedCaptureScope relaxed;
  cu::ScopedContext scope(ctx_->cuContext());
  try {
    uploadCuda(r, hostUniforms, extra, stepWorkspaceBytes);
  } catch (...) {
    endCuda(r, true);
    throw;
  }
  scope.pop();
}

void Kernel::phaseA(LaunchRun &r, double *rows) {
  std::lock_guard<std::mutex> lock(mu_);
  const Manifest &m = *manifest_;
  if (ctx_->backend() == QOPT_BACKEND_HOST) {
    const qopt_tensor_list *t = r.t;
    const CheckedList &c = *r.checked;
    const size_t S = m.numStepReductions;
    // An empty tensor has no first tile, so no call writes its row.
    std::vector<qopt_reduction_kind> kinds = m.stepKinds();
    for (size_t k = 0; k < t->num_tensors; ++k)
      for (size_t s = 0; s < S; ++s)
        rows[k * S + s] = identity(kinds[s]);
    if (c.numTiles == 0)
      return;
    std::vector<unsigned char> descs(t->num_tensors *
                                     size_t(m.launch.descriptor_bytes));
    buildDescriptors(m, t, c, descs.data());
    std::vector<int32_t> tileMap(static_cast<size_t>(c.numTiles));
    fillTileMap(t->numels, c.firstTile.data(), t->num_tensors,
                m.launch.tile_elements, tileMap.data());
    std::vector<const float *> tablePtrs(m.tables.size());
    for (size_t i = 0; i < m.tables.size(); ++i)
      tablePtrs[i] = static_cast<const float *>(r.tables[i]);
    const float *const *tp = tablePtrs.empty() ? nullptr : tablePtrs.data();
    forEachTileRange(t, c, tileMap.data(), [&](int64_t begin, int64_t end) {
      hostPartials_(descs.data(), tileMap.data(), c.numTiles,
                    r.uniforms.data(), tp, begin, end, rows);
    });
    return;
  }
  cu::RelaxedCaptureScope relaxed;
  cu::ScopedContext scope(ctx_->cuContext());
  r.args.stepPartials = reinterpret_cast<uintptr_t>(rows);
  launchPhases(r.args, static_cast<cu::CUstream>(r.stream), 0,
               combinePhase());
  scope.pop();
}

void Kernel::phaseB(LaunchRun &r, const double *rows, int64_t numStepTensors) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx_->backend() == QOPT_BACKEND_HOST) {
    hostCombine_(numStepTensors, rows, r.uniforms.data());
    stepHost(r.t, *r.checked, r.uniforms.data(), r.counters, r.tables);
    return;
  }
  cu::RelaxedCaptureScope relaxed;
  cu::ScopedContext scope(ctx_->cuContext());
  r.args.stepPartials = reinterpret_cast<uintptr_t>(rows);
  r.args.numStepTensors = numStepTensors;
  launchPhases(r.args, static_cast<cu::CUstream>(r.stream), combinePhase(),
               manifest_->phases.size());
  launchStep(r);
  scope.pop();
}

void Kernel::end(LaunchRun &r, bool failed) {
  if (ctx_->backend() == QOPT_BACKEND_HOST || r.slot < 0)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  cu::ScopedContext scope(ctx_->cuContext());
  endCuda(r, failed);
  scope.pop();
}

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

void stepPartialsShape(const qopt_launch *launches, size_t numLaunches,
                       int64_t *numStepTensors, int64_t *numStepReductions) {
  if (numLaunches && !launches)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "launches is NULL but num_launches is ",
         numLaunches);
  size_t S = stepReductions(launches, numLaunches);
  int64_t T = 0;
  for (size_t i = 0; i < numLaunches; ++i) {
    const qopt_tensor_list *t = launches[i].tensors;
    if (!t)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "launch ", i, ": tensors is NULL");
    checkTensorCount(t->num_tensors);
    T += static_cast<int64_t>(t->num_tensors);
  }
  *numStepTensors = T;
  *numStepReductions = static_cast<int64_t>(S);
}

namespace {

/// A step's launches, validated, with their uniforms evaluated.
class Step {
public:
  Step(const qopt_launch *launches, size_t n) : l_(launches), n_(n), ready_(n) {}

  /// Validates every launch and evaluates its uniforms; launches nothing.
  /// `collect`: keeps each launch's buffers for checkAcrossLaunches.
  void validate(bool collect) {
    if (collect)
      versions_.assign(n_, 0);
    try {
      for (i_ = 0; i_ < n_; ++i_) {
        const qopt_launch &l = l_[i_];
        Ready &r = ready_[i_];
        if (!l.kernel)
          fail(QOPT_ERROR_INVALID_ARGUMENT, "kernel is NULL");
        r.kernel = l.kernel->impl.get();
        if (!l.device_uniforms)
          r.uniforms = evaluateUniforms(*r.kernel->manifest(), l.hypers,
                                        l.num_hypers, l.step);
        r.kernel->requireUniforms(uniformsOf(i_), l.device_uniforms);
        r.checked = collect ? r.kernel->validate(l.tensors, l.tables,
                                                 l.num_tables, extraOf(i_),
                                                 versions_[i_])
                            : r.kernel->validate(l.tensors, l.tables,
                                                 l.num_tables, extraOf(i_));
      }
    } catch (const Error &e) {
      throw prefixed(e, ": ");
    }
  }

  /// The checks of one launch's buffers (Validation.cpp) over the whole
  /// step: no byte that one launch writes is a byte of another launch's
  /// buffers, and none is in the caller's step_partials rows (`rows`, of
  /// `rowBytes`; null: none). The numerics counters are the exception: the
  /// launches of a step may share them (each adds to them), so a counters
  /// buffer may equal another launch's counters, and overlap nothing else.
  /// Needs validate(true).
  void checkAcrossLaunches(const double *rows, uint64_t rowBytes) const;

  /// Without step reductions: each launch as one step, in order.
  void launchEach(void *stream) {
    try {
      for (i_ = 0; i_ < n_; ++i_)
        ready_[i_].kernel->launch(l_[i_].tensors, *ready_[i_].checked,
                                  uniformsOf(i_), extraOf(i_), l_[i_].tables,
                                  stream);
    } catch (const Error &e) {
      throw prefixed(e, i_ ? " (launches before it were enqueued): " : ": ");
    }
  }

  /// With S step reductions: phase A over every launch, then phase B (or
  /// only one of them, as `mode` says).
  void runPhases(size_t S, void *stream, StepMode mode, double *callerRows);

private:
  struct Ready {
    Kernel *kernel = nullptr;
    CheckedListPtr checked;
    std::vector<float> uniforms;
  };

  StepBuffers extraOf(size_t k) const {
    return StepBuffers{l_[k].device_uniforms, l_[k].numerics_counters};
  }
  const std::vector<float> *uniformsOf(size_t k) const {
    return l_[k].device_uniforms ? nullptr : &ready_[k].uniforms;
  }
  bool perTensor(size_t k) const {
    return ready_[k].kernel->manifest()->numTensorReductions > 0;
  }
  /// One launch's message is qopt_step's; of several, it names launch i_.
  Error prefixed(const Error &e, const char *what) const {
    if (n_ == 1)
      return Error(e.status(), e.what());
    return Error(e.status(), cat("launch ", i_, what, e.what()));
  }

  const qopt_launch *l_;
  size_t n_;
  std::vector<Ready> ready_;
  std::vector<uint64_t> versions_; ///< each launch's list, by validate(true)
  size_t i_ = 0; ///< the launch being validated or launched
};

namespace {
/// The last step whose launches checkAcrossLaunches accepted: the versions of
/// their lists in launch order and the rows. A trainer's steps repeat their
/// launches, so a step equal to it is accepted without the merge.
struct AcceptedStep {
  std::mutex mu;
  std::vector<uint64_t> versions;
  const double *rows = nullptr;
  uint64_t rowBytes = 0;
};
AcceptedStep &acceptedStep() {
  static AcceptedStep a;
  return a;
}
} // namespace

void Step::checkAcrossLaunches(const double *rows, uint64_t rowBytes) const {
  AcceptedStep &accepted = acceptedStep();
  {
    std::lock_guard<std::mutex> lock(accepted.mu);
    if (accepted.versions == versions_ && accepted.rows == rows &&
        accepted.rowBytes == rowBytes)
      return;
  }
  // A launch's buffers are tagged with the launch; launch n_ is the rows.
  struct Tagged {
    Span s;
    size_t launch;
    bool operator<(const Tagged &o) const { return s < o.s; }
  };
  std::vector<Tagged> all, counters;
  std::vector<Span> spans;
  for (size_t k = 0; k < n_; ++k) {
    const qopt_launch &l = l_[k];
    ready_[k].kernel->spans(versions_[k], l.tensors, l.tables, l.num_tables,
                            extraOf(k), spans);
    const size_t runStart = all.size();
    for (const Span &e : spans)
      (ready_[k].kernel->isCounters(l_[k].tensors, e.index) ? counters : all)
          .push_back({e, k});
    // Each launch's spans are sorted: merging the runs keeps `all` sorted.
    std::inplace_merge(all.begin(), all.begin() + runStart, all.end());
  }
  if (rows && rowBytes) {
    uint64_t b = reinterpret_cast<uintptr_t>(rows);
    Tagged r{{b, b + rowBytes, 0, true}, n_};
    all.insert(std::upper_bound(all.begin(), all.end(), r), r);
  }
  auto label = [&](const Tagged &t) {
    std::ostringstream os;
    os << "0x" << std::hex << t.s.begin;
    std::string where = cat(" [", os.str(), ", +", t.s.end - t.s.begin,
                            " bytes)");
    if (t.launch == n_)
      return cat("step_partials", where);
    return cat("launch ", t.launch, "'s ",
               ready_[t.launch].kernel->bufferLabel(l_[t.launch].tensors,
                                                    t.s.index),
               where);
  };
  // The later launch (or the rows) is named first, as "launch i: ..." names
  // the launch a single-launch check refuses.
  auto refuse = [&](const Tagged &x, const Tagged &y) {
    const Tagged &a = x.launch >= y.launch ? x : y;
    const Tagged &b = x.launch >= y.launch ? y : x;
    if (a.launch == n_)
      fail(QOPT_ERROR_VALIDATION, "overlapping buffers: ", label(a),
           " overlaps ", label(b),
           "; the step's rows share no byte with a launch's buffers");
    fail(QOPT_ERROR_VALIDATION, "overlapping buffers across launches: ",
         label(a), " overlaps ", label(b),
         a.s.written && b.s.written ? "; both are written"
                                    : "; one of them is written");
  };
  // As Kernel::checkOverlaps: in address order the span reaching furthest
  // (and the written one reaching furthest) finds a written overlap if any
  // exists. Within one launch there is none (each launch was validated), so
  // any found joins two launches or a launch and the rows.
  const Tagged *far = nullptr, *farWritten = nullptr;
  for (const Tagged &e : all) {
    if (farWritten && farWritten->s.end > e.s.begin)
      refuse(e, *farWritten);
    if (e.s.written && far && far->s.end > e.s.begin)
      refuse(e, *far);
    if (!far || e.s.end > far->s.end)
      far = &e;
    if (e.s.written && (!farWritten || e.s.end > farWritten->s.end))
      farWritten = &e;
  }
  // The launches' counters: one buffer shared by all of them (the Python
  // package's case) is checked once; distinct ones may not overlap.
  std::sort(counters.begin(), counters.end());
  counters.erase(std::unique(counters.begin(), counters.end(),
                             [](const Tagged &x, const Tagged &y) {
                               return x.s.begin == y.s.begin &&
                                      x.s.end == y.s.end;
                             }),
                 counters.end());
  for (size_t i = 1; i < counters.size(); ++i)
    if (counters[i].s.begin < counters[i - 1].s.end)
      refuse(counters[i], counters[i - 1]);
  for (const Tagged &c : counters) {
    auto it = std::lower_bound(
        all.begin(), all.end(), c.s.end,
        [](const Tagged &t, uint64_t end) { return t.s.begin < end; });
    // Spans starting before the counters' end: any reaching past their
    // start overlaps them.
    for (auto k = all.begin(); k != it; ++k)
      if (k->s.end > c.s.begin)
        refuse(c, *k);
  }
  std::lock_guard<std::mutex> lock(accepted.mu);
  accepted.versions = versions_;
  accepted.rows = rows;
  accepted.rowBytes = rowBytes;
}

void Step::runPhases(size_t S, void *stream, StepMode mode,
                     double *callerRows) {
  // Rows: tensor (base[i] + k) of launch i.
  std::vector<int64_t> base(n_ + 1, 0);
  for (size_t k = 0; k < n_; ++k)
    base[k + 1] = base[k] + static_cast<int64_t>(l_[k].tensors->num_tensors);
  const int64_t T = base[n_];
  if (T == 0)
    return; // no tensor: nothing to reduce or step (and no rows)
  if (mode != StepMode::Whole) {
    if (!callerRows)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "step_partials is NULL");
    if (reinterpret_cast<uintptr_t>(callerRows) % 8 != 0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "step_partials: pointer ",
           static_cast<const void *>(callerRows), " is not 8-byte aligned");
  }
  // Phase A runs for every launch, except in phase B from the caller's rows,
  // where only kernels that also have per-tensor values need their reduce
  // and finish (writing their rows to the runtime's workspace).
  auto runsA = [&](size_t k) {
    return mode != StepMode::FromPartials || perTensor(k);
  };
  bool workspace = mode == StepMode::Whole;
  for (size_t k = 0; k < n_ && !workspace; ++k)
    workspace = mode == StepMode::FromPartials && perTensor(k);
  const size_t rowBytes = static_cast<size_t>(T) * S * sizeof(double);
  const bool host = ready_[0].kernel->info().backend == QOPT_BACKEND_HOST;
  for (size_t k = 1; k < n_; ++k)
    if ((ready_[k].kernel->info().backend == QOPT_BACKEND_HOST) != host)
      fail(QOPT_ERROR_VALIDATION, "launches 0 and ", k, " of one step with "
           "step reductions run on different backends (their rows are in "
           "one memory)");
  std::vector<double> hostRows(host && workspace ? size_t(T) * S : 0);

  std::vector<LaunchRun> runs(n_);
  size_t begun = 0;
  const char *stage = ": ";
  try {
    // The first launch with tensors holds the step's rows in its staging
    // buffer (CUDA).
    size_t holder = n_;
    for (i_ = 0; i_ < n_; ++i_, ++begun) {
      LaunchRun &r = runs[i_];
      r.t = l_[i_].tensors;
      r.checked = ready_[i_].checked;
      r.tables = l_[i_].tables;
      r.stream = stream;
      if (r.t->num_tensors == 0)
        continue;
      size_t bytes = 0;
      if (holder == n_ && workspace) {
        holder = i_;
        bytes = host ? 0 : rowBytes;
      }
      ready_[i_].kernel->begin(r, uniformsOf(i_), extraOf(i_), bytes);
    }
    double *rows = host ? hostRows.data()
                   : holder < n_
                       ? reinterpret_cast<double *>(runs[holder].stepWorkspace)
                       : nullptr;
    for (i_ = 0; i_ < n_; ++i_) {
      if (l_[i_].tensors->num_tensors == 0 || !runsA(i_))
        continue;
      double *dst = mode == StepMode::Partials ? callerRows : rows;
      ready_[i_].kernel->phaseA(runs[i_], dst + base[i_] * int64_t(S));
      stage = " (launches before it were enqueued): ";
    }
    if (mode != StepMode::Partials) {
      const double *all = mode == StepMode::FromPartials ? callerRows : rows;
      for (i_ = 0; i_ < n_; ++i_) {
        if (l_[i_].tensors->num_tensors == 0)
          continue;
        ready_[i_].kernel->phaseB(runs[i_], all, T);
        stage = " (launches before it were enqueued): ";
      }
    }
    for (i_ = 0; i_ < n_; ++i_)
      ready_[i_].kernel->end(runs[i_], false);
  } catch (...) {
    // Every staging buffer held so far is fenced (or retired) before the
    // error leaves.
    for (size_t k = 0; k < begun && k < n_; ++k) {
      try {
        ready_[k].kernel->end(runs[k], true);
      } catch (...) {
      }
    }
    try {
      throw;
    } catch (const Error &e) {
      throw prefixed(e, stage);
    }
  }
}

} // namespace

void stepMany(const qopt_launch *launches, size_t n, void *stream,
              StepMode mode, double *callerRows) {
  if (n && !launches)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "launches is NULL but num_launches is ",
         n);
  Step step(launches, n);
  const bool rows = mode != StepMode::Whole && callerRows;
  step.validate(n > 1 || rows);
  const size_t S = stepReductions(launches, n);
  if (n > 1 || rows) {
    uint64_t T = 0;
    for (size_t k = 0; k < n; ++k)
      T += launches[k].tensors->num_tensors;
    step.checkAcrossLaunches(rows ? callerRows : nullptr,
                             T * S * sizeof(double));
  }
  if (S > 0)
    return step.runPhases(S, stream, mode, callerRows);
  if (mode != StepMode::Whole)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "qopt_step_many_",
         mode == StepMode::Partials ? "partials" : "from_partials",
         ": no kernel of the step has step reductions (use qopt_step_many)");
  step.launchEach(stream);
}

} // namespace qopt::rt
