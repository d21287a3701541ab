//===- ManifestCompare.cpp - A binary's own manifest against the given ----===//
#include "ManifestCompare.h"

#include "DType.h"
#include "Error.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace qopt::rt {

namespace {

/// A manifest's ABI as (dotted field, value) pairs in a fixed order: every
/// list's length comes before its entries, so two flattenings have the same
/// fields up to their first differing value.
class Flat {
public:
  std::vector<std::pair<std::string, std::string>> fields;

  void add(const std::string &field, std::string value) {
    fields.emplace_back(field, std::move(value));
  }
  void add(const std::string &field, const char *value) {
    add(field, std::string(value));
  }
  void add(const std::string &field, int64_t value) {
    add(field, std::to_string(value));
  }
  void add(const std::string &field, bool value) {
    add(field, std::string(value ? "true" : "false"));
  }
  void str(const std::string &field, const std::string &value) {
    add(field, quote(value));
  }
  /// A list's length, as "N entries".
  void count(const std::string &field, size_t n) {
    add(field, cat(n, n == 1 ? " entry" : " entries"));
  }

  static std::string quote(const std::string &s) { return "\"" + s + "\""; }
};

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string index(const std::string &list, size_t i) {
  return cat(list, "[", i, "]");
}

/// The manifest name of each operator.
const std::map<Expr::Op, std::string> &opNamesByOp() {
  static const std::map<Expr::Op, std::string> names = [] {
    std::map<Expr::Op, std::string> out;
    std::istringstream all(opNames());
    std::string name;
    while (all >> name)
      if (const OpInfo *info = findOp(name))
        out.emplace(info->op, name);
    return out;
  }();
  return names;
}

/// `e` in the manifest's JSON form, literals exactly.
std::string exprText(const Expr &e, const Manifest &m) {
  switch (e.kind) {
  case Expr::Kind::Literal:
    return number(e.value);
  case Expr::Kind::Hyper:
    return e.hyper < m.hypers.size() ? Flat::quote(m.hypers[e.hyper].name)
                                     : cat("hyper#", e.hyper);
  case Expr::Kind::Step:
    return "\"step\"";
  case Expr::Kind::Op: {
    auto it = opNamesByOp().find(e.op);
    std::string out =
        "[" + (it == opNamesByOp().end() ? cat("op#", int(e.op))
                                         : Flat::quote(it->second));
    for (const Expr &operand : e.operands)
      out += "," + exprText(operand, m);
    return out + "]";
  }
  }
  return "?";
}

const char *schemeName(StateDesc::Scheme s) {
  switch (s) {
  case StateDesc::Scheme::Plain: return "plain";
  case StateDesc::Scheme::Group: return "group";
  case StateDesc::Scheme::Codebook: return "codebook";
  }
  return "invalid";
}

const char *gridName(PhaseDesc::Grid g) {
  switch (g) {
  case PhaseDesc::Grid::Tiles: return "tiles";
  case PhaseDesc::Grid::Tensors: return "tensors";
  case PhaseDesc::Grid::One: return "one";
  }
  return "invalid";
}

std::string argName(const ArgDesc &a, const Manifest &m) {
  using K = ArgDesc::Kind;
  switch (a.kind) {
  case K::Descriptors: return "descriptors";
  case K::TileMap: return "tile_map";
  case K::NumTiles: return "num_tiles";
  case K::Uniforms: return "uniforms";
  case K::Table:
    return a.table < m.tables.size() ? m.tables[a.table].name
                                     : cat("table#", a.table);
  case K::WorkCounters: return "work_counters";
  case K::NumericsCounters: return "numerics_counters";
  case K::ReductionPartials: return "reduction_partials";
  case K::ReductionValues: return "reduction_values";
  case K::NumTensors: return "num_tensors";
  case K::StepPartials: return "step_partials";
  case K::NumStepTensors: return "num_step_tensors";
  }
  return "invalid";
}

void flattenArgs(Flat &f, const std::string &field,
                 const std::vector<ArgDesc> &args, const Manifest &m) {
  f.count(field, args.size());
  for (size_t i = 0; i < args.size(); ++i)
    f.str(index(field, i), argName(args[i], m));
}

void flattenPhases(Flat &f, const std::vector<PhaseDesc> &phases,
                   const Manifest &m) {
  f.count("phases", phases.size());
  for (size_t i = 0; i < phases.size(); ++i) {
    const PhaseDesc &p = phases[i];
    std::string at = index("phases", i);
    f.str(at + ".name", p.name);
    f.str(at + ".entry", p.entry);
    f.str(at + ".grid", gridName(p.grid));
    f.add(at + ".threads_per_block", p.threadsPerBlock);
    flattenArgs(f, at + ".args", p.args, m);
  }
}

/// Everything of `m` the `backend`'s code depends on or was compiled as.
Flat flatten(const Manifest &m, AbiBackend backend) {
  bool gpu = backend == AbiBackend::Gpu;
  Flat f;
  f.str("kernel", m.kernel);
  f.str("optimizer", m.optimizer);
  f.str("mode", m.mode);
  // The symbol the runtime calls: the GPU module's entry point or the
  // host library's function.
  if (gpu)
    f.str("entry", m.entry);
  else
    f.str("host.symbol", m.host ? m.host->symbol : std::string());
  f.str("param.name", m.paramName);
  f.str("param.dtype", dtypeName(m.paramDtype));
  f.str("param.master",
        m.eccDtype == QOPT_DTYPE_INVALID
            ? std::string(m.stochastic ? "stochastic" : "none")
            : cat(m.kahan ? "kahan " : "error bits ", dtypeName(m.eccDtype)));
  f.add("param.seed_uniform", m.seedUniform);
  f.str("grad.name", m.gradName);
  f.str("grad.dtype", dtypeName(m.gradDtype));

  f.count("hypers", m.hypers.size());
  for (size_t i = 0; i < m.hypers.size(); ++i) {
    std::string at = index("hypers", i);
    f.str(at + ".name", m.hypers[i].name);
    f.add(at + ".bool", m.hypers[i].isBool);
  }

  f.count("states", m.states.size());
  for (size_t i = 0; i < m.states.size(); ++i) {
    const StateDesc &s = m.states[i];
    std::string at = index("states", i);
    f.str(at + ".name", s.name);
    f.str(at + ".scheme", schemeName(s.scheme));
    f.str(at + ".dtype", dtypeName(s.dtype));
    f.str(at + ".scale_dtype", dtypeName(s.scaleDtype));
    f.add(at + ".group", s.group);
    f.add(at + ".bits", int64_t(s.bits));
    f.add(at + ".block", s.block);
    f.str(at + ".overflow", s.saturates ? "saturate" : "ieee");
  }

  f.count("streams", m.streams.size());
  for (size_t i = 0; i < m.streams.size(); ++i) {
    const StreamDesc &s = m.streams[i];
    std::string at = index("streams", i);
    f.str(at + ".name", s.name);
    f.str(at + ".state", s.state);
    f.str(at + ".role", roleName(s.role));
    f.str(at + ".dtype", dtypeName(s.dtype));
    f.str(at + ".per", perName(s.per));
    f.add(at + (s.per == QOPT_PER_ELEMENT ? ".per_size" : "." + std::string(perName(s.per))),
          s.perSize);
    f.str(at + ".access",
          s.access == QOPT_ACCESS_READ_WRITE ? "read_write" : "read");
  }

  f.count("uniforms", m.uniforms.size());
  for (size_t i = 0; i < m.uniforms.size(); ++i)
    f.add(index("uniforms", i) + ".expr", exprText(m.uniforms[i], m));

  f.count("tables", m.tables.size());
  for (size_t i = 0; i < m.tables.size(); ++i) {
    const TableDesc &t = m.tables[i];
    std::string at = index("tables", i);
    f.str(at + ".name", t.name);
    f.str(at + ".state", t.state);
    f.str(at + ".dtype", dtypeName(t.dtype));
    f.add(at + ".count", t.count);
  }

  flattenArgs(f, "args", m.args, m);
  // A host manifest's phases are hostPhases; a GPU one's, phases.
  flattenPhases(f, m.hostPhases.empty() ? m.phases : m.hostPhases, m);

  f.count("reductions", m.reductionList.size());
  for (size_t i = 0; i < m.reductionList.size(); ++i) {
    const ReductionDesc &r = m.reductionList[i];
    std::string at = index("reductions", i);
    f.add(at + ".kind", int64_t(r.kind));
    f.str(at + ".scope",
          r.scope == QOPT_REDUCTION_SCOPE_STEP ? "step" : "tensor");
    f.add(at + ".uniform", r.uniform);
  }
  f.add("reduction_workspace.partial_bytes_per_tile",
        m.workspace.partialBytesPerTile);
  f.add("reduction_workspace.value_bytes_per_tensor",
        m.workspace.valueBytesPerTensor);
  f.add("reduction_workspace.step_partial_bytes_per_tensor",
        m.workspace.stepPartialBytesPerTensor);

  const qopt_launch_info &l = m.launch;
  f.add("launch.threads_per_block", int64_t(l.threads_per_block));
  f.add("launch.elements_per_thread", int64_t(l.elements_per_thread));
  f.add("launch.tile_elements", l.tile_elements);
  f.add("launch.descriptor_bytes", l.descriptor_bytes);
  if (gpu) {
    // The GPU code indexes its dynamic shared memory by the plan's size (a
    // launch with fewer bytes is out of bounds) and claims tiles by the
    // plan's claims (the work counters are an argument, compared above).
    f.add("launch.shared_bytes", l.shared_bytes);
    // The kernel's warps split into the tile's threads and the producer
    // warps by threadIdx: a block without its producer warps hangs.
    f.add("launch.producer_warps", int64_t(l.producer_warps));
    f.add("launch.tile_claims.tiles", m.tileClaims.tiles);
    f.add("launch.tile_claims.static_eighths", m.tileClaims.staticEighths);
  }
  // Not the grid's size (suggested_blocks_per_sm, waves,
  // min_tiles_per_block): the kernels step any grid, the runtime alone
  // reads them. The host backend reads no shared memory, producer warps or
  // claims (qopt-opt writes a host manifest's launch as the GPU kernel's,
  // less its producer warps).
  return f;
}

} // namespace

