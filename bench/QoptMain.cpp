//===- QoptMain.cpp - qopt-main: the main job (issue 4 item 7) ------------===//
//
//   qopt-main --kernels build/kernels
//
// On a GPU: steps the GPT-2 124M parameter list (148 tensors, one launch per
// step) with FlashAdamW (flash_adamw: bf16 parameter + int8 error bits,
// group-32 companded 8-bit states) and with the seed's blockwise codebook
// AdamW (adamw8bit_block2048), on gradients of a realistic spread (per-tensor
// scale from 1e-4 to 1e-1, heavy tails, rows of the embedding with exactly
// zero gradient). For each optimizer it prints the time per step (median of
// 20), the bytes one step moves, GB/s, the fraction of a device-to-device
// copy measured in the same run, and the agreement with the C++ reference
// (test/reference) on four tensors of the list after three steps.
//
// Without a GPU: says so (the host backend is not built yet), runs the C++
// reference on a small list through the same data pipeline as a smoke check,
// and exits 0.
//
//===----------------------------------------------------------------------===//
#include "BenchCommon.h"
#include "QoptMainData.h"

#include "qopt/reference/Codebook.h"
#include "qopt/reference/Step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sys/stat.h>

using namespace qopt::bench;
using namespace qopt::mainjob;
namespace ref = qopt::ref;
using Clock = std::chrono::steady_clock;

namespace {

const Clock::time_point kProcessStart = Clock::now();

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// The two optimizers of the main job.
struct OptCase {
  std::string stem;  ///< spec / manifest stem
  std::string label; ///< what it is
  ref::StepSpec spec;
};

ref::Hyper mainHyper() {
  ref::Hyper h; // lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
  h.lr = 1e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.eps = 1e-8;
  h.weightDecay = 0.01;
  return h;
}
const std::vector<qopt_hyper> kHypers = {
    {"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};

std::vector<OptCase> optimizers() {
  return {{"flash_adamw", "FlashAdamW: bf16 param + int8 ecc, bf16 grad, group-32 i8/u8 states",
           ref::flashAdamW(mainHyper(), ref::Master::EccI8)},
          {"adamw8bit_block2048", "seed 000 blockwise AdamW: bf16 param/grad, uint8 codebook "
                                  "states, f32 absmax per 2048",
           ref::seed000AdamW(ref::createDynamicMap(true), ref::createDynamicMap(false), mainHyper(),
                             ref::DType::BF16, 2048)}};
}


std::string thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3)
    s.insert(size_t(i), ",");
  return s;
}

/// Names of a spec's streams from the manifest (or the reference's names).
std::vector<std::string> streamNames(const Spec &spec) {
  std::vector<std::string> v;
  for (const auto &s : spec.streams)
    v.push_back(s.name);
  return v;
}

// ---------------------------------------------------------------------------
// Without a GPU
// ---------------------------------------------------------------------------

/// Steps the small list 3 times with the host backend (the manifest's host
/// library, through the runtime) and compares every byte with the
/// reference's results `want` ([tensor][stream]).
bool hostBackendCheck(const OptCase &oc, const std::string &manifestPath, const HostData &data,
                      const std::vector<std::vector<std::vector<uint8_t>>> &want) {
  qopt_context *ctx = nullptr;
  qopt_registry *reg = nullptr;
  qopt_kernel *kernel = nullptr;
  qopt_manifest *m = nullptr;
  bool ok = false;
  try {
    BQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &ctx));
    BQ(qopt_registry_create(&reg));
    BQ(qopt_registry_add_manifest_file(reg, manifestPath.c_str()));
    BQ(qopt_manifest_load(manifestPath.c_str(), &m));
    qopt_manifest_info info{};
    BQ(qopt_manifest_get_info(m, &info));
    BQ(qopt_kernel_create(ctx, reg, info.kernel, &kernel));
    const size_t T = data.numels.size();
    std::vector<ref::TensorBuffers> ts;
    for (size_t k = 0; k < T; ++k) {
      std::vector<uint8_t> param, ecc;
      initialParam(oc.spec, data.master[k], param, ecc);
      ts.push_back(ref::makeTensor(oc.spec, data.numels[k]));
      std::memcpy(ts.back().param.data(), param.data(), param.size());
      if (!ecc.empty())
        std::memcpy(ts.back().ecc.data(), ecc.data(), ecc.size());
    }
    std::vector<void *> ptrs;
    for (auto &t : ts)
      for (ref::Buffer *b : t.streams())
        ptrs.push_back(b->data());
    std::vector<const void *> tables;
    for (const auto &st : oc.spec.states)
      if (st.kind == ref::StateKind::Codebook)
        tables.push_back(st.qmap.data());
    qopt_tensor_list list{};
    list.num_tensors = T;
    list.num_streams = ptrs.size() / T;
    list.numels = data.numels.data();
    list.data = ptrs.data();
    double ms = 0;
    for (int step = 1; step <= int(data.grads.size()); ++step) {
      for (size_t k = 0; k < T; ++k)
        std::memcpy(ts[k].grad.data(), data.grads[size_t(step - 1)][k].data(),
                    size_t(data.numels[k]) * 2);
      auto t0 = Clock::now();
      BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step, tables.data(),
                   tables.size(), nullptr));
      ms += msSince(t0);
    }
    uint64_t eq = 0, tot = 0;
    for (size_t k = 0; k < T; ++k) {
      std::vector<ref::Buffer *> got = ts[k].streams();
      for (size_t s = 0; s < got.size(); ++s) {
        tot += got[s]->bytes();
        for (size_t i = 0; i < got[s]->bytes(); ++i)
          eq += got[s]->raw()[i] == want[k][s][i];
      }
    }
    ok = eq == tot;
    std::printf("   host backend (%s): 3 steps in %.1f ms; equal to the reference for %s of %s "
                "bytes%s\n",
                manifestPath.c_str(), ms, thousands(eq).c_str(), thousands(tot).c_str(),
                ok ? "" : "  MISMATCH");
  } catch (const std::exception &e) {
    std::printf("   host backend (%s): FAILED: %s\n", manifestPath.c_str(), e.what());
  }
  qopt_kernel_destroy(kernel);
  qopt_manifest_destroy(m);
  qopt_registry_destroy(reg);
  qopt_context_destroy(ctx);
  return ok;
}

