//===- Manifest.cpp - Parse and check kernel manifests --------------------===//
#include "Manifest.h"
#include "ManifestLaunch.h"
#include "ManifestPhases.h"
#include "ManifestReader.h"

#include "DType.h"
#include "Error.h"
#include "FileCheck.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace qopt::rt {

using json = nlohmann::json;

namespace {

/// How far a uniform expression may nest: twice the frontend's limit on an
/// expression tree (1024 levels), far below what exhausts a thread's stack.
constexpr unsigned kMaxExprDepth = 2048;


Expr parseExpr(const Reader &r, const json &j, const std::string &field,
               const Manifest &m, unsigned depth = 1) {
  // parseExpr, evaluate and toString recurse once per level.
  if (depth > kMaxExprDepth)
    r.error(field, cat("the expression nests deeper than ", kMaxExprDepth,
                       " levels"));
  Expr e;
  if (j.is_number() || j.is_boolean()) {
    e.kind = Expr::Kind::Literal;
    e.value = j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>();
    return e;
  }
  if (j.is_string()) {
    std::string name = j.get<std::string>();
    if (name == "step") {
      e.kind = Expr::Kind::Step;
      return e;
    }
    long h = m.findHyper(name);
    if (h < 0) {
      std::string known;
      for (const HyperDesc &hd : m.hypers)
        known += (known.empty() ? "" : ", ") + hd.name;
      r.error(field, cat("unknown name \"", name,
                         "\" (expected \"step\" or a hyperparameter: ",
                         known.empty() ? "none declared" : known, ")"));
    }
    e.kind = Expr::Kind::Hyper;
    e.hyper = static_cast<size_t>(h);
    return e;
  }
  if (!j.is_array())
    r.error(field, cat("expected a number, a name or [op, operands...], got ",
                       j.type_name()));
  if (j.empty() || !j[0].is_string())
    r.error(field, "an operation must start with its name, e.g. [\"add\", 1, 2]");
  std::string name = j[0].get<std::string>();
  const OpInfo *info = findOp(name);
  if (!info)
    r.error(Reader::index(field, 0),
            cat("unknown op \"", name, "\" (expected one of: ", opNames(), ")"));
  int arity = static_cast<int>(j.size()) - 1;
  if (arity < info->minArity ||
      (info->maxArity >= 0 && arity > info->maxArity)) {
    std::string want =
        info->maxArity < 0
            ? cat("at least ", info->minArity)
            : cat(info->minArity);
    r.error(field, cat("op \"", name, "\" takes ", want, " operand",
                       info->minArity == 1 && info->maxArity == 1 ? "" : "s",
                       ", got ", arity));
  }
  e.kind = Expr::Kind::Op;
  e.op = info->op;
  for (size_t i = 1; i < j.size(); ++i)
    e.operands.push_back(
        parseExpr(r, j[i], Reader::index(field, i), m, depth + 1));
  return e;
}

std::string dirName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string resolvePath(const std::string &base, const std::string &path) {
  if (path.empty() || path[0] == '/')
    return path;
  // A manifest in the current directory: "./" keeps dlopen from searching
  // the library path for a bare name.
  if (base.empty())
    return path.find('/') == std::string::npos ? "./" + path : path;
  return base + "/" + path;
}

/// Checks an architecture name: "sm_<digits>" with an optional 'a' or 'f'.
bool validArch(const std::string &arch) {
  if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0)
    return false;
  size_t i = 3;
  while (i < arch.size() && std::isdigit(static_cast<unsigned char>(arch[i])))
    ++i;
  if (i == 3)
    return false;
  if (i == arch.size())
    return true;
  return i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f');
}

