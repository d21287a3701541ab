//===- BenchCommon.cpp - Shared pieces of qopt-bench and qopt-main --------===//
#include "BenchCommon.h"

#include "qopt/reference/Codebook.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <dlfcn.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>

namespace qopt::bench {

void checkCu(cu::CUresult r, const char *what) {
  if (r != cu::CUDA_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: " + cu::describe(r));
}

void checkQ(qopt_status s, const char *what) {
  if (s != QOPT_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed (" + qopt_status_string(s) +
                             "): " + qopt_last_error());
}

namespace {
template <typename Fn>
void resolveOne(void *h, Fn &slot, std::initializer_list<const char *> names,
                std::string &missing) {
  for (const char *n : names)
    if (void *sym = dlsym(h, n)) {
      slot = reinterpret_cast<Fn>(sym);
      return;
    }
  missing += (missing.empty() ? "" : ", ") + std::string(*names.begin());
}

DriverExtra loadExtra(std::string &error) {
  DriverExtra e;
  (void)cu::driver(); // the shim's load (and cuInit) first
  const char *env = std::getenv("QOPT_CUDA_LIBRARY");
  std::string lib = env && *env ? env : "libcuda.so.1";
  void *h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    error = "dlopen " + lib + " failed";
    return e;
  }
  std::string missing;
  // CUDA 12.8+ headers map cuEventElapsedTime to _v2 (same signature).
  resolveOne(h, e.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}, missing);
  resolveOne(h, e.cuMemcpyDtoD, {"cuMemcpyDtoD_v2"}, missing);
  resolveOne(h, e.cuMemcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing);
  resolveOne(h, e.cuMemsetD16, {"cuMemsetD16_v2"}, missing);
  resolveOne(h, e.cuFuncGetAttribute, {"cuFuncGetAttribute"}, missing);
  resolveOne(h, e.cuOccupancyMaxActiveBlocksPerMultiprocessor,
             {"cuOccupancyMaxActiveBlocksPerMultiprocessor"}, missing);
  resolveOne(h, e.cuDeviceTotalMem, {"cuDeviceTotalMem_v2"}, missing);
  if (!missing.empty())
    error = lib + " lacks " + missing;
  return e;
}
} // namespace

const DriverExtra &extra() {
  static std::string error;
  static const DriverExtra e = loadExtra(error);
  if (!error.empty())
    throw std::runtime_error("CUDA driver entry points for the bench: " + error);
  return e;
}

DeviceMem::DeviceMem(size_t n) : bytes(n) {
  BCU(cu::driver().cuMemAlloc(&ptr, std::max<size_t>(n, 256)));
}
DeviceMem &DeviceMem::operator=(DeviceMem &&o) noexcept {
  if (this != &o) {
    reset();
    ptr = o.ptr;
    bytes = o.bytes;
    o.ptr = 0;
    o.bytes = 0;
  }
  return *this;
}
DeviceMem::~DeviceMem() { reset(); }
void DeviceMem::reset() {
  if (ptr)
    (void)cu::driver().cuMemFree(ptr);
  ptr = 0;
  bytes = 0;
}

std::string gpuUnavailableReason() {
  int32_t n = 0;
  if (qopt_cuda_device_count(&n) != QOPT_SUCCESS)
    return std::string("no CUDA driver: ") + qopt_last_error();
  if (n == 0)
    return "the CUDA driver reports no device";
  return "";
}

DeviceSession::DeviceSession() {
  const cu::Driver &d = cu::driver();
  BCU(d.cuDeviceGet(&dev, 0));
  BCU(d.cuDevicePrimaryCtxRetain(&primary, dev));
  BCU(d.cuCtxPushCurrent(primary));
  char buf[256] = {0};
  BCU(d.cuDeviceGetName(buf, sizeof buf, dev));
  name = buf;
  auto attr = [&](int a) {
    int v = 0;
    BCU(d.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  ccMajor = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  ccMinor = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  sms = attr(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  l2Bytes = attr(kAttrL2CacheSize);
  smClockKHz = attr(kAttrClockRate);
  memClockKHz = attr(kAttrMemoryClockRate);
  busWidthBits = attr(kAttrGlobalMemoryBusWidth);
  maxThreadsPerSM = attr(kAttrMaxThreadsPerSM);
  maxRegsPerSM = attr(kAttrMaxRegistersPerSM);
  driverVersion = d.version;
  BCU(extra().cuDeviceTotalMem(&totalMem, dev));
}

DeviceSession::~DeviceSession() {
  cu::CUcontext popped = nullptr;
  (void)cu::driver().cuCtxPopCurrent(&popped);
  (void)cu::driver().cuDevicePrimaryCtxRelease(dev);
}

double DeviceSession::theoreticalGBps() const {
  return 2.0 * double(memClockKHz) * 1e3 * double(busWidthBits) / 8.0 / 1e9;
}

Stats stats(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  double sum = 0;
  for (double x : v)
    sum += x;
  s.mean = sum / double(v.size());
  return s;
}

CopyRoof measureCopyRoof(cu::CUstream stream, size_t bytes, int iters, int warmup) {
  const cu::Driver &d = cu::driver();
  DeviceMem src(bytes), dst(bytes);
  BCU(d.cuMemsetD32(src.ptr, 0x3f800000u, bytes / 4));
  BCU(d.cuMemsetD32(dst.ptr, 0, bytes / 4));
  BCU(d.cuCtxSynchronize());
  for (int i = 0; i < warmup; ++i)
    BCU(extra().cuMemcpyDtoDAsync(dst.ptr, src.ptr, bytes, stream));
  std::vector<cu::CUevent> ev(2 * iters);
  for (auto &e : ev)
    BCU(d.cuEventCreate(&e, 0));
  for (int i = 0; i < iters; ++i) {
    BCU(d.cuEventRecord(ev[2 * i], stream));
    BCU(extra().cuMemcpyDtoDAsync(dst.ptr, src.ptr, bytes, stream));
    BCU(d.cuEventRecord(ev[2 * i + 1], stream));
  }
  BCU(d.cuStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    float t = 0;
    BCU(extra().cuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms.push_back(t);
  }
  for (auto &e : ev)
    (void)d.cuEventDestroy(e);
  CopyRoof r;
  r.bytes = bytes;
  r.iters = iters;
  r.ms = stats(ms).median;
  r.gbps = 2.0 * double(bytes) / (r.ms * 1e-3) / 1e9;
  return r;
}

static bool fileExists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string resolveKernelDir(const std::string &base, const std::string &stem) {
  for (const char *sub : {"/fatbin", "/ptx", ""}) {
    std::string dir = base + sub;
    if (fileExists(dir + "/" + stem + ".manifest.json"))
      return dir;
  }
  return "";
}

int64_t NamedShape::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<NamedShape> gpt2Shapes() {
  std::vector<NamedShape> v;
  v.push_back({"wte", {50257, 768}});
  v.push_back({"wpe", {1024, 768}});
  for (int i = 0; i < 12; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    v.push_back({h + "ln_1.weight", {768}});
    v.push_back({h + "ln_1.bias", {768}});
    v.push_back({h + "attn.c_attn.weight", {768, 2304}});
    v.push_back({h + "attn.c_attn.bias", {2304}});
    v.push_back({h + "attn.c_proj.weight", {768, 768}});
    v.push_back({h + "attn.c_proj.bias", {768}});
    v.push_back({h + "ln_2.weight", {768}});
    v.push_back({h + "ln_2.bias", {768}});
    v.push_back({h + "mlp.c_fc.weight", {768, 3072}});
    v.push_back({h + "mlp.c_fc.bias", {3072}});
    v.push_back({h + "mlp.c_proj.weight", {3072, 768}});
    v.push_back({h + "mlp.c_proj.bias", {768}});
  }
  v.push_back({"ln_f.weight", {768}});
  v.push_back({"ln_f.bias", {768}});
  return v;
}

int64_t StreamDesc::count(int64_t numel) const {
  return per == QOPT_PER_ELEMENT ? numel : (numel + perSize - 1) / perSize;
}

Spec::Spec(const std::string &manifestPath) : path(manifestPath) {
  size_t slash = path.find_last_of('/');
  dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  stem = file.substr(0, file.find(".manifest.json"));
  BQ(qopt_manifest_load(path.c_str(), &manifest));
  BQ(qopt_manifest_get_info(manifest, &info));
  for (size_t i = 0; i < info.num_streams; ++i) {
    qopt_stream_info s{};
    BQ(qopt_manifest_get_stream(manifest, i, &s));
    StreamDesc d;
    d.name = s.name;
    d.role = s.role;
    d.dtype = s.dtype;
    BQ(qopt_dtype_size(s.dtype, &d.elementBytes));
    d.per = s.per;
    d.perSize = s.per_size;
    d.written = s.access == QOPT_ACCESS_READ_WRITE;
    streams.push_back(d);
  }
  for (size_t i = 0; i < info.num_tables; ++i) {
    qopt_table_info t{};
    BQ(qopt_manifest_get_table(manifest, i, &t));
    tables.push_back(t);
    tableStates.push_back(t.state ? t.state : "");
  }
  // The launch argument order and the binaries: straight from the JSON.
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  if (j.contains("args"))
    for (const auto &a : j["args"])
      args.push_back(a.get<std::string>());
  if (j.contains("phases")) {
    for (const auto &p : j["phases"]) {
      Phase phase;
      phase.name = p["name"].get<std::string>();
      phase.entry = p["entry"].get<std::string>();
      phase.overTensors = p["grid"].get<std::string>() == "tensors";
      phase.one = p["grid"].get<std::string>() == "one";
      phase.threadsPerBlock = p["threads_per_block"].get<int>();
      for (const auto &a : p["args"])
        phase.args.push_back(a.get<std::string>());
      phases.push_back(std::move(phase));
    }
    const auto &w = j["reduction_workspace"];
    partialBytesPerTile = w["partial_bytes_per_tile"].get<int64_t>();
    valueBytesPerTensor = w["value_bytes_per_tensor"].get<int64_t>();
    stepPartialBytesPerTensor = w.value("step_partial_bytes_per_tensor", int64_t(0));
  }
  if (args.empty()) {
    args = {"descriptors", "tile_map", "num_tiles", "uniforms"};
    for (const auto &t : tables)
      args.push_back(t.name);
  }
  // Prefer a fatbin (the driver picks the cubin for the device), then a cubin
  // for sm_90, then PTX.
  auto consider = [&](const std::string &format, const std::string &p) {
    static const std::vector<std::string> order = {"fatbin", "cubin", "ptx"};
    auto rank = [&](const std::string &f) {
      return std::find(order.begin(), order.end(), f) - order.begin();
    };
    if (binaryPath.empty() || rank(format) < rank(binaryFormat)) {
      binaryPath = p;
      binaryFormat = format;
    }
  };
  if (j.contains("binaries"))
    for (const auto &b : j["binaries"]) {
      std::string p = dir + "/" + b["path"].get<std::string>();
      if (fileExists(p))
        consider(b["format"].get<std::string>(), p);
    }
  for (const char *f : {"fatbin", "cubin", "ptx"}) {
    std::string p = dir + "/" + info.kernel + "." + f;
    if (fileExists(p))
      consider(f, p);
    p = dir + "/" + stem + "." + f;
    if (fileExists(p))
      consider(f, p);
  }
}

Spec::~Spec() { qopt_manifest_destroy(manifest); }

uint64_t Spec::bytesMoved(const std::vector<int64_t> &numels) const {
  uint64_t b = 0;
  for (int64_t n : numels)
    for (const StreamDesc &s : streams)
      b += uint64_t(s.count(n)) * s.elementBytes * (s.written ? 2 : 1);
  return b;
}

uint64_t Spec::footprint(const std::vector<int64_t> &numels) const {
  uint64_t b = 0;
  for (int64_t n : numels)
    for (const StreamDesc &s : streams)
      b += uint64_t(s.count(n)) * s.elementBytes;
  return b;
}

std::string Spec::streamSummary() const {
  std::string out;
  for (const StreamDesc &s : streams) {
    const char *dn = "?";
    qopt_dtype_name(s.dtype, &dn);
    out += (out.empty() ? "" : " ") + s.name + "(" + dn;
    if (s.per != QOPT_PER_ELEMENT)
      out += "/" + std::to_string(s.perSize);
    out += s.written ? ",rw)" : ",r)";
  }
  return out;
}

std::vector<std::vector<float>> codebookTables(const Spec &spec) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    // Seed 000: qmap1 (signed) for the first moment, qmap2 (unsigned) for the
    // second; a state named like a second moment gets the unsigned map.
    const std::string &st = spec.tableStates[i];
    bool isSigned = !(st == "v" || st == "exp_avg_sq" || st == "v2" || st == "nu");
    out.push_back(qopt::ref::createDynamicMap(isSigned));
  }
  return out;
}

void parallelFor(size_t n, const std::function<void(size_t)> &fn, unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<size_t>(threads, n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < n;) {
        if (failed)
          return;
        try {
          fn(i);
        } catch (...) {
          if (!failed.exchange(true))
            error = std::current_exception();
        }
      }
    });
  for (auto &th : pool)
    th.join();
  if (error)
    std::rethrow_exception(error);
}

static uint64_t splitmix(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  return splitmix(x);
}

Rng::Rng(uint64_t seed) {
  for (auto &w : s)
    w = splitmix(seed);
}

uint64_t Rng::next() {
  auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  uint64_t r = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

float Rng::normal() {
  double u1 = 1.0 - uniform(); // (0, 1]
  double u2 = uniform();
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

uint16_t toBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

uint16_t toF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return uint16_t(sign | 0x7e00u);
  if (a >= 0x477ff000u) // rounds to >= 65520: infinity
    return uint16_t(sign | 0x7c00u);
  if (a < 0x38800000u) { // below the smallest normal half: subnormal or zero
    float f;
    std::memcpy(&f, &a, 4);
    // f * 2^24 rounded to nearest even gives the subnormal's integer mantissa.
    float m = std::nearbyint(f * 16777216.0f);
    return uint16_t(sign | uint32_t(m));
  }
  uint32_t e = ((a >> 23) - 112) << 10;
  uint32_t m = a & 0x7fffffu;
  uint32_t h = e | (m >> 13);
  uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return uint16_t(sign | h);
}

std::string utcDate() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

std::string utcDateTime() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::vector<void *> Arena::voidPtrs() const {
  std::vector<void *> v(ptr.size());
  for (size_t i = 0; i < ptr.size(); ++i)
    v[i] = reinterpret_cast<void *>(static_cast<uintptr_t>(ptr[i]));
  return v;
}

Arena allocateArena(const Spec &spec, const std::vector<int64_t> &numels) {
  Arena a;
  a.numStreams = spec.streams.size();
  std::vector<uint64_t> offsets;
  uint64_t off = 0;
  for (int64_t n : numels)
    for (const StreamDesc &s : spec.streams) {
      uint64_t b = uint64_t(s.count(n)) * s.elementBytes;
      offsets.push_back(off);
      a.bytes.push_back(b);
      off += (b + 255) / 256 * 256;
    }
  a.mem = DeviceMem(std::max<uint64_t>(off, 256));
  for (uint64_t o : offsets)
    a.ptr.push_back(a.mem.ptr + o);
  return a;
}

std::vector<std::string> listManifests(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      const std::string suffix = ".manifest.json";
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
        out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace qopt::bench