int hostSmoke(const std::string &why, const std::string &kernels) {
  auto t0 = Clock::now();
  // The host backend's libraries, if the build made them (kernels/host).
  auto hostManifest = [&](const std::string &stem) {
    std::string p = kernels + "/host/" + stem + ".manifest.json";
    FILE *f = kernels.empty() ? nullptr : std::fopen(p.c_str(), "r");
    if (f)
      std::fclose(f);
    return f ? p : std::string();
  };
  bool haveHost = true;
  for (const OptCase &oc : optimizers())
    haveHost = haveHost && !hostManifest(oc.stem).empty();
  std::printf("qopt-main: no GPU here (%s).\n", why.c_str());
  if (haveHost)
    std::printf("qopt-main: the GPT-2 124M list is stepped on the GPU only; here the host backend "
                "(%s/host) steps a small list,\n"
                "           which must match the C++ reference byte for byte (a smoke check of "
                "the data pipeline).\n",
                kernels.c_str());
  else
    std::printf("qopt-main: the host backend is not built yet (no %s/host/*.manifest.json), so "
                "nothing is stepped by qopt's kernels here;\n"
                "           running the C++ reference on a small list as a smoke check of the "
                "data pipeline instead.\n",
                kernels.c_str());
  // A small GPT-2-shaped list: vocabulary 1000, context 128, width 64, 2 layers.
  std::vector<NamedShape> shapes = {{"wte", {1000, 64}}, {"wpe", {128, 64}}};
  for (int i = 0; i < 2; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    shapes.push_back({h + "ln_1.weight", {64}});
    shapes.push_back({h + "attn.c_attn.weight", {64, 192}});
    shapes.push_back({h + "attn.c_attn.bias", {192}});
    shapes.push_back({h + "mlp.c_fc.weight", {64, 256}});
    shapes.push_back({h + "mlp.c_proj.weight", {256, 64}});
  }
  shapes.push_back({"ln_f.weight", {64}});
  const int steps = 3;
  HostData data = makeHostData(shapes, steps);
  int64_t total = 0;
  for (int64_t n : data.numels)
    total += n;
  std::vector<int64_t> gptNumels;
  for (const NamedShape &s : gpt2Shapes())
    gptNumels.push_back(s.numel());
  bool ok = true;
  for (OptCase &oc : optimizers()) {
    std::printf("\n== %s (%s)\n", oc.stem.c_str(), oc.label.c_str());
    std::string dir = kernels.empty() ? "" : resolveKernelDir(kernels, oc.stem);
    std::unique_ptr<Spec> spec;
    if (dir.empty()) {
      std::printf("   manifest: %s.manifest.json not found under %s (not checked)\n",
                  oc.stem.c_str(), kernels.c_str());
    } else {
      spec = std::make_unique<Spec>(dir + "/" + oc.stem + ".manifest.json");
      // The manifest's state layout must be the reference's streams.
      std::vector<float> t0v, t1v;
      std::vector<const float *> tables;
      for (const auto &st : oc.spec.states)
        if (st.kind == ref::StateKind::Codebook)
          tables.push_back(st.qmap.data());
      std::vector<qopt_buffer_layout> lay(spec->streams.size());
      ref::TensorBuffers probe = ref::makeTensor(oc.spec, 70001);
      std::vector<ref::Buffer *> rs = probe.streams();
      BQ(qopt_manifest_state_layout(spec->manifest, 70001, tables.data(), tables.size(),
                                    lay.data(), lay.size()));
      bool same = rs.size() == lay.size();
      for (size_t s = 0; same && s < rs.size(); ++s)
        same = rs[s]->bytes() == lay[s].bytes;
      std::printf("   manifest %s: %zu streams, layout %s the reference's; %.2f B/param; one step "
                  "of the GPT-2 list moves %s bytes\n",
                  spec->path.c_str(), spec->streams.size(), same ? "matches" : "DIFFERS FROM",
                  double(spec->bytesMoved({1 << 20})) / double(1 << 20),
                  thousands(spec->bytesMoved(gptNumels)).c_str());
      ok = ok && same;
    }
    // Whole-tensor reference vs the chunked one the GPU path uses.
    std::vector<std::vector<std::vector<uint8_t>>> finals; // [tensor][stream]
    uint64_t equal = 0, bytes = 0;
    bool finite = true, moved = false;
    for (size_t k = 0; k < data.numels.size(); ++k) {
      int64_t n = data.numels[k];
      std::vector<uint8_t> param, ecc;
      initialParam(oc.spec, data.master[k], param, ecc);
      ref::TensorBuffers t = ref::makeTensor(oc.spec, n);
      std::memcpy(t.param.data(), param.data(), param.size());
      if (!ecc.empty())
        std::memcpy(t.ecc.data(), ecc.data(), ecc.size());
      std::vector<std::vector<uint8_t>> init;
      for (ref::Buffer *b : t.streams())
        init.push_back(b->raw());
      std::vector<const uint16_t *> g;
      for (int s = 0; s < steps; ++s)
        g.push_back(data.grads[size_t(s)][k].data());
      for (int s = 0; s < steps; ++s) {
        std::memcpy(t.grad.data(), g[size_t(s)], size_t(n) * 2);
        ref::step(oc.spec, t, s + 1);
      }
      std::vector<std::vector<uint8_t>> chunked = referenceSteps(oc.spec, n, init, g, 4096);
      std::vector<ref::Buffer *> whole = t.streams();
      finals.push_back({});
      for (ref::Buffer *b : whole)
        finals.back().push_back(b->raw());
      for (size_t s = 0; s < whole.size(); ++s) {
        bytes += whole[s]->bytes();
        for (size_t i = 0; i < whole[s]->bytes(); ++i)
          equal += whole[s]->raw()[i] == chunked[s][i];
      }
      std::vector<float> m = ref::readMaster(oc.spec, t);
      for (size_t i = 0; i < m.size(); ++i) {
        finite = finite && std::isfinite(m[i]);
        moved = moved || m[i] != data.master[k][i];
      }
    }
    std::printf("   reference, 3 steps on %zu tensors (%s params): chunked == whole-tensor for %s "
                "of %s bytes; masters finite: %s; parameters moved: %s\n",
                data.numels.size(), thousands(uint64_t(total)).c_str(),
                thousands(equal).c_str(), thousands(bytes).c_str(), finite ? "yes" : "NO",
                moved ? "yes" : "NO");
    ok = ok && equal == bytes && finite && moved;
    std::string hm = hostManifest(oc.stem);
    if (!hm.empty())
      ok = hostBackendCheck(oc, hm, data, finals) && ok;
  }
  std::printf("\nqopt-main: host smoke check %s in %.0f ms (no GPU timings on this machine)\n",
              ok ? "passed" : "FAILED", msSince(t0));
  return 0;
}