/// The streams that param, grad and states imply, in ABI order.
std::vector<StreamDesc> expectedStreams(const Manifest &m) {
  std::vector<StreamDesc> out;
  auto add = [&](std::string name, std::string state, qopt_stream_role role,
                 qopt_dtype dtype, qopt_stream_per per, int64_t perSize,
                 qopt_access access) {
    out.push_back({std::move(name), std::move(state), role, dtype, per,
                   perSize, access});
  };
  add(m.paramName, "", QOPT_ROLE_PARAM, m.paramDtype, QOPT_PER_ELEMENT, 1,
      QOPT_ACCESS_READ_WRITE);
  if (m.eccDtype != QOPT_DTYPE_INVALID)
    add(m.paramName + (m.kahan ? ".kahan" : ".ecc"), "", QOPT_ROLE_ERROR_BITS,
        m.eccDtype,
        QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE);
  add(m.gradName, "", QOPT_ROLE_GRAD, m.gradDtype, QOPT_PER_ELEMENT, 1,
      QOPT_ACCESS_READ);
  for (const StateDesc &s : m.states) {
    switch (s.scheme) {
    case StateDesc::Scheme::Plain:
      add(s.name, s.name, QOPT_ROLE_STATE, s.dtype, QOPT_PER_ELEMENT, 1,
          QOPT_ACCESS_READ_WRITE);
      break;
    case StateDesc::Scheme::Group:
      // 4-bit codes: a uint8 byte per two elements (docs/abi.md).
      if (s.bits == 4)
        add(s.name + ".codes", s.name, QOPT_ROLE_STATE_CODES, QOPT_DTYPE_UINT8,
            QOPT_PER_GROUP, 2, QOPT_ACCESS_READ_WRITE);
      else
        add(s.name + ".codes", s.name, QOPT_ROLE_STATE_CODES, s.dtype,
            QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE);
      add(s.name + ".scales", s.name, QOPT_ROLE_STATE_SCALES, s.scaleDtype,
          QOPT_PER_GROUP, s.group, QOPT_ACCESS_READ_WRITE);
      break;
    case StateDesc::Scheme::Codebook:
      add(s.name + ".codes", s.name, QOPT_ROLE_STATE_CODES, s.dtype,
          QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE);
      add(s.name + ".absmax", s.name, QOPT_ROLE_STATE_ABSMAX, QOPT_DTYPE_F32,
          QOPT_PER_BLOCK, s.block, QOPT_ACCESS_READ_WRITE);
      break;
    }
  }
  return out;
}

qopt_stream_role parseRole(const Reader &r, const std::string &s,
                           const std::string &field) {
  for (qopt_stream_role role :
       {QOPT_ROLE_PARAM, QOPT_ROLE_ERROR_BITS, QOPT_ROLE_GRAD, QOPT_ROLE_STATE,
        QOPT_ROLE_STATE_CODES, QOPT_ROLE_STATE_SCALES, QOPT_ROLE_STATE_ABSMAX})
    if (s == roleName(role))
      return role;
  r.error(field, cat("unknown role \"", s,
                     "\" (expected param, error_bits, grad, state, "
                     "state_codes, state_scales or state_absmax)"));
}

