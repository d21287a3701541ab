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
      {"num_tensors", ArgDesc::Kind::NumTensors}};
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
/// tensor count, the uniforms and both workspace parts.
std::vector<ArgDesc> parsePhaseArgs(const Reader &r, const json &phase,
                                    const std::string &path,
                                    PhaseDesc::Grid grid, const Manifest &m) {
  const json *j = r.member(phase, path, "args", true);
  std::string field = Reader::join(path, "args");
  r.expectArray(*j, field);
  std::set<std::string> seen;
  std::vector<ArgDesc> args;
  const bool tiles = grid == PhaseDesc::Grid::Tiles;
  for (size_t i = 0; i < j->size(); ++i) {
    std::string at = Reader::index(field, i);
    if (!(*j)[i].is_string())
      r.error(at, cat("expected a string, got ", (*j)[i].type_name()));
    std::string name = (*j)[i].get<std::string>();
    if (!seen.insert(name).second)
      r.error(at, cat("\"", name, "\" repeats"));
    ArgDesc a;
    bool known = parseArgName(m, name, a);
    using K = ArgDesc::Kind;
    bool allowed =
        known && a.kind != K::WorkCounters && a.kind != K::NumericsCounters &&
        (tiles ? a.kind != K::NumTensors && a.kind != K::ReductionValues
               : a.kind != K::TileMap && a.kind != K::NumTiles &&
                     a.kind != K::Table);
    if (!allowed)
      r.error(at, cat("\"", name, "\" is not an argument of a phase over ",
                      tiles ? "tiles (expected descriptors, tile_map, "
                              "num_tiles, uniforms, reduction_partials or a "
                              "table name)"
                            : "tensors (expected descriptors, num_tensors, "
                              "uniforms, reduction_partials or "
                              "reduction_values)"));
    args.push_back(a);
  }
  std::vector<std::string> need = {"descriptors", "uniforms",
                                   "reduction_partials"};
  if (tiles) {
    need.insert(need.end(), {"tile_map", "num_tiles"});
    for (const TableDesc &t : m.tables)
      need.push_back(t.name);
  } else {
    need.insert(need.end(), {"num_tensors", "reduction_values"});
  }
  for (const std::string &n : need)
    if (!seen.count(n))
      r.error(field, cat("missing \"", n, "\""));
  return args;
}

} // namespace

void parsePhases(const Reader &r, const json &root, Manifest &m) {
  m.reductions = root.contains("reductions");
  const json *phases = r.member(root, "", "phases", false);
  const json *workspace = r.member(root, "", "reduction_workspace", false);
  if (!phases && !workspace)
    return;
  if (!phases || !workspace)
    r.error(phases ? "reduction_workspace" : "phases",
            "missing (a kernel with phases has a reduction workspace and "
            "the reverse)");
  r.expectArray(*phases, "phases");
  if (phases->empty())
    r.error("phases", "empty");
  std::set<std::string> entries = {m.entry};
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
    else
      r.error(Reader::join(path, "grid"),
              cat("\"", grid, "\" (expected tiles or tensors)"));
    d.threadsPerBlock = r.integer(p, path, "threads_per_block", true, 0, 1, 1024);
    d.args = parsePhaseArgs(r, p, path, d.grid, m);
    m.phases.push_back(std::move(d));
  }
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
  m.workspace.valueBytesPerTensor =
      r.integer(*workspace, "reduction_workspace", "value_bytes_per_tensor",
                true, 0, 4, int64_t(1) << 20);
}

} // namespace qopt::rt