// ---------------------------------------------------------------------------
// On the GPU
// ---------------------------------------------------------------------------
struct Result {
  std::string stem;
  uint64_t bytes = 0;
  double msStep = 0, msDevice = 0, msBackToBack = 0, hostUs = 0;
  double gbps = 0, gbpsDevice = 0;
  uint64_t eqBytes = 0, totBytes = 0;
  double loadMs = 0, firstStepMs = 0;
  bool graphOk = false;
};

int gpuMain(const std::string &kernels) {
  DeviceSession dev;
  const cu::Driver &d = cu::driver();
  cu::CUstream stream = nullptr;
  BCU(d.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING));
  qopt_context *ctx = nullptr;
  BQ(qopt_context_create(QOPT_BACKEND_CUDA, 0, &ctx));
  std::printf("qopt-main %s: %s (sm_%d%d, %d SMs, %.0f GiB), CUDA driver %d\n",
              utcDateTime().c_str(), dev.name.c_str(), dev.ccMajor, dev.ccMinor, dev.sms,
              double(dev.totalMem) / double(1ull << 30), dev.driverVersion);
  CopyRoof roof = measureCopyRoof(stream);
  std::printf("copy roof: cuMemcpyDtoD of 1 GiB, median of %d: %.3f ms = %.0f GB/s (read + "
              "write)\n",
              roof.iters, roof.ms, roof.gbps);

  const int checkSteps = 3;
  auto tData = Clock::now();
  HostData data = makeHostData(gpt2Shapes(), checkSteps);
  int64_t total = 0;
  for (int64_t n : data.numels)
    total += n;
  std::printf("GPT-2 124M parameter list: %zu tensors, %s parameters; gradients N(0, s_k^2), "
              "s_k in [1e-4, 1e-1] per tensor, 0.2%% x10..x100 tails, 30%% of wte rows zero "
              "(host data made in %.0f ms)\n",
              data.numels.size(), thousands(uint64_t(total)).c_str(), msSince(tData));
  // Tensors checked against the reference: the embedding and three others.
  const std::vector<std::string> checkNames = {"wte", "h.0.attn.c_attn.weight",
                                               "h.5.mlp.c_fc.bias", "ln_f.weight"};
  std::vector<size_t> checkIdx;
  for (const std::string &nm : checkNames)
    for (size_t k = 0; k < data.shapes.size(); ++k)
      if (data.shapes[k].name == nm)
        checkIdx.push_back(k);

  std::vector<Result> results;
  bool allAgree = true;
  for (OptCase &oc : optimizers()) {
    Result res;
    res.stem = oc.stem;
    std::string dir = resolveKernelDir(kernels, oc.stem);
    if (dir.empty())
      throw std::runtime_error("no " + oc.stem + ".manifest.json under " + kernels +
                               "/fatbin, " + kernels + "/ptx or " + kernels);
    Spec spec(dir + "/" + oc.stem + ".manifest.json");
    std::printf("\n== %s: %s\n   kernel %s from %s\n   streams: %s\n", oc.stem.c_str(),
                oc.label.c_str(), spec.info.kernel, dir.c_str(), spec.streamSummary().c_str());
    const size_t S = spec.streams.size(), T = data.numels.size();
    const size_t gi = gradIndex(oc.spec);
    if (refStreamPer(oc.spec).size() != S)
      throw std::runtime_error("the reference and the manifest disagree on the streams");
    res.bytes = spec.bytesMoved(data.numels);

    // Codebook tables: the reference's own, uploaded.
    std::vector<const float *> hostTables;
    std::vector<DeviceMem> devTables;
    std::vector<const void *> tableArgs;
    for (const auto &st : oc.spec.states)
      if (st.kind == ref::StateKind::Codebook) {
        hostTables.push_back(st.qmap.data());
        devTables.emplace_back(1024);
        BCU(d.cuMemcpyHtoD(devTables.back().ptr, st.qmap.data(), 1024));
        tableArgs.push_back(reinterpret_cast<const void *>(uintptr_t(devTables.back().ptr)));
      }
    if (tableArgs.size() != spec.tables.size())
      throw std::runtime_error("table count differs between the reference and the manifest");

    // Device streams and their initial values.
    Arena arena = allocateArena(spec, data.numels);
    std::vector<qopt_buffer_layout> lay(S);
    for (size_t k = 0; k < T; ++k) {
      BQ(qopt_manifest_state_layout(spec.manifest, data.numels[k], hostTables.data(),
                                    hostTables.size(), lay.data(), lay.size()));
      std::vector<uint8_t> param, ecc;
      initialParam(oc.spec, data.master[k], param, ecc);
      for (size_t s = 0; s < S; ++s) {
        cu::CUdeviceptr p = arena.ptr[k * S + s];
        const qopt_buffer_layout &L = lay[s];
        if (L.bytes == 0)
          continue;
        if (L.role == QOPT_ROLE_PARAM)
          BCU(d.cuMemcpyHtoD(p, param.data(), param.size()));
        else if (L.role == QOPT_ROLE_ERROR_BITS)
          BCU(d.cuMemcpyHtoD(p, ecc.data(), ecc.size()));
        else if (L.role == QOPT_ROLE_GRAD)
          continue; // uploaded per step
        else {
          size_t es = L.bytes / uint64_t(L.count);
          if (L.init != QOPT_INIT_FILL)
            throw std::runtime_error(std::string("unexpected init kind for ") + L.name);
          if (es == 1)
            BCU(d.cuMemsetD8(p, uint8_t(L.fill_bits), L.bytes));
          else if (es == 2)
            BCU(extra().cuMemsetD16(p, uint16_t(L.fill_bits), L.bytes / 2));
          else
            BCU(d.cuMemsetD32(p, uint32_t(L.fill_bits), L.bytes / 4));
        }
      }
    }
    // The checked tensors' initial bytes, read back (what the reference starts from).
    auto readTensor = [&](size_t k) {
      std::vector<std::vector<uint8_t>> v(S);
      for (size_t s = 0; s < S; ++s) {
        v[s].resize(arena.bytes[k * S + s]);
        if (!v[s].empty())
          BCU(d.cuMemcpyDtoH(v[s].data(), arena.ptr[k * S + s], v[s].size()));
      }
      return v;
    };
    BCU(d.cuCtxSynchronize());
    std::vector<std::vector<std::vector<uint8_t>>> initBytes;
    for (size_t k : checkIdx)
      initBytes.push_back(readTensor(k));

    std::vector<void *> ptrs = arena.voidPtrs();
    qopt_tensor_list list{};
    list.num_tensors = T;
    list.num_streams = S;
    list.numels = data.numels.data();
    list.data = ptrs.data();
    std::vector<const char *> names;
    for (const auto &s : data.shapes)
      names.push_back(s.name.c_str());
    list.names = names.data();
    // Synchronous copies run on the legacy stream, which the step's
    // non-blocking stream does not wait for: finish them before stepping.
    auto uploadGrads = [&](int step) {
      for (size_t k = 0; k < T; ++k)
        BCU(d.cuMemcpyHtoD(arena.ptr[k * S + gi], data.grads[size_t(step - 1)][k].data(),
                           size_t(data.numels[k]) * 2));
      BCU(d.cuCtxSynchronize());
    };

    // Kernel load, then the first step (validation, upload, launch, finish).
    uploadGrads(1);
    BCU(d.cuCtxSynchronize());
    auto tLoad = Clock::now();
    qopt_registry *registry = nullptr;
    qopt_kernel *kernel = nullptr;
    BQ(qopt_registry_create(&registry));
    BQ(qopt_registry_add_manifest_file(registry, spec.path.c_str()));
    BQ(qopt_kernel_create(ctx, registry, spec.info.kernel, &kernel));
    res.loadMs = msSince(tLoad);
    auto tFirst = Clock::now();
    BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), 1, tableArgs.data(),
                 tableArgs.size(), stream));
    BCU(d.cuStreamSynchronize(stream));
    res.firstStepMs = msSince(tFirst);
    for (int step = 2; step <= checkSteps; ++step) {
      uploadGrads(step);
      BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step, tableArgs.data(),
                   tableArgs.size(), stream));
      BCU(d.cuStreamSynchronize(stream));
    }
    std::vector<std::vector<std::vector<uint8_t>>> gpuBytes;
    for (size_t k : checkIdx)
      gpuBytes.push_back(readTensor(k));

    // The reference on the checked tensors, from the same bytes.
    auto tRef = Clock::now();
    std::vector<std::string> sn = streamNames(spec);
    std::vector<uint64_t> eqS(S, 0), totS(S, 0);
    std::printf("   agreement with the C++ reference after %d steps (bytes equal / total):\n",
                checkSteps);
    for (size_t c = 0; c < checkIdx.size(); ++c) {
      size_t k = checkIdx[c];
      std::vector<const uint16_t *> g;
      for (int s = 0; s < checkSteps; ++s)
        g.push_back(data.grads[size_t(s)][k].data());
      std::vector<std::vector<uint8_t>> want =
          referenceSteps(oc.spec, data.numels[k], initBytes[c], g, 4096 * 64);
      std::string line;
      uint64_t teq = 0, ttot = 0;
      for (size_t s = 0; s < S; ++s) {
        if (s == gi)
          continue; // the gradient is an input
        uint64_t eq = 0;
        for (size_t i = 0; i < want[s].size(); ++i)
          eq += want[s][i] == gpuBytes[c][s][i];
        eqS[s] += eq;
        totS[s] += want[s].size();
        teq += eq;
        ttot += want[s].size();
      }
      std::printf("     %-24s %10s elements: %s / %s%s\n", data.shapes[k].name.c_str(),
                  thousands(uint64_t(data.numels[k])).c_str(), thousands(teq).c_str(),
                  thousands(ttot).c_str(), teq == ttot ? "" : "  MISMATCH");
    }
    for (size_t s = 0; s < S; ++s) {
      if (s == gi)
        continue;
      std::printf("     stream %-10s %s / %s\n", sn[s].c_str(), thousands(eqS[s]).c_str(),
                  thousands(totS[s]).c_str());
      res.eqBytes += eqS[s];
      res.totBytes += totS[s];
    }
    std::printf("     (reference on the host: %.0f ms)\n", msSince(tRef));
    allAgree = allAgree && res.eqBytes == res.totBytes;

    // Timing. Gradients stay those of the last checked step.
    const int iters = 20;
    int64_t step = checkSteps + 1;
    for (int w = 0; w < 3; ++w, ++step)
      BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step, tableArgs.data(),
                   tableArgs.size(), stream));
    BCU(d.cuStreamSynchronize(stream));
    // (a) One qopt_step at a time, as a trainer calls it: events around each
    //     call, host validation and the descriptor upload included.
    std::vector<cu::CUevent> ev(2 * iters);
    for (auto &e : ev)
      BCU(d.cuEventCreate(&e, 0));
    std::vector<double> stepMs, hostUs;
    for (int i = 0; i < iters; ++i, ++step) {
      BCU(d.cuEventRecord(ev[2 * i], stream));
      auto t0 = Clock::now();
      BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step, tableArgs.data(),
                   tableArgs.size(), stream));
      hostUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      BCU(d.cuEventRecord(ev[2 * i + 1], stream));
      BCU(d.cuStreamSynchronize(stream));
    }
    for (int i = 0; i < iters; ++i) {
      float t = 0;
      BCU(extra().cuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
      stepMs.push_back(t);
    }
    res.msStep = stats(stepMs).median;
    res.hostUs = stats(hostUs).median;
    // (b) Back to back: 20 calls without waiting, one pair of events.
    BCU(d.cuEventRecord(ev[0], stream));
    for (int i = 0; i < iters; ++i, ++step)
      BQ(qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step, tableArgs.data(),
                   tableArgs.size(), stream));
    BCU(d.cuEventRecord(ev[1], stream));
    BCU(d.cuStreamSynchronize(stream));
    {
      float t = 0;
      BCU(extra().cuEventElapsedTime(&t, ev[0], ev[1]));
      res.msBackToBack = double(t) / iters;
    }
    // (c) Device time: the step captured in a CUDA graph, replays timed.
    std::string graphNote;
    try {
      cu::CUgraph graph = nullptr;
      cu::CUgraphExec exec = nullptr;
      BCU(d.cuStreamBeginCapture(stream, cu::CU_STREAM_CAPTURE_MODE_GLOBAL));
      qopt_status st = qopt_step(kernel, &list, kHypers.data(), kHypers.size(), step,
                                 tableArgs.data(), tableArgs.size(), stream);
      std::string err = st == QOPT_SUCCESS ? "" : qopt_last_error();
      cu::CUresult endr = d.cuStreamEndCapture(stream, &graph);
      if (st != QOPT_SUCCESS)
        throw std::runtime_error("qopt_step under capture: " + err);
      BCU(endr);
      BCU(d.cuGraphInstantiateWithFlags(&exec, graph, 0));
      for (int w = 0; w < 3; ++w)
        BCU(d.cuGraphLaunch(exec, stream));
      for (int i = 0; i < iters; ++i) {
        BCU(d.cuEventRecord(ev[2 * i], stream));
        BCU(d.cuGraphLaunch(exec, stream));
        BCU(d.cuEventRecord(ev[2 * i + 1], stream));
      }
      BCU(d.cuStreamSynchronize(stream));
      std::vector<double> g;
      for (int i = 0; i < iters; ++i) {
        float t = 0;
        BCU(extra().cuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
        g.push_back(t);
      }
      res.msDevice = stats(g).median;
      res.graphOk = true;
      (void)d.cuGraphExecDestroy(exec);
      (void)d.cuGraphDestroy(graph);
    } catch (const std::exception &e) {
      graphNote = e.what();
      res.msDevice = res.msBackToBack;
    }
    for (auto &e : ev)
      (void)d.cuEventDestroy(e);
    res.gbps = double(res.bytes) / (res.msStep * 1e-3) / 1e9;
    res.gbpsDevice = double(res.bytes) / (res.msDevice * 1e-3) / 1e9;
    std::printf("   kernel load %.1f ms; first step (validation, upload, launch, finish) %.1f ms\n",
                res.loadMs, res.firstStepMs);
    std::printf("   bytes per step: %s (%.2f B/param)\n", thousands(res.bytes).c_str(),
                double(res.bytes) / double(total));
    std::printf("   qopt_step, events around each call, median of %d: %.3f ms  %6.0f GB/s  "
                "%.2f of the copy roof  (host %.0f us/call)\n",
                iters, res.msStep, res.gbps, res.gbps / roof.gbps, res.hostUs);
    std::printf("   qopt_step back to back, %d calls: %.3f ms/step  %6.0f GB/s\n", iters,
                res.msBackToBack, double(res.bytes) / (res.msBackToBack * 1e-3) / 1e9);
    if (res.graphOk)
      std::printf("   device time (CUDA graph replay), median of %d: %.3f ms  %6.0f GB/s  %.2f "
                  "of the copy roof\n",
                  iters, res.msDevice, res.gbpsDevice, res.gbpsDevice / roof.gbps);
    else
      std::printf("   CUDA graph capture failed (%s); device time not measured\n",
                  graphNote.c_str());
    qopt_kernel_destroy(kernel);
    qopt_registry_destroy(registry);
    results.push_back(res);
  }

  std::printf("\nGPT-2 124M list, one launch per step, copy roof %.0f GB/s; device = CUDA graph "
              "replay of one qopt_step (median of 20), latency = events around one qopt_step "
              "call on an idle GPU (median of 20, host validation and upload included), "
              "back-to-back = 20 calls queued without waiting:\n",
              roof.gbps);
  std::printf("%-20s %13s %9s %7s %5s %11s %8s %13s %s\n", "optimizer", "bytes/step",
              "device ms", "GB/s", "roof", "latency ms", "GB/s", "back-to-back", "reference agreement (bytes)");
  for (const Result &r : results)
    std::printf("%-20s %13s %9.3f %7.0f %5.2f %11.3f %8.0f %10.3f ms %s / %s%s\n", r.stem.c_str(),
                thousands(r.bytes).c_str(), r.msDevice, r.gbpsDevice, r.gbpsDevice / roof.gbps,
                r.msStep, r.gbps, r.msBackToBack, thousands(r.eqBytes).c_str(),
                thousands(r.totBytes).c_str(), r.graphOk ? "" : " (no graph: device = back-to-back)");
  std::printf("process time: %.0f ms\n", msSince(kProcessStart));
  qopt_context_destroy(ctx);
  (void)d.cuStreamDestroy(stream);
  if (!allAgree) {
    std::printf("qopt-main: the GPU results DIFFER from the C++ reference (see above)\n");
    return 1;
  }
  return 0;
}

void usage() {
  std::printf("usage: qopt-main [--kernels DIR]\n"
              "  DIR holds the compiled kernels (build/kernels: its fatbin/ subdirectory is used "
              "if present, else ptx/, else DIR itself)\n");
}

} // namespace

int main(int argc, char **argv) {
  std::string kernels;
  bool kernelsGiven = false;
#ifdef QOPT_MAIN_DEFAULT_KERNELS
  kernels = QOPT_MAIN_DEFAULT_KERNELS;
#endif
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kernels") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "qopt-main: --kernels needs a folder\n");
        usage();
        return 2;
      }
      kernels = argv[++i];
      kernelsGiven = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "qopt-main: unknown argument %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  // A folder given that is not there is a mistake, not a build without
  // host kernels: stepping nothing and passing would hide it.
  struct stat st;
  if (kernelsGiven && (::stat(kernels.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    std::fprintf(stderr, "qopt-main: error: --kernels %s: not a directory\n", kernels.c_str());
    return 2;
  }
  try {
    std::string why = gpuUnavailableReason();
    if (!why.empty())
      return hostSmoke(why, kernels);
    return gpuMain(kernels);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "qopt-main: error: %s\n", e.what());
    return 1;
  }
}