void parseStreams(const Reader &r, const json &root, Manifest &m) {
  const json *j = r.member(root, "", "streams", true);
  r.expectArray(*j, "streams");
  for (size_t i = 0; i < j->size(); ++i) {
    std::string path = Reader::index("streams", i);
    const json &s = (*j)[i];
    r.expectObject(s, path);
    StreamDesc d;
    d.name = r.string(s, path, "name", true);
    d.role = parseRole(r, r.string(s, path, "role", true),
                       Reader::join(path, "role"));
    d.dtype = r.dtype(s, path, "dtype", true,
                      {QOPT_DTYPE_F32, QOPT_DTYPE_BF16, QOPT_DTYPE_F16,
                       QOPT_DTYPE_INT8, QOPT_DTYPE_UINT8, QOPT_DTYPE_INT16},
                      "a stream");
    std::string per = r.string(s, path, "per", false, "element");
    if (per == "element") {
      d.per = QOPT_PER_ELEMENT;
    } else if (per == "group" || per == "block") {
      // "group" and "block" both mean ceil(numel / size) entries; the size
      // may be under either key (qopt-opt writes "group" for both).
      d.per = per == "group" ? QOPT_PER_GROUP : QOPT_PER_BLOCK;
      const char *key = per == "group" ? "group" : "block";
      const char *other = per == "group" ? "block" : "group";
      if (!s.contains(key) && s.contains(other))
        key = other;
      d.perSize = r.integer(s, path, key, true, 0, 1, INT64_MAX);
    } else {
      r.error(Reader::join(path, "per"),
              cat("unknown value \"", per,
                  "\" (expected element, group or block)"));
    }
    std::string access = r.string(s, path, "access", true);
    if (access == "read")
      d.access = QOPT_ACCESS_READ;
    else if (access == "read_write")
      d.access = QOPT_ACCESS_READ_WRITE;
    else
      r.error(Reader::join(path, "access"),
              cat("unknown value \"", access, "\" (expected read or read_write)"));
    d.state = r.string(s, path, "state", false, "", true);
    m.streams.push_back(std::move(d));
  }
  if (m.streams.empty())
    r.error("streams", "must list at least the param and grad streams");
  for (size_t i = 0; i < m.streams.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      if (m.streams[i].name == m.streams[k].name)
        r.error(cat("streams[", i, "].name"),
                cat("\"", m.streams[i].name, "\" repeats streams[", k, "]"));
}

/// Checks the stream list against what param, grad and states imply.
void checkStreams(const Reader &r, Manifest &m) {
  std::vector<StreamDesc> want = expectedStreams(m);
  auto names = [](const std::vector<StreamDesc> &v) {
    std::string s;
    for (const StreamDesc &d : v)
      s += (s.empty() ? "" : ", ") + d.name;
    return s;
  };
  size_t n = std::min(want.size(), m.streams.size());
  for (size_t i = 0; i < n; ++i) {
    StreamDesc &got = m.streams[i];
    const StreamDesc &w = want[i];
    std::string path = Reader::index("streams", i);
    if (got.name != w.name)
      r.error(Reader::join(path, "name"),
              cat("\"", got.name, "\" where the ABI order (param, grad, states) "
                  "puts \"", w.name, "\"; expected streams: ", names(want)));
    if (got.role != w.role)
      r.error(Reader::join(path, "role"),
              cat("\"", roleName(got.role), "\" but stream \"", w.name,
                  "\" has role \"", roleName(w.role), "\""));
    if (got.dtype != w.dtype)
      r.error(Reader::join(path, "dtype"),
              cat("\"", dtypeName(got.dtype), "\" but its declaration gives \"",
                  dtypeName(w.dtype), "\""));
    auto perClass = [](qopt_stream_per p) {
      return p == QOPT_PER_ELEMENT ? 0 : 1; // group and block count alike
    };
    if (perClass(got.per) != perClass(w.per) || got.perSize != w.perSize) {
      r.error(Reader::join(path, "per"),
              cat("\"", perName(got.per), "\"",
                  got.per == QOPT_PER_ELEMENT ? "" : cat(" ", got.perSize),
                  " but its declaration gives \"", perName(w.per), "\"",
                  w.per == QOPT_PER_ELEMENT ? "" : cat(" ", w.perSize)));
    }
    if (got.access != w.access)
      r.error(Reader::join(path, "access"),
              cat("\"", got.access == QOPT_ACCESS_READ ? "read" : "read_write",
                  "\" but a ", roleName(w.role), " stream is ",
                  w.access == QOPT_ACCESS_READ ? "read" : "read_write"));
    if (!got.state.empty() && got.state != w.state)
      r.error(Reader::join(path, "state"),
              cat("\"", got.state, "\" but the stream belongs to \"", w.state,
                  "\""));
    got.state = w.state;
    got.per = w.per; // the declaration's name for it: group or block
  }
  if (want.size() != m.streams.size())
    r.error("streams", cat(m.streams.size(), " entries but param, grad and "
                           "states describe ", want.size(), ": ", names(want)));
}

void parseStates(const Reader &r, const json &root, Manifest &m) {
  const json *j = r.member(root, "", "states", false);
  if (!j)
    return;
  r.expectArray(*j, "states");
  for (size_t i = 0; i < j->size(); ++i) {
    std::string path = Reader::index("states", i);
    const json &s = (*j)[i];
    r.expectObject(s, path);
    StateDesc d;
    d.name = r.string(s, path, "name", true);
    for (const StateDesc &o : m.states)
      if (o.name == d.name)
        r.error(Reader::join(path, "name"), cat("\"", d.name, "\" repeats"));
    if (d.name == m.paramName || d.name == m.gradName)
      r.error(Reader::join(path, "name"),
              cat("\"", d.name, "\" is the param's or grad's name"));
    std::string scheme = r.string(s, path, "scheme", true);
    int64_t tile = m.launch.tile_elements;
    if (scheme == "plain") {
      d.scheme = StateDesc::Scheme::Plain;
      d.dtype = r.dtype(s, path, "dtype", true,
                        {QOPT_DTYPE_F32, QOPT_DTYPE_BF16, QOPT_DTYPE_F16},
                        "a plain state");
    } else if (scheme == "group") {
      d.scheme = StateDesc::Scheme::Group;
      d.dtype = r.dtype(s, path, "storage", true,
                        {QOPT_DTYPE_INT8, QOPT_DTYPE_UINT8}, "group codes");
      d.group = r.integer(s, path, "group", true, 0, 1, INT64_MAX);
      d.bits = static_cast<int>(r.integer(s, path, "bits", false, 8, 4, 8));
      if (d.bits != 4 && d.bits != 8)
        r.error(Reader::join(path, "bits"),
                cat(d.bits, " (expected 8, or 4: two codes a byte)"));
      d.scaleDtype = r.dtype(s, path, "scale_dtype", false,
                             {QOPT_DTYPE_F16, QOPT_DTYPE_F32}, "group scales",
                             QOPT_DTYPE_F16);
      if (tile % d.group != 0)
        r.error(Reader::join(path, "group"),
                cat(d.group, " does not divide launch.tile_elements (", tile,
                    "): groups would straddle tiles"));
    } else if (scheme == "codebook") {
      d.scheme = StateDesc::Scheme::Codebook;
      d.dtype = r.dtype(s, path, "storage", false, {QOPT_DTYPE_UINT8},
                        "codebook codes", QOPT_DTYPE_UINT8);
      d.block = r.integer(s, path, "block", true, 0, 1, INT64_MAX);
      if (tile % d.block != 0)
        r.error(Reader::join(path, "block"),
                cat(d.block, " does not divide launch.tile_elements (", tile,
                    "): blocks would straddle tiles"));
    } else {
      r.error(Reader::join(path, "scheme"),
              cat("unknown scheme \"", scheme,
                  "\" (expected plain, group or codebook)"));
    }
    if (d.scheme != StateDesc::Scheme::Plain) {
      std::string overflow = r.string(s, path, "overflow", false, "ieee");
      if (overflow != "saturate" && overflow != "ieee")
        r.error(Reader::join(path, "overflow"),
                cat("unknown overflow policy \"", overflow,
                    "\" (expected saturate or ieee)"));
      d.saturates = overflow == "saturate";
    }
    m.states.push_back(std::move(d));
  }
}

void parseTables(const Reader &r, const json &root, Manifest &m) {
  std::vector<size_t> codebooks;
  for (size_t i = 0; i < m.states.size(); ++i)
    if (m.states[i].scheme == StateDesc::Scheme::Codebook)
      codebooks.push_back(i);
  const json *j = r.member(root, "", "tables", false);
  if (!j) {
    // Default: one "<state>.qmap" per codebook state, in state order.
    for (size_t s : codebooks) {
      m.states[s].table = m.tables.size();
      m.tables.push_back({m.states[s].name + ".qmap", m.states[s].name,
                          QOPT_DTYPE_F32, 256});
    }
    return;
  }
  r.expectArray(*j, "tables");
  for (size_t i = 0; i < j->size(); ++i) {
    std::string path = Reader::index("tables", i);
    const json &t = (*j)[i];
    r.expectObject(t, path);
    TableDesc d;
    d.name = r.string(t, path, "name", true);
    d.dtype = r.dtype(t, path, "dtype", false, {QOPT_DTYPE_F32}, "a table",
                      QOPT_DTYPE_F32);
    d.count = r.integer(t, path, "count", false, 256, 256, 256);
    std::string derived = d.name.substr(0, d.name.find_last_of('.'));
    d.state = r.string(t, path, "state", false, derived);
    auto st = std::find_if(m.states.begin(), m.states.end(),
                           [&](const StateDesc &s) { return s.name == d.state; });
    if (st == m.states.end() || st->scheme != StateDesc::Scheme::Codebook)
      r.error(Reader::join(path, "state"),
              cat("\"", d.state, "\" is not a codebook state"));
    for (const TableDesc &o : m.tables)
      if (o.state == d.state)
        r.error(path, cat("second table for state \"", d.state, "\""));
    st->table = m.tables.size();
    m.tables.push_back(std::move(d));
  }
  for (size_t s : codebooks) {
    bool found = false;
    for (const TableDesc &t : m.tables)
      found |= t.state == m.states[s].name;
    if (!found)
      r.error("tables", cat("no table for codebook state \"", m.states[s].name,
                            "\" (states[", s, "])"));
  }
}

void parseArgs(const Reader &r, const json &root, Manifest &m) {
  // A kernel with tile claims takes the work counters, and one with a
  // saturating state the numerics counters, in that order, last
  // (docs/abi.md).
  const json *launch = r.member(root, "", "launch", false);
  bool claims = launch && launch->is_object() && launch->contains("tile_claims");
  bool numerics = std::any_of(m.states.begin(), m.states.end(),
                              [](const StateDesc &s) { return s.saturates; });
  // A GPU kernel with reductions lists its arguments; its step reads the
  // per-tensor values where it has per-tensor reductions.
  bool reductions = hasGpuPhases(root);
  bool values = reductions && m.numTensorReductions > 0;
  const json *j = r.member(root, "", "args", false);
  if (!j) {
    if (reductions)
      r.error("args", "missing: a kernel with phases lists its arguments");
    m.args = {{ArgDesc::Kind::Descriptors, 0},
              {ArgDesc::Kind::TileMap, 0},
              {ArgDesc::Kind::NumTiles, 0},
              {ArgDesc::Kind::Uniforms, 0}};
    for (size_t t = 0; t < m.tables.size(); ++t)
      m.args.push_back({ArgDesc::Kind::Table, t});
    if (claims)
      m.args.push_back({ArgDesc::Kind::WorkCounters, 0});
    if (numerics)
      m.args.push_back({ArgDesc::Kind::NumericsCounters, 0});
    return;
  }
  r.expectArray(*j, "args");
  std::set<std::string> seen;
  for (size_t i = 0; i < j->size(); ++i) {
    std::string field = Reader::index("args", i);
    if (!(*j)[i].is_string())
      r.error(field, cat("expected a string, got ", (*j)[i].type_name()));
    std::string name = (*j)[i].get<std::string>();
    if (!seen.insert(name).second)
      r.error(field, cat("\"", name, "\" repeats"));
    ArgDesc a;
    if (!parseArgName(m, name, a) || a.kind == ArgDesc::Kind::NumTensors ||
        a.kind == ArgDesc::Kind::ReductionPartials ||
        a.kind == ArgDesc::Kind::StepPartials ||
        a.kind == ArgDesc::Kind::NumStepTensors ||
        (a.kind == ArgDesc::Kind::ReductionValues && !values))
      r.error(field, cat("unknown argument \"", name,
                         "\" (expected descriptors, tile_map, num_tiles, "
                         "uniforms, work_counters, numerics_counters",
                         values ? ", reduction_values" : "",
                         " or a table name)"));
    m.args.push_back(a);
  }
  std::vector<std::string> need = {"descriptors", "tile_map", "num_tiles",
                                   "uniforms"};
  if (claims)
    need.push_back("work_counters");
  if (numerics)
    need.push_back("numerics_counters");
  if (values)
    need.push_back("reduction_values");
  for (const TableDesc &t : m.tables)
    need.push_back(t.name);
  for (const std::string &n : need)
    if (!seen.count(n))
      r.error("args", cat("missing \"", n, "\""));
}

void parseUniforms(const Reader &r, const json &root, Manifest &m) {
  const json *j = r.member(root, "", "uniforms", false);
  if (!j)
    return;
  r.expectArray(*j, "uniforms");
  std::vector<std::optional<Expr>> slots(j->size());
  for (size_t i = 0; i < j->size(); ++i) {
    std::string path = Reader::index("uniforms", i);
    const json &u = (*j)[i];
    r.expectObject(u, path);
    int64_t index = r.integer(u, path, "index", false, static_cast<int64_t>(i),
                              0, static_cast<int64_t>(j->size()) - 1);
    if (slots[index])
      r.error(Reader::join(path, "index"), cat(index, " repeats"));
    const json *e = r.member(u, path, "expr", true);
    slots[index] = parseExpr(r, *e, Reader::join(path, "expr"), m);
  }
  for (auto &s : slots)
    m.uniforms.push_back(std::move(*s));
}

void parseBinaries(const Reader &r, const json &root, Manifest &m) {
  if (const json *j = r.member(root, "", "binaries", false)) {
    r.expectArray(*j, "binaries");
    m.binariesListed = true;
    for (size_t i = 0; i < j->size(); ++i) {
      std::string path = Reader::index("binaries", i);
      const json &b = (*j)[i];
      r.expectObject(b, path);
      BinaryDesc d;
      std::string format = r.string(b, path, "format", true);
      if (format == "ptx")
        d.format = QOPT_BINARY_PTX;
      else if (format == "cubin")
        d.format = QOPT_BINARY_CUBIN;
      else if (format == "fatbin")
        d.format = QOPT_BINARY_FATBIN;
      else
        r.error(Reader::join(path, "format"),
                cat("unknown format \"", format,
                    "\" (expected ptx, cubin or fatbin)"));
      d.arch = r.string(b, path, "arch", false, m.arch);
      if (!d.arch.empty() && !validArch(d.arch))
        r.error(Reader::join(path, "arch"),
                cat("\"", d.arch, "\" is not an architecture like sm_90"));
      d.path = resolvePath(m.baseDir, r.string(b, path, "path", true));
      m.binaries.push_back(std::move(d));
    }
  }
  if (const json *h = r.member(root, "", "host", false)) {
    r.expectObject(*h, "host");
    HostDesc d;
    d.library = resolvePath(m.baseDir, r.string(*h, "host", "library", true));
    d.symbol = r.string(*h, "host", "symbol", false, m.kernel + "_host");
    m.host = std::move(d);
  }
}

} // namespace

