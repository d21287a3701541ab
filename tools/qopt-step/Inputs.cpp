//===- Inputs.cpp - qopt-step inputs --------------------------------------===//
#include "Inputs.h"

#include "Support.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

namespace qopt::step {

//===--- Codebook tables --------------------------------------------------===//

namespace {

/// bitsandbytes' create_dynamic_map(signed, 7, 8) in float32, exactly as the
/// C++ reference computes it (test/reference, createDynamicMap with its
/// default LinspaceModel: every torch.linspace element by the fused scalar
/// formula); the tool's test compares the two bit for bit.
std::vector<float> dynamicMap(bool isSigned) {
  const int maxExponentBits = 7, totalBits = 8;
  const int fractionBits = totalBits - 1;
  std::vector<double> data;
  auto linspace = [](float start, float end, int64_t steps) {
    std::vector<float> out(static_cast<size_t>(steps));
    if (steps == 1) {
      out[0] = start;
      return out;
    }
    const float step = (end - start) / static_cast<float>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      out[static_cast<size_t>(i)] =
          i < halfway ? std::fma(step, static_cast<float>(i), start)
                      : std::fma(-step, static_cast<float>(steps - 1 - i), end);
    return out;
  };
  auto addLevel = [&](int64_t items, int level) {
    const std::vector<float> edges = linspace(0.1f, 1.0f, items + 1);
    const int e10 = level - (maxExponentBits - 1);
    const float scale = static_cast<float>(std::pow(10.0, static_cast<double>(e10)));
    for (int64_t k = 0; k < items; ++k) {
      const float mean = (edges[static_cast<size_t>(k)] + edges[static_cast<size_t>(k + 1)]) / 2.0f;
      data.push_back(static_cast<double>(scale * mean));
      if (isSigned)
        data.push_back(static_cast<double>((-scale) * mean));
    }
  };
  for (int level = 0; level < maxExponentBits; ++level)
    addLevel(int64_t{1} << (level + fractionBits - maxExponentBits + (isSigned ? 0 : 1)), level);
  // extra = 2^(F - E) - 1 = 0 for 7 exponent bits of 8.
  data.push_back(0.0);
  data.push_back(1.0);
  data.resize(256, 0.0);
  std::sort(data.begin(), data.end());
  return std::vector<float>(data.begin(), data.end());
}


std::vector<float> tableFromTensor(const st::Tensor &t, const std::string &what) {
  if (t.dtype != "F32")
    fail(what, ": dtype ", t.dtype, ", a codebook table is 256 F32 values");
  if (t.numel() != 256)
    fail(what, ": ", t.numel(), " elements (shape ", shapeString(t.shape),
         "), a codebook table is 256 F32 values");
  std::vector<float> v(256);
  std::memcpy(v.data(), t.data.data(), 256 * sizeof(float));
  return v;
}

} // namespace

/// --table NAME=SRC.
std::vector<float> loadTableSource(const std::string &name, const std::string &src) {
  if (src == "dynamic-signed")
    return dynamicMap(true);
  if (src == "dynamic-unsigned")
    return dynamicMap(false);
  std::string file = src, tensor;
  struct stat s;
  if (::stat(src.c_str(), &s) != 0) {
    size_t colon = src.find_last_of(':');
    if (colon != std::string::npos && colon > 0) {
      file = src.substr(0, colon);
      tensor = src.substr(colon + 1);
    }
  }
  st::File f;
  try {
    f = st::File::load(file);
  } catch (const st::Error &e) {
    fail("--table ", name, "=", src, ": ", e.what());
  }
  if (tensor.empty()) {
    std::vector<std::string> names = f.names();
    if (f.has(name))
      tensor = name;
    else if (names.size() == 1)
      tensor = names[0];
    else
      fail("--table ", name, "=", src, ": '", file, "' has ", names.size(),
           " tensors and none named '", name, "'; say which with ", file,
           ":TENSOR");
  }
  if (!f.has(tensor))
    fail("--table ", name, "=", src, ": '", file, "' has no tensor '", tensor,
         "'");
  return tableFromTensor(f.get(tensor),
                         cat("--table ", name, "=", src, ": tensor '", tensor, "'"));
}

namespace {

/// Throws unless `src` has the stream's dtype and `count` elements.
void checkStream(const KernelInfo &k, size_t j, const Source &src, int64_t count,
                 const Tensor &t) {
  const qopt_stream_info &s = k.streams[j];
  const std::string want = stDtype(s.dtype);
  if (src.tensor->dtype != want)
    fail(src.where(), ": dtype ", src.tensor->dtype, ", but stream '", s.name,
         "' of kernel ", k.info.kernel, " is ", abiName(s.dtype), " (safetensors ",
         want, ")");
  if (src.tensor->numel() != count)
    fail(src.where(), ": ", src.tensor->numel(), " elements (shape ",
         shapeString(src.tensor->shape), "), but stream '", s.name, "' has ",
         perText(s), " of the parameter '", t.name, "/", k.paramName, "' (",
         t.numel, " elements, shape ", shapeString(t.shape), "), so ", count);
}

} // namespace

Inputs readInputs(const Options &o, const KernelInfo &k) {
  Inputs in;
  in.files.reserve(o.inputs.size());
  for (const std::string &path : o.inputs) {
    try {
      in.files.push_back(st::File::load(path));
    } catch (const st::Error &e) {
      fail(e.what());
    }
  }
  std::map<std::string, std::string> seen; // name -> file
  std::vector<std::string> streamNames = k.streamNames();
  for (size_t f = 0; f < in.files.size(); ++f) {
    const st::File &file = in.files[f];
    for (const std::string &name : file.names()) {
      Source src{&file.get(name), o.inputs[f], name};
      auto [it, fresh] = seen.emplace(name, o.inputs[f]);
      if (!fresh)
        fail("tensor '", name, "' is in two inputs: ", it->second, " and ",
             o.inputs[f]);
      size_t slash = name.find_last_of('/');
      if (slash == std::string::npos) {
        bool isTable = false;
        for (const qopt_table_info &ti : k.tables)
          isTable = isTable || name == ti.name;
        if (!isTable)
          fail(src.where(), ": not named <tensor>/<stream>",
               k.tables.empty()
                   ? " (and kernel " + std::string(k.info.kernel) +
                         " takes no codebook tables)"
                   : " nor a table of kernel " + std::string(k.info.kernel) + " (" +
                         join(k.tableNames()) + ")");
        in.tables.emplace(name, src);
        continue;
      }
      std::string group = name.substr(0, slash), stream = name.substr(slash + 1);
      if (group.empty())
        fail(src.where(), ": empty tensor name before '/'");
      Group &g = in.groups[group];
      g.name = group;
      if (g.streams.empty())
        g.streams.resize(k.streams.size());
      if (!g.any)
        g.any = src;
      auto it2 = std::find(streamNames.begin(), streamNames.end(), stream);
      if (it2 != streamNames.end()) {
        g.streams[static_cast<size_t>(it2 - streamNames.begin())] = src;
        continue;
      }
      const std::string gradPrefix = k.gradName + "@";
      if (stream.rfind(gradPrefix, 0) == 0) {
        std::string stepText = stream.substr(gradPrefix.size());
        char *end = nullptr;
        errno = 0;
        long long step = std::strtoll(stepText.c_str(), &end, 10);
        // One name per step: the step in decimal without leading zeros
        // (g@1 and g@01 would both be step 1, the later taking its place).
        if (stepText.empty() || *end || errno == ERANGE || step < 1 ||
            !std::isdigit(static_cast<unsigned char>(stepText[0])) ||
            stepText[0] == '0')
          fail(src.where(), ": '", stream, "' is not ", gradPrefix,
               "<step> with a step >= 1 written without leading zeros");
        g.gradAt[step] = src;
        continue;
      }
      fail(src.where(), ": kernel ", k.info.kernel, " has no stream '", stream,
           "' (its streams: ", join(streamNames), "; a gradient of one step: ",
           gradPrefix, "<step>)");
    }
  }
  if (in.groups.empty())
    fail("the inputs (", join(o.inputs), ") have no tensor named <tensor>/",
         k.paramName);
  return in;
}

/// Every table the kernel takes, from --table or the inputs.
std::vector<Table> resolveTables(const Options &o, const KernelInfo &k,
                                 const Inputs &in) {
  std::map<std::string, std::string> given;
  for (const auto &[name, src] : o.tables) {
    bool known = false;
    for (const qopt_table_info &t : k.tables)
      known = known || name == t.name;
    if (!known)
      fail("--table ", name, "=", src, ": kernel ", k.info.kernel,
           k.tables.empty() ? std::string(" takes no tables")
                            : " has no table '" + name + "' (its tables: " +
                                  join(k.tableNames()) + ")");
    if (!given.emplace(name, src).second)
      fail("--table ", name, " given twice");
  }
  std::vector<Table> tables;
  for (const qopt_table_info &t : k.tables) {
    Table table;
    table.name = t.name;
    auto g = given.find(t.name);
    if (g != given.end()) {
      table.values = loadTableSource(t.name, g->second);
      table.from = "--table " + table.name + "=" + g->second;
    } else if (auto it = in.tables.find(t.name); it != in.tables.end()) {
      table.values = tableFromTensor(*it->second.tensor, it->second.where());
      table.from = it->second.where();
    } else {
      fail("kernel ", k.info.kernel, " needs the codebook table '", t.name,
           "' (256 F32 values): give --table ", t.name,
           "=dynamic-signed|dynamic-unsigned|FILE[:TENSOR], or a tensor '",
           t.name, "' in an --in file");
    }
    uint8_t zero = 0;
    if (qopt_codebook_zero_code(table.values.data(), &zero) != QOPT_SUCCESS)
      fail(table.from, ": not a usable codebook table: ", qopt_last_error());
    tables.push_back(std::move(table));
  }
  return tables;
}

namespace {

/// Fills `out` with `count` elements of `bits` (little-endian, `size` bytes).
std::vector<uint8_t> fillBytes(int64_t count, size_t size, uint64_t bits) {
  std::vector<uint8_t> out(static_cast<size_t>(count) * size);
  for (size_t i = 0; i < out.size(); i += size)
    for (size_t b = 0; b < size; ++b)
      out[i + b] = static_cast<uint8_t>((bits >> (8 * b)) & 0xff);
  return out;
}

} // namespace

/// The initial bytes of stream `j` (a state or the error bits) per the
/// runtime's state layout. Error bits start at 0: the master is the 16-bit
/// parameter as given.
std::vector<uint8_t> initialBytes(const qopt_buffer_layout &l) {
  size_t size = dtypeBytes(l.dtype);
  switch (l.init) {
  case QOPT_INIT_FILL:
    return fillBytes(l.count, size, l.fill_bits);
  case QOPT_INIT_FROM_MASTER:
    return std::vector<uint8_t>(static_cast<size_t>(l.count) * size, 0);
  default:
    fail("internal error: stream '", l.name, "' has no initial value (init kind ",
         static_cast<int>(l.init), ")");
  }
}

std::vector<Tensor> buildTensors(const Options &o, const KernelInfo &k,
                                 const Inputs &in, const std::vector<Table> &tables) {
  std::vector<const float *> hostTables;
  for (const Table &t : tables)
    hostTables.push_back(t.values.data());
  const int64_t lastStep = o.stepStart + o.steps - 1;
  std::vector<Tensor> out;
  for (const auto &[name, g] : in.groups) {
    const std::optional<Source> &param = g.streams[k.paramIndex];
    if (!param)
      fail(g.any->where(), ": belongs to tensor '", name, "', which has no parameter '",
           name, "/", k.paramName, "' in the inputs");
    Tensor t;
    t.name = name;
    t.shape = param->tensor->shape;
    t.numel = param->tensor->numel();
    std::vector<qopt_buffer_layout> layout = k.manifest.stateLayout(t.numel, hostTables);
    t.streams.resize(k.streams.size());

    // Which state units (a state's streams, or the error bits) are missing.
    std::map<std::string, std::vector<size_t>> present, missing;
    for (size_t j = 0; j < k.streams.size(); ++j) {
      const qopt_stream_info &s = k.streams[j];
      Stream &stream = t.streams[j];
      if (s.role == QOPT_ROLE_GRAD)
        continue;
      if (const std::optional<Source> &src = g.streams[j]) {
        checkStream(k, j, *src, layout[j].count, t);
        stream.shape = src->tensor->shape;
        stream.src = src->tensor;
        if (s.role != QOPT_ROLE_PARAM)
          present[k.unitOf(j)].push_back(j);
      } else {
        missing[k.unitOf(j)].push_back(j);
      }
    }
    for (const auto &[unit, streams] : missing) {
      const qopt_stream_info &first = k.streams[streams[0]];
      if (!o.initMissingState)
        fail("missing tensor '", name, "/", first.name, "' (stream ", first.name,
             ", ", unit, " of kernel ", k.info.kernel, "): give it in an --in "
             "file, or pass --init-missing-state to start ", unit,
             " at the initial value");
      if (present.count(unit)) {
        const qopt_stream_info &have = k.streams[present[unit][0]];
        fail("tensor '", name, "': ", unit, " is partly given (",
             g.streams[present[unit][0]]->where(), ") and partly missing ('",
             name, "/", first.name, "'); give all of its streams or none (",
             have.name, " and ", first.name, " belong together)");
      }
      for (size_t j : streams) {
        Stream &stream = t.streams[j];
        stream.owned = initialBytes(layout[j]);
        stream.initialized = true;
        stream.shape = k.streams[j].per == QOPT_PER_ELEMENT
                           ? t.shape
                           : std::vector<int64_t>{layout[j].count};
      }
    }

    // Gradients: every one given is checked; each step needs one.
    const size_t gj = k.gradIndex;
    if (g.streams[gj])
      checkStream(k, gj, *g.streams[gj], layout[gj].count, t);
    for (const auto &[step, src] : g.gradAt)
      checkStream(k, gj, src, layout[gj].count, t);
    for (int64_t step = o.stepStart; step <= lastStep; ++step) {
      auto it = g.gradAt.find(step);
      if (it != g.gradAt.end())
        t.gradFor[step] = &it->second;
      else if (g.streams[gj])
        t.gradFor[step] = &*g.streams[gj];
      else
        fail("missing tensor '", name, "/", k.gradName, "' (the gradient of kernel ",
             k.info.kernel, ") for step ", step, ": give '", name, "/", k.gradName,
             "' (used at every step) or '", name, "/", k.gradName, "@", step, "'");
    }
    out.push_back(std::move(t));
  }
  return out;
}

/// The hyperparameters, checked against the manifest.
std::vector<qopt_hyper> resolveHypers(const Options &o, const KernelInfo &k,
                                      std::vector<std::string> &storage) {
  std::vector<std::string> names;
  for (const qopt_hyper_info &h : k.hypers)
    names.push_back(h.name);
  std::vector<qopt_hyper> out;
  std::set<std::string> given;
  storage.reserve(o.hypers.size());
  for (const auto &[name, text] : o.hypers) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      usage("--hyper ", name, "=", text, ": kernel ", k.info.kernel,
           " has no hyperparameter '", name, "'",
           names.empty() ? std::string(" (it has none)")
                         : " (it has " + join(names) + ")");
    if (!given.insert(name).second)
      usage("--hyper ", name, " given twice");
    const qopt_hyper_info &h = k.hypers[static_cast<size_t>(it - names.begin())];
    double v = 0;
    if (text == "true" || text == "false") {
      if (!h.is_bool)
        usage("--hyper ", name, "=", text, ": '", name,
              "' is a number, not a flag");
      v = text == "true";
    } else {
      // Decimal numbers (and inf, nan): strtod alone would also take
      // hexadecimal (0x10 = 16).
      char *end = nullptr;
      bool hex = text.find("0x") != std::string::npos ||
                 text.find("0X") != std::string::npos;
      errno = 0;
      v = std::strtod(text.c_str(), &end);
      // strtod skips leading white space: " 1e-3" is refused as "1e-3 " is.
      if (text.empty() || *end || hex ||
          std::isspace(static_cast<unsigned char>(text[0])))
        usage("--hyper ", name, "=", text, ": '", text,
              "' is not a decimal number");
      // As the DSL refuses such literals: a number that overflows float64
      // is not inf (write inf for that), one that underflows is not 0.
      if (errno == ERANGE && std::isinf(v))
        usage("--hyper ", name, "=", text, ": '", text,
              "' is too large for float64");
      if (errno == ERANGE && v == 0)
        usage("--hyper ", name, "=", text, ": '", text,
              "' is too small for float64: it rounds to 0");
    }
    if (h.is_bool && v != 0 && v != 1)
      usage("--hyper ", name, "=", text, ": '", name,
            "' is a flag: true, false, 1 or 0");
    storage.push_back(name);
    out.push_back({storage.back().c_str(), v});
  }
  for (const qopt_hyper_info &h : k.hypers)
    if (!h.has_default && !given.count(h.name))
      usage("kernel ", k.info.kernel, " needs --hyper ", h.name,
            "=VALUE (its manifest gives no default)");
  return out;
}

/// Every step's uniforms, so that a NaN (e.g. lr=nan) stops the run before
/// anything is stepped. After the inputs are read and checked: with many
/// steps this takes a while, and a bad file is reported first.
void checkUniforms(const Options &o, const KernelInfo &k,
                   const std::vector<qopt_hyper> &hypers) {
  for (int64_t step = o.stepStart; step < o.stepStart + o.steps; ++step) {
    try {
      (void)k.manifest.evaluateUniforms(hypers, step);
    } catch (const qopt::Error &e) {
      fail("the hyperparameters at step ", step, ": ", e.what());
    }
  }
}

} // namespace qopt::step