std::optional<ManifestDifference> firstAbiDifference(const Manifest &given,
                                                     const Manifest &embedded,
                                                     AbiBackend backend) {
  Flat a = flatten(given, backend), b = flatten(embedded, backend);
  size_t n = std::min(a.fields.size(), b.fields.size());
  for (size_t i = 0; i < n; ++i) {
    // The same field list up to here (lengths come before entries), so a
    // field name that differs is a bug of flatten, reported all the same.
    if (a.fields[i].first != b.fields[i].first)
      return ManifestDifference{a.fields[i].first,
                                a.fields[i].first + " = " + a.fields[i].second,
                                b.fields[i].first + " = " + b.fields[i].second};
    if (a.fields[i].second != b.fields[i].second)
      return ManifestDifference{a.fields[i].first, a.fields[i].second,
                                b.fields[i].second};
  }
  if (a.fields.size() != b.fields.size()) {
    const Flat &longer = a.fields.size() > n ? a : b;
    return ManifestDifference{longer.fields[n].first,
                              &longer == &a ? longer.fields[n].second : "none",
                              &longer == &b ? longer.fields[n].second : "none"};
  }
  return std::nullopt;
}

void checkEmbeddedManifest(const Manifest &given, const EmbeddedManifest &e) {
  std::string source = cat(e.path, ":", e.symbol);
  ManifestPtr embedded;
  try {
    embedded = parseManifest(e.text, source);
  } catch (const Error &err) {
    fail(QOPT_ERROR_MANIFEST, e.kind, " ", e.path, " of kernel '",
         given.kernel, "' carries a manifest ('", e.symbol,
         "') the runtime cannot read, so it cannot check ", given.source,
         " against it: ", err.what());
  }
  if (std::optional<ManifestDifference> d =
          firstAbiDifference(given, *embedded, e.backend))
    fail(QOPT_ERROR_MANIFEST, given.source, ": does not match ", e.kind, " ",
         e.path, ", which was compiled with another manifest (its '",
         e.symbol, "'): field '", d->field, "' is ", d->given, " in ",
         given.source, " but ", d->embedded, " in the ", e.noun,
         ". A stale or edited manifest would step the ", e.noun,
         " with the wrong layout; use the manifest qopt-opt wrote with this ",
         e.noun, ", or recompile both");
}

} // namespace qopt::rt