std::vector<qopt_reduction_kind> Manifest::stepKinds() const {
  std::vector<qopt_reduction_kind> kinds;
  for (const ReductionDesc &d : reductionList)
    if (d.scope == QOPT_REDUCTION_SCOPE_STEP)
      kinds.push_back(d.kind);
  return kinds;
}

long Manifest::findHyper(std::string_view name) const {
  for (size_t i = 0; i < hypers.size(); ++i)
    if (hypers[i].name == name)
      return static_cast<long>(i);
  return -1;
}

ManifestPtr parseManifest(std::string_view text, const std::string &source) {
  Reader r(source);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    // A parse error carries its byte (1-based: the character that failed);
    // other errors (a number that overflows float64) are found again by a
    // parse that keeps the position.
    size_t byte;
    if (const auto *parseError = dynamic_cast<const json::parse_error *>(&e)) {
      byte = parseError->byte > 0 ? parseError->byte - 1 : 0;
    } else {
      ErrorPositionSax sax;
      json::sax_parse(text.begin(), text.end(), &sax);
      byte = sax.start;
    }
    auto [line, col] = lineColumn(text, byte);
    // Drop nlohmann's "[json.exception.…] " and "parse error at line …: ".
    std::string what = e.what();
    size_t bracket = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    if (what.rfind("parse error", 0) == 0) {
      size_t colon = what.find(": ");
      if (colon != std::string::npos)
        what = what.substr(colon + 2);
    }
    fail(QOPT_ERROR_MANIFEST, source, ":", line, ":", col,
         ": invalid JSON: ", what);
  }
  if (!root.is_object())
    fail(QOPT_ERROR_MANIFEST, source,
         ": the manifest must be a JSON object, got ", root.type_name());
  {
    DuplicateKeySax dup;
    json::sax_parse(text.begin(), text.end(), &dup);
    if (!dup.duplicate.empty())
      r.error(dup.duplicate, "given twice (a key appears once in an object)");
  }

  auto m = std::make_shared<Manifest>();
  m->source = source;
  m->baseDir = dirName(source);

  std::string format = r.string(root, "", "format", true);
  if (format != "qopt-manifest")
    r.error("format", cat("\"", format, "\" (expected \"qopt-manifest\")"));
  // Version 2 adds launch.producer_warps, which a version 1 reader would
  // ignore and so launch a block without its producer warps (a hang); a
  // manifest that needs none of it may stay version 1.
  int64_t version = r.integer(root, "", "version", true, 0, 0, INT64_MAX);
  if (version < 1 || version > QOPT_MANIFEST_VERSION)
    r.error("version", cat("unsupported version ", version,
                           " (this runtime reads versions 1 to ",
                           QOPT_MANIFEST_VERSION, ")"));
  m->version = version;
  m->kernel = r.string(root, "", "kernel", true);
  m->entry = r.string(root, "", "entry", false, m->kernel);
  m->optimizer = r.string(root, "", "optimizer", false, "", true);
  m->mode = r.string(root, "", "mode", false, "", true);
  if (!m->mode.empty() && m->mode != "strict" && m->mode != "fast")
    r.error("mode", cat("\"", m->mode, "\" (expected strict or fast)"));
  m->arch = r.string(root, "", "arch", false, "", true);
  if (!m->arch.empty() && !validArch(m->arch))
    r.error("arch", cat("\"", m->arch, "\" is not an architecture like sm_90"));

  const json *param = r.member(root, "", "param", true);
  r.expectObject(*param, "param");
  m->paramName = r.string(*param, "param", "name", true);
  m->paramDtype = r.dtype(*param, "param", "dtype", true,
                          {QOPT_DTYPE_BF16, QOPT_DTYPE_F16, QOPT_DTYPE_F32},
                          "a param");
  std::string master = r.string(*param, "param", "master", false, "none");
  if (master == "ecc_int8")
    m->eccDtype = QOPT_DTYPE_INT8;
  else if (master == "ecc_int16")
    m->eccDtype = QOPT_DTYPE_INT16;
  else if (master == "stochastic")
    m->stochastic = true;
  else if (master == "kahan_bf16") {
    m->eccDtype = QOPT_DTYPE_BF16;
    m->kahan = true;
  }
  else if (master != "none")
    r.error("param.master",
            cat("unknown value \"", master,
                "\" (expected none, ecc_int8, ecc_int16, stochastic or kahan_bf16)"));
  if (m->stochastic && m->paramDtype != QOPT_DTYPE_BF16)
    r.error("param.master", "stochastic rounding needs a bf16 param");
  if (m->kahan && m->paramDtype != QOPT_DTYPE_BF16)
    r.error("param.master", "a Kahan compensation needs a bf16 param");
  if (m->eccDtype != QOPT_DTYPE_INVALID && m->paramDtype == QOPT_DTYPE_F32)
    r.error("param.master", "error bits need a bf16 or f16 param, not f32");

  const json *grad = r.member(root, "", "grad", true);
  r.expectObject(*grad, "grad");
  m->gradName = r.string(*grad, "grad", "name", true);
  m->gradDtype = r.dtype(*grad, "grad", "dtype", true,
                         {QOPT_DTYPE_BF16, QOPT_DTYPE_F16, QOPT_DTYPE_F32},
                         "a grad");
  if (m->gradName == m->paramName)
    r.error("grad.name", cat("\"", m->gradName, "\" is the param's name"));

  if (const json *h = r.member(root, "", "hypers", false)) {
    r.expectArray(*h, "hypers");
    for (size_t i = 0; i < h->size(); ++i) {
      std::string path = Reader::index("hypers", i);
      const json &e = (*h)[i];
      r.expectObject(e, path);
      HyperDesc d;
      d.name = r.string(e, path, "name", true);
      if (d.name == "step")
        r.error(Reader::join(path, "name"), "\"step\" is reserved");
      if (m->findHyper(d.name) >= 0)
        r.error(Reader::join(path, "name"), cat("\"", d.name, "\" repeats"));
      d.isBool = r.boolean(e, path, "bool", false);
      if (auto v = r.number(e, path, "default")) {
        d.hasDefault = true;
        d.defaultValue = *v;
        if (d.isBool && *v != 0.0 && *v != 1.0)
          r.error(Reader::join(path, "default"),
                  cat(*v, " for a bool hyperparameter (expected 0 or 1)"));
      }
      m->hypers.push_back(std::move(d));
    }
  }

  parseStreams(r, root, *m);
  parseLaunch(r, root, *m); // needs the stream count; states need the tile
  parseStates(r, root, *m);
  checkStreams(r, *m);
  parseTables(r, root, *m);
  parseUniforms(r, root, *m);
  parseReductions(r, root, *m);
  parseArgs(r, root, *m);
  parsePhases(r, root, *m);
  if (m->stochastic && !m->uniforms.empty())
    m->seedUniform = r.integer(*param, "param", "seed_uniform", false, -1, 0,
                               static_cast<int64_t>(m->uniforms.size()) - 1);
  parseBinaries(r, root, *m);
  return m;
}

