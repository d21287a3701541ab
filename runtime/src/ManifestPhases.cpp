//===- ManifestPhases.cpp - A manifest's argument names and phases --------===//
#include "ManifestPhases.h"

#include <algorithm>
#include <set>

namespace qopt::rt {

bool parseArgName(const Manifest &m, const std::string &name, ArgDesc &out) {
  static const std::pair<const char *, ArgDesc::Kind> kKeywords[] = {
      {"descriptors", ArgDesc::Kind::Descriptors},
      {"tile_map", ArgDesc::Kind::TileMap},
      {"num_tiles", ArgDesc::Kind::NumTiles},
      {"uniforms", ArgDesc::Kind::Uniforms},
      {"work_counters", ArgDesc::Kind::WorkCounters},
      {"numerics_counters", ArgDesc::Kind::NumericsCounters},
      {"reduction_partials", ArgDesc::Kind::ReductionPartials},
      {"reduction_values", ArgDesc::Kind::ReductionValues},
      {"num_tensors", ArgDesc::Kind::NumTensors},
      {"step_partials", ArgDesc::Kind::StepPartials},
      {"num_step_tensors", ArgDesc::Kind::NumStepTensors}};
  for (const auto &[keyword, kind] : kKeywords)
    if (name == keyword) {
      out = {kind, 0};
      return true;
    }
  auto t = std::find_if(m.tables.begin(), m.tables.end(),
                        [&](const TableDesc &d) { return d.name == name; });
  if (t == m.tables.end())
    return false;
  out = {ArgDesc::Kind::Table, static_cast<size_t>(t - m.tables.begin())};
  return true;
}

namespace {

/// One phase's "args": each once; the reduce pre-pass takes the step's
/// inputs (no counters) and the partials, the finish the descriptors, the
/// tensor count, the uniforms, the partials and the values (a kernel with
/// per-tensor reductions) and the step partials (one with step reductions),
/// the combine the step's tensor count, the step partials and the uniforms.
std::vector<ArgDesc> parsePhaseArgs(const Reader &r, const json &phase,
                                    const std::string &path,
                                    PhaseDesc::Grid grid, const Manifest &m) {
  const json *j = r.member(phase, path, "args", true);
  std::string field = Reader::join(path, "args");
  r.expectArray(*j, field);
  using K = ArgDesc::Kind;
  using G = PhaseDesc::Grid;
  const bool perTensor = m.numTensorReductions > 0;
  const bool perStep = m.numStepReductions > 0;
  std::vector<std::string> need;
  std::set<K> allowed;
  std::string expected;
  if (grid == G::Tiles) {
    need = {"descriptors", "uniforms", "reduction_partials", "tile_map",
            "num_tiles"};
    for (const TableDesc &t : m.tables)
      need.push_back(t.name);
    allowed = {K::Descriptors, K::TileMap, K::NumTiles, K::Uniforms, K::Table,
               K::ReductionPartials};
    expected = "tiles (expected descriptors, tile_map, num_tiles, uniforms, "
               "reduction_partials or a table name)";
  } else if (grid == G::Tensors) {
    need = {"descriptors", "uniforms", "reduction_partials", "num_tensors"};
    allowed = {K::Descriptors, K::NumTensors, K::Uniforms,
               K::ReductionPartials};
    expected = "tensors (expected descriptors, num_tensors, uniforms, "
               "reduction_partials";
    if (perTensor) {
      need.push_back("reduction_values");
      allowed.insert(K::ReductionValues);
      expected += ", reduction_values";
    }
    if (perStep) {
      need.push_back("step_partials");
      allowed.insert(K::StepPartials);
      expected += ", step_partials";
    }
    expected += ")";
  } else {
    need = {"num_step_tensors", "step_partials", "uniforms"};
    allowed = {K::NumStepTensors, K::StepPartials, K::Uniforms};
    expected = "one block (expected num_step_tensors, step_partials, "
               "uniforms)";
  }
  std::set<std::string> seen;
  std::vector<ArgDesc> args;
  for (size_t i = 0; i < j->size(); ++i) {
    std::string at = Reader::index(field, i);
    if (!(*j)[i].is_string())
      r.error(at, cat("expected a string, got ", (*j)[i].type_name()));
    std::string name = (*j)[i].get<std::string>();
    if (!seen.insert(name).second)
      r.error(at, cat("\"", name, "\" repeats"));
    ArgDesc a;
    if (!parseArgName(m, name, a) || !allowed.count(a.kind))
      r.error(at, cat("\"", name, "\" is not an argument of a phase over ",
                      expected));
    args.push_back(a);
  }
  for (const std::string &n : need)
    if (!seen.count(n))
      r.error(field, cat("missing \"", n, "\""));
  return args;
}

/// Whether `phases` are a host manifest's: objects without "args".
bool hostPhases(const json &phases) {
  bool host = false, gpu = false;
  for (const json &p : phases)
    (p.is_object() && p.contains("args") ? gpu : host) = true;
  return host && !gpu;
}

/// A host manifest's phases: `partials` over tiles, then `combine`, one
/// call, each naming its function in the host library.
void parseHostPhases(const Reader &r, const json &phases, Manifest &m) {
  if (m.numStepReductions == 0)
    r.error("phases", "a host manifest has phases only for step reductions, "
                      "and \"reductions\" lists none");
  static const char *const kNames[] = {"partials", "combine"};
  if (phases.size() != 2)
    r.error("phases", cat(phases.size(), " phases (a host manifest's are "
                                         "partials, then combine)"));
  std::set<std::string> entries = {m.entry};
  for (size_t i = 0; i < phases.size(); ++i) {
    std::string path = Reader::index("phases", i);
    const json &p = phases[i];
    r.expectObject(p, path);
    PhaseDesc d;
    d.name = r.string(p, path, "name", true);
    if (d.name != kNames[i])
      r.error(Reader::join(path, "name"),
              cat("\"", d.name, "\" (expected ", kNames[i], ")"));
    d.entry = r.string(p, path, "entry", true);
    if (!entries.insert(d.entry).second)
      r.error(Reader::join(path, "entry"),
              cat("\"", d.entry, "\" is another function's symbol"));
    std::string grid = r.string(p, path, "grid", true);
    const char *want = i == 0 ? "tiles" : "one";
    if (grid != want)
      r.error(Reader::join(path, "grid"),
              cat("\"", grid, "\" (the ", d.name, " phase's is ", want, ")"));
    d.grid = i == 0 ? PhaseDesc::Grid::Tiles : PhaseDesc::Grid::One;
    m.hostPhases.push_back(std::move(d));
  }
}

} // namespace

void parseReductions(const Reader &r, const json &root, Manifest &m) {
  m.reductions = root.contains("reductions");
  const json *j = r.member(root, "", "reductions", false);
  if (!j)
    return;
  r.expectArray(*j, "reductions");
  static const std::pair<const char *, qopt_reduction_kind> kKinds[] = {
      {"sum", QOPT_REDUCTION_SUM},   {"mean", QOPT_REDUCTION_MEAN},
      {"max", QOPT_REDUCTION_MAX},   {"norm", QOPT_REDUCTION_NORM},
      {"rms", QOPT_REDUCTION_RMS}};
  for (size_t i = 0; i < j->size(); ++i) {
    std::string path = Reader::index("reductions", i);
    const json &e = (*j)[i];
    r.expectObject(e, path);
    ReductionDesc d;
    std::string kind = r.string(e, path, "kind", true);
    auto k = std::find_if(std::begin(kKinds), std::end(kKinds),
                          [&](const auto &p) { return kind == p.first; });
    if (k == std::end(kKinds))
      r.error(Reader::join(path, "kind"),
              cat("\"", kind, "\" (expected sum, mean, max, norm or rms)"));
    d.kind = k->second;
    std::string scope = r.string(e, path, "scope", false, "tensor");
    if (scope == "tensor") {
      d.scope = QOPT_REDUCTION_SCOPE_TENSOR;
      if (e.contains("uniform"))
        r.error(Reader::join(path, "uniform"),
                "a per-tensor reduction has no uniform slot");
      d.index = m.numTensorReductions++;
    } else if (scope == "step") {
      d.scope = QOPT_REDUCTION_SCOPE_STEP;
      if (d.kind != QOPT_REDUCTION_SUM && d.kind != QOPT_REDUCTION_MAX &&
          d.kind != QOPT_REDUCTION_NORM)
        r.error(Reader::join(path, "kind"),
                cat("\"", kind, "\" is not a step reduction (expected sum, "
                    "max or norm)"));
      d.index = m.numStepReductions++;
      // The step values follow the evaluated uniforms, in order.
      int64_t want = static_cast<int64_t>(m.uniforms.size() + d.index);
      if (!e.contains("uniform"))
        r.error(Reader::join(path, "uniform"),
                cat("missing: a step reduction names its uniform slot (",
                    want, " for step reduction ", d.index, ")"));
      d.uniform = r.integer(e, path, "uniform", true, 0, 0, INT32_MAX);
      if (d.uniform != want)
        r.error(Reader::join(path, "uniform"),
                cat(d.uniform, " (step reduction ", d.index,
                    "'s slot is len(uniforms) + ", d.index, " = ", want, ")"));
    } else {
      r.error(Reader::join(path, "scope"),
              cat("\"", scope, "\" (expected tensor or step)"));
    }
    m.reductionList.push_back(d);
  }
}

bool hasGpuPhases(const json &root) {
  auto p = root.find("phases");
  return p != root.end() && p->is_array() && !hostPhases(*p);
}

void parsePhases(const Reader &r, const json &root, Manifest &m) {
  const json *phases = r.member(root, "", "phases", false);
  const json *workspace = r.member(root, "", "reduction_workspace", false);
  if (phases && phases->is_array() && !phases->empty() && hostPhases(*phases)) {
    parseHostPhases(r, *phases, m);
    // A host manifest may give the workspace's sizes; it has no use for them.
    if (workspace) {
      r.expectObject(*workspace, "reduction_workspace");
      m.workspace.stepPartialBytesPerTensor = r.integer(
          *workspace, "reduction_workspace", "step_partial_bytes_per_tensor",
          false, int64_t(m.numStepReductions) * 8, 8, int64_t(1) << 20);
    }
    return;
  }
  if (!phases && !workspace) {
    if (m.numStepReductions > 0)
      r.error("phases", cat("missing: \"reductions\" lists ",
                            m.numStepReductions, " step reduction(s), whose "
                            "phases the manifest names (GPU: reduce, finish, "
                            "combine; host: partials, combine)"));
    return;
  }
  if (!phases || !workspace)
    r.error(phases ? "reduction_workspace" : "phases",
            "missing (a kernel with phases has a reduction workspace and "
            "the reverse)");
  r.expectArray(*phases, "phases");
  if (phases->empty())
    r.error("phases", "empty");
  if (m.reductionList.empty())
    r.error("phases", "present, but \"reductions\" lists no reduction for "
                      "them to compute");
  std::set<std::string> entries = {m.entry};
  bool combine = false;
  for (size_t i = 0; i < phases->size(); ++i) {
    std::string path = Reader::index("phases", i);
    const json &p = (*phases)[i];
    r.expectObject(p, path);
    PhaseDesc d;
    d.name = r.string(p, path, "name", true);
    d.entry = r.string(p, path, "entry", true);
    if (!entries.insert(d.entry).second)
      r.error(Reader::join(path, "entry"),
              cat("\"", d.entry, "\" is another launch's entry point"));
    std::string grid = r.string(p, path, "grid", true);
    if (grid == "tiles")
      d.grid = PhaseDesc::Grid::Tiles;
    else if (grid == "tensors")
      d.grid = PhaseDesc::Grid::Tensors;
    else if (grid == "one")
      d.grid = PhaseDesc::Grid::One;
    else
      r.error(Reader::join(path, "grid"),
              cat("\"", grid, "\" (expected tiles, tensors or one)"));
    if (d.grid == PhaseDesc::Grid::One) {
      if (m.numStepReductions == 0)
        r.error(Reader::join(path, "grid"),
                "a combine phase (grid one) without step reductions in "
                "\"reductions\"");
      if (combine || i + 1 != phases->size())
        r.error(Reader::join(path, "grid"),
                "the combine phase (grid one) is the last phase, and the "
                "only one");
      combine = true;
    }
    d.threadsPerBlock = r.integer(p, path, "threads_per_block", true, 0, 1, 1024);
    d.args = parsePhaseArgs(r, p, path, d.grid, m);
    m.phases.push_back(std::move(d));
  }
  if (m.numStepReductions > 0 && !combine)
    r.error("phases", cat("no combine phase (grid one), but \"reductions\" "
                          "lists ", m.numStepReductions,
                          " step reduction(s)"));
  r.expectObject(*workspace, "reduction_workspace");
  int64_t chunk = r.integer(*workspace, "reduction_workspace", "chunk_elements",
                            true, 0, 1, INT32_MAX);
  if (m.launch.tile_elements % chunk != 0)
    r.error("reduction_workspace.chunk_elements",
            cat(chunk, " does not divide launch.tile_elements (",
                m.launch.tile_elements, ")"));
  m.workspace.partialBytesPerTile =
      r.integer(*workspace, "reduction_workspace", "partial_bytes_per_tile",
                true, 0, 8, int64_t(1) << 20);
  // Per-tensor values exist only for per-tensor reductions.
  const bool values = m.numTensorReductions > 0;
  m.workspace.valueBytesPerTensor =
      r.integer(*workspace, "reduction_workspace", "value_bytes_per_tensor",
                values, 0, values ? 4 : 0, int64_t(1) << 20);
  if (m.numStepReductions > 0) {
    int64_t want = int64_t(m.numStepReductions) * 8;
    m.workspace.stepPartialBytesPerTensor =
        r.integer(*workspace, "reduction_workspace",
                  "step_partial_bytes_per_tensor", true, 0, 8, INT32_MAX);
    if (m.workspace.stepPartialBytesPerTensor != want)
      r.error("reduction_workspace.step_partial_bytes_per_tensor",
              cat(m.workspace.stepPartialBytesPerTensor, " (expected ", want,
                  ": 8 bytes for each of the ", m.numStepReductions,
                  " step reductions)"));
  } else if (workspace->contains("step_partial_bytes_per_tensor")) {
    r.error("reduction_workspace.step_partial_bytes_per_tensor",
            "present, but \"reductions\" lists no step reduction");
  }
}

} // namespace qopt::rt