std::string readFile(const std::string &path) { return readRegularFile(path); }

ManifestPtr loadManifest(const std::string &path) {
  return parseManifest(readFile(path), path);
}


std::vector<double> resolveHypers(const Manifest &m, const qopt_hyper *hypers,
                                  size_t numHypers) {
  if (numHypers && !hypers)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "hypers is NULL but num_hypers is ",
         numHypers);
  std::vector<double> values(m.hypers.size());
  std::vector<bool> given(m.hypers.size(), false);
  for (size_t i = 0; i < numHypers; ++i) {
    if (!hypers[i].name)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "hypers[", i, "].name is NULL");
    long k = m.findHyper(hypers[i].name);
    if (k < 0) {
      std::string known;
      for (const HyperDesc &d : m.hypers)
        known += (known.empty() ? "" : ", ") + d.name;
      fail(QOPT_ERROR_NOT_FOUND, "unknown hyperparameter '", hypers[i].name,
           "' for kernel '", m.kernel, "' (it has: ",
           known.empty() ? "none" : known, ")");
    }
    if (given[k])
      fail(QOPT_ERROR_INVALID_ARGUMENT, "hyperparameter '", hypers[i].name,
           "' given twice");
    const HyperDesc &d = m.hypers[k];
    if (d.isBool && hypers[i].value != 0.0 && hypers[i].value != 1.0)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "hyperparameter '", d.name,
           "' is a bool: expected 0 or 1, got ", hypers[i].value);
    given[k] = true;
    values[k] = hypers[i].value;
  }
  for (size_t k = 0; k < m.hypers.size(); ++k) {
    if (given[k])
      continue;
    if (!m.hypers[k].hasDefault)
      fail(QOPT_ERROR_INVALID_ARGUMENT, "hyperparameter '", m.hypers[k].name,
           "' of kernel '", m.kernel, "' has no default and was not given");
    values[k] = m.hypers[k].defaultValue;
  }
  return values;
}

std::vector<float> evaluateUniforms(const Manifest &m,
                                    const qopt_hyper *hypers,
                                    size_t numHypers, int64_t step) {
  if (step < 1)
    fail(QOPT_ERROR_INVALID_ARGUMENT, "step ", step, " for kernel '", m.kernel,
         "': the step count is 1-based (the first step is 1)");
  // Stochastic rounding's Philox counter takes the step as float32, exact
  // up to 2^24 (docs/numerics.md, "Stochastic rounding").
  if (m.stochastic && step > (int64_t(1) << 24))
    fail(QOPT_ERROR_INVALID_ARGUMENT, "step ", step, " for kernel '", m.kernel,
         "': stochastic rounding's counter holds steps up to 2^24 = 16777216");
  std::vector<double> values = resolveHypers(m, hypers, numHypers);
  // The step reductions' slots stay 0.0: their combine writes them.
  std::vector<float> out(m.numUniforms(), 0.0f);
  for (size_t i = 0; i < m.uniforms.size(); ++i) {
    double v = evaluate(m.uniforms[i], values, static_cast<double>(step));
    // NaN only: an infinite uniform can be meant (a clipping threshold of
    // inf); a hyperparameter outside its sensible range (beta1 = 1 makes
    // lr / bc1 infinite) is the caller's to refuse, as torch.optim does.
    if (std::isnan(v)) {
      std::vector<std::string> names;
      std::string env;
      for (size_t k = 0; k < m.hypers.size(); ++k) {
        names.push_back(m.hypers[k].name);
        env += cat(m.hypers[k].name, "=", values[k], ", ");
      }
      fail(QOPT_ERROR_INVALID_ARGUMENT, "uniform ", i, " of kernel '",
           m.kernel, "' is NaN: ", toString(m.uniforms[i], names), " with ",
           env, "step=", step);
    }
    if (static_cast<int64_t>(i) == m.seedUniform &&
        !(v >= 0 && v < 16777216.0 && v == std::floor(v)))
      fail(QOPT_ERROR_INVALID_ARGUMENT, "the seed of kernel '", m.kernel,
           "' is ", v, ": stochastic rounding's seed is an integer in [0, 2^24) "
           "(float32 holds it exactly)");
    out[i] = static_cast<float>(v); // the one rounding to float32
  }
  return out;
}

} // namespace qopt::rt
