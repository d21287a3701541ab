//===- ManifestTest.cpp - Manifest parsing, good and malformed ------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstring>
#include <functional>

using json = nlohmann::json;
using namespace qopt::test;

namespace {

TEST(Manifest, ParsesTheFullAbiExample) {
  qopt_manifest *m = parseOrDie(flashManifestJson(), "dir/FlashAdamW_strict.manifest.json");
  ASSERT_NE(m, nullptr);
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_STREQ(info.kernel, "FlashAdamW_strict");
  EXPECT_STREQ(info.entry, "FlashAdamW_strict");
  EXPECT_STREQ(info.optimizer, "FlashAdamW");
  EXPECT_STREQ(info.mode, "strict");
  EXPECT_STREQ(info.arch, "sm_90");
  EXPECT_STREQ(info.source, "dir/FlashAdamW_strict.manifest.json");
  EXPECT_EQ(info.num_streams, 8u);
  EXPECT_EQ(info.num_hypers, 3u);
  EXPECT_EQ(info.num_uniforms, 1u);
  EXPECT_EQ(info.num_tables, 1u);
  EXPECT_EQ(info.num_args, 5u);
  EXPECT_EQ(info.param_dtype, QOPT_DTYPE_BF16);
  EXPECT_EQ(info.grad_dtype, QOPT_DTYPE_BF16);
  EXPECT_EQ(info.error_bits_dtype, QOPT_DTYPE_INT8);
  EXPECT_EQ(info.launch.threads_per_block, 256);
  EXPECT_EQ(info.launch.elements_per_thread, 16);
  EXPECT_EQ(info.launch.tile_elements, 4096);
  EXPECT_EQ(info.launch.descriptor_bytes, 80);
  EXPECT_EQ(info.launch.suggested_blocks_per_sm, 4);
  EXPECT_EQ(info.launch.waves, 2);
  EXPECT_EQ(info.launch.min_tiles_per_block, 64);

  struct Want {
    const char *name, *state;
    qopt_stream_role role;
    qopt_dtype dtype;
    qopt_stream_per per;
    int64_t perSize;
    qopt_access access;
  } want[] = {
      {"p", "", QOPT_ROLE_PARAM, QOPT_DTYPE_BF16, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE},
      {"p.ecc", "", QOPT_ROLE_ERROR_BITS, QOPT_DTYPE_INT8, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE},
      {"g", "", QOPT_ROLE_GRAD, QOPT_DTYPE_BF16, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ},
      {"m.codes", "m", QOPT_ROLE_STATE_CODES, QOPT_DTYPE_INT8, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE},
      {"m.scales", "m", QOPT_ROLE_STATE_SCALES, QOPT_DTYPE_F16, QOPT_PER_GROUP, 32, QOPT_ACCESS_READ_WRITE},
      {"m2.codes", "m2", QOPT_ROLE_STATE_CODES, QOPT_DTYPE_UINT8, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE},
      {"m2.absmax", "m2", QOPT_ROLE_STATE_ABSMAX, QOPT_DTYPE_F32, QOPT_PER_BLOCK, 2048, QOPT_ACCESS_READ_WRITE},
      {"m3", "m3", QOPT_ROLE_STATE, QOPT_DTYPE_F32, QOPT_PER_ELEMENT, 1, QOPT_ACCESS_READ_WRITE},
  };
  for (size_t i = 0; i < 8; ++i) {
    qopt_stream_info s;
    ASSERT_EQ(qopt_manifest_get_stream(m, i, &s), QOPT_SUCCESS);
    EXPECT_STREQ(s.name, want[i].name) << i;
    EXPECT_STREQ(s.state, want[i].state) << i;
    EXPECT_EQ(s.role, want[i].role) << i;
    EXPECT_EQ(s.dtype, want[i].dtype) << i;
    EXPECT_EQ(s.per, want[i].per) << i;
    EXPECT_EQ(s.per_size, want[i].perSize) << i;
    EXPECT_EQ(s.access, want[i].access) << i;
  }
  qopt_stream_info s;
  EXPECT_EQ(qopt_manifest_get_stream(m, 8, &s), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qopt_last_error()).find("out of range"), std::string::npos);

  qopt_hyper_info h;
  ASSERT_EQ(qopt_manifest_get_hyper(m, 2, &h), QOPT_SUCCESS);
  EXPECT_STREQ(h.name, "nesterov");
  EXPECT_EQ(h.has_default, 1);
  EXPECT_EQ(h.is_bool, 1);
  EXPECT_EQ(h.default_value, 0.0);
  ASSERT_EQ(qopt_manifest_get_hyper(m, 0, &h), QOPT_SUCCESS);
  EXPECT_EQ(h.default_value, 0.001);

  qopt_table_info t;
  ASSERT_EQ(qopt_manifest_get_table(m, 0, &t), QOPT_SUCCESS);
  EXPECT_STREQ(t.name, "m2.qmap");
  EXPECT_STREQ(t.state, "m2");
  EXPECT_EQ(t.count, 256);
  EXPECT_EQ(qopt_manifest_destroy(m), QOPT_SUCCESS);
  EXPECT_STREQ(qopt_last_error(), "");
}

TEST(Manifest, WorkCountersAreAnArgument) {
  // A kernel with tile claims takes the launch's work counters last
  // (docs/abi.md); launch.tile_claims is for readers, not the runtime.
  json j = json::parse(flashManifestJson());
  j["args"].push_back("work_counters");
  j["launch"]["tile_claims"] = {{"tiles", 1}, {"static_eighths", 5}};
  qopt_manifest *m = parseOrDie(j.dump());
  ASSERT_NE(m, nullptr);
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_args, 6u);
  qopt_manifest_destroy(m);

  // Without `args`, a kernel with tile claims takes them last; with `args`,
  // they must be there.
  json noArgs = j;
  noArgs.erase("args");
  qopt_manifest *d = parseOrDie(noArgs.dump());
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(qopt_manifest_get_info(d, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_args, 6u);
  qopt_manifest_destroy(d);
  // With `args` they must be listed (ManifestErrors: "args missing work
  // counters", "args repeat work counters").
}

TEST(Manifest, SaturatingStatesTakeTheNumericsCounters) {
  // A group or codebook state with "overflow": "saturate" makes the kernel
  // take the numerics counters, after the work counters (docs/abi.md); a
  // manifest without "overflow" (one written before the policy) takes none.
  json j = json::parse(flashManifestJson());
  qopt_manifest_info info;
  qopt_manifest *old = parseOrDie(j.dump());
  ASSERT_NE(old, nullptr);
  ASSERT_EQ(qopt_manifest_get_info(old, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_numerics_counters, 0);
  qopt_manifest_destroy(old);

  j["states"][0]["overflow"] = "saturate";
  j["states"][1]["overflow"] = "ieee";
  j["args"].push_back("work_counters");
  j["args"].push_back("numerics_counters");
  j["launch"]["tile_claims"] = {{"tiles", 1}, {"static_eighths", 5}};
  qopt_manifest *m = parseOrDie(j.dump());
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_args, 7u);
  EXPECT_EQ(info.num_numerics_counters, QOPT_NUMERICS_COUNTERS);
  qopt_manifest_destroy(m);

  // Without `args`: the tables, the work counters, the numerics counters.
  json noArgs = j;
  noArgs.erase("args");
  qopt_manifest *d = parseOrDie(noArgs.dump());
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(qopt_manifest_get_info(d, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_args, 7u);
  EXPECT_EQ(info.num_numerics_counters, QOPT_NUMERICS_COUNTERS);
  qopt_manifest_destroy(d);
}

TEST(Manifest, OptionalFieldsTakeTheirDefaults) {
  json j = json::parse(flashManifestJson());
  j.erase("tables");
  j.erase("args");
  j.erase("mode");
  j["launch"].erase("tile_elements");
  j["launch"].erase("descriptor_bytes");
  j["launch"].erase("suggested_blocks_per_sm");
  j["launch"].erase("waves");
  j["launch"].erase("min_tiles_per_block");
  j["launch"].erase("shared_bytes");
  qopt_manifest *m = parseOrDie(j.dump());
  ASSERT_NE(m, nullptr);
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_tables, 1u); // derived: one table per codebook state
  EXPECT_EQ(info.num_args, 5u);
  EXPECT_EQ(info.launch.tile_elements, 4096);
  EXPECT_EQ(info.launch.descriptor_bytes, 80);
  EXPECT_EQ(info.launch.suggested_blocks_per_sm, 1);
  EXPECT_EQ(info.launch.waves, 1);
  EXPECT_EQ(info.launch.min_tiles_per_block, QOPT_MIN_TILES_PER_BLOCK);
  EXPECT_EQ(info.launch.producer_warps, 0);
  EXPECT_STREQ(info.mode, "");
  qopt_table_info t;
  ASSERT_EQ(qopt_manifest_get_table(m, 0, &t), QOPT_SUCCESS);
  EXPECT_STREQ(t.name, "m2.qmap");
  qopt_manifest_destroy(m);
}

TEST(Manifest, ProducerWarpsNeedVersion2) {
  // A version 2 manifest gives the block's producer warps; one without them
  // reads as version 1 does, and so does a version 1 manifest that says 0.
  struct Case {
    int version;
    const char *producerWarps; ///< the field's JSON, or null to leave it out
    int32_t want;
  };
  const Case cases[] = {{2, "1", 1}, {2, "24", 24}, {2, nullptr, 0},
                        {2, "0", 0}, {1, "0", 0},   {1, nullptr, 0}};
  for (const Case &c : cases) {
    json j = json::parse(flashManifestJson());
    j["version"] = c.version;
    if (c.producerWarps)
      j["launch"]["producer_warps"] = json::parse(c.producerWarps);
    qopt_manifest *m = parseOrDie(j.dump());
    ASSERT_NE(m, nullptr) << c.version << " " << (c.producerWarps ? c.producerWarps : "-");
    qopt_manifest_info info;
    ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
    EXPECT_EQ(info.launch.producer_warps, c.want) << c.version;
    EXPECT_EQ(info.launch.threads_per_block, 256) << c.version;
    EXPECT_EQ(info.launch.tile_elements, 4096) << c.version; // the tile is the consumers'
    qopt_manifest_destroy(m);
  }
  // 992 threads leave room for one warp (1024 for none: MalformedManifest).
  json j = json::parse(sgdManifestJson());
  j["version"] = 2;
  j["launch"] = {{"threads_per_block", 992}, {"elements_per_thread", 8},
                 {"producer_warps", 1}};
  qopt_manifest *m = parseOrDie(j.dump());
  ASSERT_NE(m, nullptr);
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.launch.producer_warps, 1);
  qopt_manifest_destroy(m);
}

TEST(Manifest, GroupAndBlockSizesMayUseEitherKey) {
  // qopt-opt writes a codebook's absmax as {"per": "group", "group": B}.
  json j = json::parse(flashManifestJson());
  j["streams"][6] = {{"name", "m2.absmax"}, {"role", "state_absmax"}, {"dtype", "f32"},
                     {"per", "group"}, {"group", 2048}, {"access", "read_write"}};
  j["streams"][4] = {{"name", "m.scales"}, {"role", "state_scales"}, {"dtype", "f16"},
                     {"per", "group"}, {"block", 32}, {"access", "read_write"}};
  qopt_manifest *m = parseOrDie(j.dump());
  ASSERT_NE(m, nullptr);
  qopt_stream_info s;
  ASSERT_EQ(qopt_manifest_get_stream(m, 6, &s), QOPT_SUCCESS);
  EXPECT_EQ(s.per, QOPT_PER_BLOCK);
  EXPECT_EQ(s.per_size, 2048);
  ASSERT_EQ(qopt_manifest_get_stream(m, 4, &s), QOPT_SUCCESS);
  EXPECT_EQ(s.per, QOPT_PER_GROUP);
  EXPECT_EQ(s.per_size, 32);
  qopt_manifest_destroy(m);
}

/// One malformed manifest: how to break the good one, and what the message
/// must say.
struct Malformed {
  const char *what;
  std::function<void(json &)> mutate;
  const char *field;    ///< must appear as "field '<field>'"
  const char *fragment; ///< and this text too
};

class MalformedManifest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedManifest, NamesFileAndField) {
  const Malformed &c = GetParam();
  json j = json::parse(flashManifestJson());
  c.mutate(j);
  std::string text = j.dump(2);
  qopt_manifest *m = nullptr;
  qopt_status s = qopt_manifest_parse(text.data(), text.size(),
                                      "bad.manifest.json", &m);
  EXPECT_EQ(s, QOPT_ERROR_MANIFEST) << c.what;
  EXPECT_EQ(m, nullptr);
  std::string msg = qopt_last_error();
  EXPECT_EQ(msg.rfind("bad.manifest.json: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(std::string("field '") + c.field + "'"), std::string::npos)
      << c.what << ": " << msg;
  EXPECT_NE(msg.find(c.fragment), std::string::npos) << c.what << ": " << msg;
}

/// The phases of a kernel with per-tensor reductions (docs/abi.md,
/// "Reductions") added to the full example.
void addPhases(json &j) {
  j["reductions"] = json::parse(R"([{"kind": "norm", "scope": "tensor"}])");
  j["args"].push_back("reduction_values");
  j["phases"] = json::parse(R"([
    {"name": "reduce", "entry": "k_reduce", "grid": "tiles", "threads_per_block": 256,
     "args": ["descriptors", "tile_map", "num_tiles", "uniforms", "m2.qmap",
              "reduction_partials"]},
    {"name": "finish", "entry": "k_finish", "grid": "tensors", "threads_per_block": 512,
     "args": ["descriptors", "num_tensors", "uniforms", "reduction_partials",
              "reduction_values"]}])");
  j["reduction_workspace"] = {{"chunk_elements", 2048},
                              {"partial_bytes_per_tile", 16},
                              {"value_bytes_per_tensor", 4}};
}

TEST(Manifest, ParsesPhases) {
  json j = json::parse(flashManifestJson());
  addPhases(j);
  std::string text = j.dump();
  qopt_manifest *m = nullptr;
  ASSERT_EQ(qopt_manifest_parse(text.data(), text.size(), "k.manifest.json", &m),
            QOPT_SUCCESS)
      << qopt_last_error();
  qopt_manifest_info info;
  ASSERT_EQ(qopt_manifest_get_info(m, &info), QOPT_SUCCESS);
  EXPECT_EQ(info.num_args, 6u);
  qopt_manifest_destroy(m);
}

const Malformed kMalformed[] = {
    {"phases without workspace",
     [](json &j) {
       addPhases(j);
       j.erase("reduction_workspace");
     },
     "reduction_workspace", "missing (a kernel with phases"},
    {"phase grid",
     [](json &j) {
       addPhases(j);
       j["phases"][0]["grid"] = "blocks";
     },
     "phases[0].grid", "\"blocks\" (expected tiles, tensors or one)"},
    {"finish takes no tile map",
     [](json &j) {
       addPhases(j);
       j["phases"][1]["args"].push_back("tile_map");
     },
     "phases[1].args[5]", "\"tile_map\" is not an argument of a phase over tensors"},
    {"phase takes no counters",
     [](json &j) {
       addPhases(j);
       j["phases"][0]["args"].push_back("work_counters");
     },
     "phases[0].args[6]", "\"work_counters\" is not an argument of a phase over tiles"},
    {"reduce phase without partials",
     [](json &j) {
       addPhases(j);
       j["phases"][0]["args"].erase(5);
     },
     "phases[0].args", "missing \"reduction_partials\""},
    {"phase entry is the step's",
     [](json &j) {
       addPhases(j);
       j["phases"][1]["entry"] = "FlashAdamW_strict";
     },
     "phases[1].entry", "is another launch's entry point"},
    {"chunk does not divide the tile",
     [](json &j) {
       addPhases(j);
       j["reduction_workspace"]["chunk_elements"] = 3000;
     },
     "reduction_workspace.chunk_elements", "3000 does not divide launch.tile_elements (4096)"},
    {"step without reduction values",
     [](json &j) {
       addPhases(j);
       j["args"].erase(5);
     },
     "args", "missing \"reduction_values\""},
    {"reduction values without phases",
     [](json &j) { j["args"].push_back("reduction_values"); }, "args[5]",
     "unknown argument \"reduction_values\""},
    {"wrong format", [](json &j) { j["format"] = "onnx"; }, "format",
     "expected \"qopt-manifest\""},
    {"newer version", [](json &j) { j["version"] = 3; }, "version",
     "unsupported version 3 (this runtime reads versions 1 to 2)"},
    {"version 0", [](json &j) { j["version"] = 0; }, "version",
     "unsupported version 0"},
    {"version as text", [](json &j) { j["version"] = "1"; }, "version",
     "expected an integer, got string"},
    {"no kernel", [](json &j) { j.erase("kernel"); }, "kernel", "missing"},
    {"empty kernel", [](json &j) { j["kernel"] = ""; }, "kernel",
     "must not be empty"},
    {"bad arch", [](json &j) { j["arch"] = "ampere"; }, "arch",
     "not an architecture"},
    {"bad mode", [](json &j) { j["mode"] = "turbo"; }, "mode", "strict or fast"},
    {"param not object", [](json &j) { j["param"] = "p"; }, "param",
     "expected an object, got string"},
    {"unknown dtype", [](json &j) { j["param"]["dtype"] = "fp8"; },
     "param.dtype", "unknown dtype \"fp8\""},
    {"dtype not allowed", [](json &j) { j["param"]["dtype"] = "int8"; },
     "param.dtype", "not allowed for a param"},
    {"bad master", [](json &j) { j["param"]["master"] = "ecc_int4"; },
     "param.master", "ecc_int4"},
    {"grad missing name", [](json &j) { j["grad"].erase("name"); },
     "grad.name", "missing"},
    {"hyper without name", [](json &j) { j["hypers"][1].erase("name"); },
     "hypers[1].name", "missing"},
    {"hyper repeats", [](json &j) { j["hypers"][1]["name"] = "lr"; },
     "hypers[1].name", "repeats"},
    {"hyper named step", [](json &j) { j["hypers"][0]["name"] = "step"; },
     "hypers[0].name", "reserved"},
    {"bool default 2", [](json &j) { j["hypers"][2]["default"] = 2; },
     "hypers[2].default", "expected 0 or 1"},
    {"default not number", [](json &j) { j["hypers"][0]["default"] = "1e-3"; },
     "hypers[0].default", "expected a number"},
    {"state scheme", [](json &j) { j["states"][0]["scheme"] = "lut"; },
     "states[0].scheme", "unknown scheme \"lut\""},
    {"group straddles", [](json &j) { j["states"][0]["group"] = 48; },
     "states[0].group", "48 does not divide launch.tile_elements (4096)"},
    {"block straddles", [](json &j) { j["states"][1]["block"] = 3000; },
     "states[1].block", "does not divide"},
    {"group not integer", [](json &j) { j["states"][0]["group"] = 32.5; },
     "states[0].group", "expected an integer, got 32.5"},
    {"stream dtype differs", [](json &j) { j["streams"][2]["dtype"] = "f16"; },
     "streams[2].dtype", "its declaration gives \"bf16\""},
    {"stream order", [](json &j) { std::swap(j["streams"][3], j["streams"][4]); },
     "streams[3].name", "\"m.scales\" where the ABI order"},
    {"stream role missing", [](json &j) { j["streams"][1].erase("role"); },
     "streams[1].role", "missing"},
    {"stream role unknown", [](json &j) { j["streams"][1]["role"] = "ecc"; },
     "streams[1].role", "unknown role \"ecc\""},
    {"stream group size", [](json &j) { j["streams"][4]["group"] = 64; },
     "streams[4].per", "\"group\" 64 but its declaration gives \"group\" 32"},
    {"stream access", [](json &j) { j["streams"][2]["access"] = "read_write"; },
     "streams[2].access", "a grad stream is read"},
    {"stream access value", [](json &j) { j["streams"][2]["access"] = "rw"; },
     "streams[2].access", "expected read or read_write"},
    {"stream per value", [](json &j) { j["streams"][4]["per"] = "tile"; },
     "streams[4].per", "unknown value \"tile\""},
    {"extra stream",
     [](json &j) {
       j["streams"].push_back({{"name", "v"}, {"role", "state"}, {"dtype", "f32"},
                               {"access", "read_write"}});
       j["launch"]["descriptor_bytes"] = 88;
     },
     "streams", "9 entries but param, grad and states describe 8"},
    {"streams not array", [](json &j) { j["streams"] = json::object(); },
     "streams", "expected an array, got object"},
    {"uniform unknown op",
     [](json &j) { j["uniforms"][0]["expr"] = {"expm1", "beta1"}; },
     "uniforms[0].expr[0]", "unknown op \"expm1\""},
    {"uniform arity",
     [](json &j) { j["uniforms"][0]["expr"][2] = {"pow", "beta1"}; },
     "uniforms[0].expr[2]", "op \"pow\" takes 2 operands, got 1"},
    {"uniform unknown name",
     [](json &j) { j["uniforms"][0]["expr"][2][1] = "gamma"; },
     "uniforms[0].expr[2][1]", "unknown name \"gamma\""},
    {"uniform null operand",
     [](json &j) { j["uniforms"][0]["expr"][1] = nullptr; },
     "uniforms[0].expr[1]", "got null"},
    {"uniform index", [](json &j) { j["uniforms"][0]["index"] = 3; },
     "uniforms[0].index", "out of range [0, 0]"},
    {"tables count", [](json &j) { j["tables"][0]["count"] = 128; },
     "tables[0].count", "128 is out of range [256, 256]"},
    {"table for plain state", [](json &j) { j["tables"][0]["state"] = "m3"; },
     "tables[0].state", "not a codebook state"},
    {"args unknown",
     [](json &j) { j["args"][4] = "m2.lut"; }, "args[4]",
     "unknown argument \"m2.lut\""},
    {"args missing table", [](json &j) { j["args"].erase(4); }, "args",
     "missing \"m2.qmap\""},
    {"args missing work counters",
     [](json &j) { j["launch"]["tile_claims"] = {{"tiles", 1}, {"static_eighths", 5}}; },
     "args", "missing \"work_counters\""},
    {"args repeat work counters",
     [](json &j) {
       j["args"].push_back("work_counters");
       j["args"].push_back("work_counters");
     },
     "args[6]", "\"work_counters\" repeats"},
    {"args missing numerics counters",
     [](json &j) { j["states"][1]["overflow"] = "saturate"; }, "args",
     "missing \"numerics_counters\""},
    {"unknown overflow policy",
     [](json &j) { j["states"][0]["overflow"] = "wrap"; }, "states[0].overflow",
     "unknown overflow policy \"wrap\" (expected saturate or ieee)"},
    {"no launch", [](json &j) { j.erase("launch"); }, "launch", "missing"},
    {"threads per block", [](json &j) { j["launch"]["threads_per_block"] = 2048; },
     "launch.threads_per_block", "2048 is out of range [1, 1024]"},
    {"tile mismatch", [](json &j) { j["launch"]["tile_elements"] = 2048; },
     "launch.tile_elements", "!= threads_per_block * elements_per_thread"},
    {"descriptor bytes", [](json &j) { j["launch"]["descriptor_bytes"] = 56; },
     "launch.descriptor_bytes", "56 != 16 + 8 * num_streams = 80"},
    {"producer warps in version 1",
     [](json &j) { j["launch"]["producer_warps"] = 1; }, "launch.producer_warps",
     "1 producer warp needs manifest version 2 (this manifest is version 1)"},
    {"producer warps past 1024 threads",
     [](json &j) {
       j["version"] = 2;
       j["launch"] = {{"threads_per_block", 1024}, {"elements_per_thread", 4},
                      {"producer_warps", 1}};
     },
     "launch.producer_warps",
     "threads_per_block + 32 * producer_warps = 1024 + 32 * 1 = 1056 threads, "
     "more than a block's 1024 (at most 0 producer warps"},
    {"producer warps past 1024 threads at 256",
     [](json &j) {
       j["version"] = 2;
       j["launch"]["producer_warps"] = 25;
     },
     "launch.producer_warps", "256 + 32 * 25 = 1056 threads"},
    {"negative producer warps",
     [](json &j) {
       j["version"] = 2;
       j["launch"]["producer_warps"] = -1;
     },
     "launch.producer_warps", "-1 is out of range [0, "},
    {"producer warps as text",
     [](json &j) {
       j["version"] = 2;
       j["launch"]["producer_warps"] = "1";
     },
     "launch.producer_warps", "expected an integer, got string"},
    {"no waves", [](json &j) { j["launch"]["waves"] = 0; }, "launch.waves",
     "0 is out of range [1, 1024]"},
    {"no tiles per block", [](json &j) { j["launch"]["min_tiles_per_block"] = 0; },
     "launch.min_tiles_per_block", "0 is out of range [1, 1073741824]"},
    {"too many tiles per block",
     [](json &j) { j["launch"]["min_tiles_per_block"] = (int64_t(1) << 30) + 1; },
     "launch.min_tiles_per_block", "1073741825 is out of range [1, 1073741824]"},
    {"binary format",
     [](json &j) { j["binaries"] = {{{"format", "elf"}, {"path", "x.o"}}}; },
     "binaries[0].format", "unknown format \"elf\""},
    {"bool flag as an array",
     [](json &j) { j["hypers"][2]["bool"] = json::array({json::array({true})}); },
     "hypers[2].bool", "expected true or false, got array"},
    {"host library missing",
     [](json &j) { j["host"] = {{"symbol", "f"}}; }, "host.library",
     "missing"},
};

std::string caseName(const ::testing::TestParamInfo<Malformed> &info) {
  std::string name;
  for (const char *c = info.param.what; *c; ++c)
    name += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedManifest,
                         ::testing::ValuesIn(kMalformed), caseName);

TEST(Manifest, InvalidJsonGivesLineAndColumn) {
  std::string text = "{\n  \"format\": \"qopt-manifest\",\n  \"version\": 1,,\n}";
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_parse(text.data(), text.size(), "broken.json", &m),
            QOPT_ERROR_MANIFEST);
  std::string msg = qopt_last_error();
  EXPECT_EQ(msg.rfind("broken.json:3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
}

/// The full manifest with its uniform replaced by `levels` nested "neg"
/// around 1.0, built as text (the test must not recurse either).
std::string manifestWithNegChain(size_t levels) {
  std::string expr;
  for (size_t i = 0; i < levels; ++i)
    expr += "[\"neg\", ";
  expr += "1.0";
  expr.append(levels, ']');
  std::string text = flashManifestJson();
  std::string old = R"(["sub", 1.0, ["pow", "beta1", "step"]])";
  size_t at = text.find(old);
  EXPECT_NE(at, std::string::npos);
  return text.replace(at, old.size(), expr);
}

// 13,000 levels crashed parseExpr with SIGSEGV (issue #26); 20,000 are
// refused, naming the file and the field at the 2049th level.
TEST(Manifest, DeepUniformExpressionIsRefused) {
  std::string text = manifestWithNegChain(20000);
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_parse(text.data(), text.size(), "deep.manifest.json",
                                &m),
            QOPT_ERROR_MANIFEST);
  EXPECT_EQ(m, nullptr);
  std::string field = "uniforms[0].expr";
  for (int i = 0; i < 2048; ++i)
    field += "[1]";
  // The message names the field by its 6000-character path: it keeps its
  // first 640 and last 384 characters (runtime.h, qopt_last_error).
  std::string full = "deep.manifest.json: field '" + field +
                     "': the expression nests deeper than 2048 levels";
  ASSERT_GT(full.size(), 1024u);
  EXPECT_EQ(std::string(qopt_last_error()),
            full.substr(0, 640) + " ... (" + std::to_string(full.size() - 1024) +
                " characters left out) ... " + full.substr(full.size() - 384));
  EXPECT_LE(std::strlen(qopt_last_error()), 1100u);
}

TEST(Manifest, UniformExpressionOf2048LevelsIsAccepted) {
  // 2047 negations of 1.0: 2048 levels, an odd count of signs.
  qopt_manifest *m = parseOrDie(manifestWithNegChain(2047));
  ASSERT_NE(m, nullptr);
  float out[1] = {0};
  ASSERT_EQ(qopt_manifest_evaluate_uniforms(m, nullptr, 0, 1, out, 1),
            QOPT_SUCCESS)
      << qopt_last_error();
  EXPECT_EQ(out[0], -1.0f);
  qopt_manifest_destroy(m);
}

// A number beyond float64 was "internal error: [json.exception.out_of_range.406]"
// with no position (issue #26).
TEST(Manifest, NumberOverflowGivesLineAndColumn) {
  std::string text = "{\n  \"format\": \"qopt-manifest\",\n"
                     "  \"hypers\": [{\"name\": \"lr\", \"default\": 1e400}]\n}";
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_parse(text.data(), text.size(), "big.json", &m),
            QOPT_ERROR_MANIFEST);
  EXPECT_EQ(m, nullptr);
  // Line 3: `  "hypers": [{"name": "lr", "default": 1e400}]`, 1e400 at column 40.
  EXPECT_EQ(std::string(qopt_last_error()),
            "big.json:3:40: invalid JSON: number overflow parsing '1e400'");
}

TEST(Manifest, NotAnObject) {
  std::string text = "[1, 2]";
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_parse(text.data(), text.size(), "list.json", &m),
            QOPT_ERROR_MANIFEST);
  EXPECT_NE(std::string(qopt_last_error()).find("list.json: the manifest must be a JSON object"),
            std::string::npos)
      << qopt_last_error();
}

TEST(Manifest, MissingFileIsAnIoError) {
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_load("/nonexistent/dir/x.manifest.json", &m),
            QOPT_ERROR_IO);
  EXPECT_NE(std::string(qopt_last_error()).find("/nonexistent/dir/x.manifest.json"),
            std::string::npos);
}

TEST(Manifest, LoadFromFileNamesTheFileInErrors) {
  std::string dir = makeTempDir();
  json j = json::parse(sgdManifestJson());
  j["streams"][1]["dtype"] = "bf16";
  writeFile(dir + "/k.manifest.json", j.dump());
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_load((dir + "/k.manifest.json").c_str(), &m),
            QOPT_ERROR_MANIFEST);
  std::string msg = qopt_last_error();
  EXPECT_EQ(msg.rfind(dir + "/k.manifest.json: field 'streams[1].dtype'", 0), 0u)
      << msg;
}

TEST(Manifest, NullArgumentsAreRejected) {
  qopt_manifest *m = nullptr;
  EXPECT_EQ(qopt_manifest_parse(nullptr, 0, "x", &m), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(qopt_last_error(), "json is NULL");
  EXPECT_EQ(qopt_manifest_get_info(nullptr, nullptr), QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qopt_manifest_destroy(nullptr), QOPT_SUCCESS);
}

TEST(Manifest, KeyGivenTwiceIsRefused) {
  // nlohmann keeps the last of two equal keys; a manifest saying two things
  // is refused, naming the key by its path.
  std::string base = sgdManifestJson();
  struct Case {
    std::string from, to, field;
  } cases[] = {
      {"\"version\": 1", "\"version\": 7, \"version\": 1", "version"},
      {"\"tile_elements\"", "\"tile_elements\": 1, \"tile_elements\"",
       "launch.tile_elements"},
      {"\"access\": \"read\"", "\"access\": \"read\", \"access\": \"read\"",
       "streams[1].access"},
  };
  for (const Case &c : cases) {
    std::string text = base;
    size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    qopt_manifest *m = nullptr;
    EXPECT_EQ(qopt_manifest_parse(text.data(), text.size(), "dup.json", &m),
              QOPT_ERROR_MANIFEST)
        << c.field;
    EXPECT_EQ(m, nullptr);
    EXPECT_EQ(std::string(qopt_last_error()),
              "dup.json: field '" + c.field +
                  "': given twice (a key appears once in an object)");
  }
}

TEST(Manifest, UnknownEnumValuesAreRefused) {
  // Callers through an FFI pass plain ints: a value that is none of the
  // enumerators is refused before it is used.
  qopt_manifest *m = parseOrDie(sgdManifestJson());
  qopt_registry *r = nullptr;
  ASSERT_EQ(qopt_registry_create(&r), QOPT_SUCCESS);
  const char ptx[] = "// ptx";
  for (int bad : {-1, 7, 77}) {
    auto format = static_cast<qopt_binary_format>(bad);
    EXPECT_EQ(qopt_registry_add_manifest(r, m, format, ptx, sizeof ptx),
              QOPT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(qopt_last_error()),
              "unknown binary format " + std::to_string(bad));
    EXPECT_EQ(qopt_registry_add_embedded(r, "k", "{}", 2, nullptr, format, ptx,
                                         sizeof ptx),
              QOPT_ERROR_INVALID_ARGUMENT);
    size_t n = 9;
    ASSERT_EQ(qopt_registry_count(r, &n), QOPT_SUCCESS);
    EXPECT_EQ(n, 0u);
    size_t bytes = 0;
    EXPECT_EQ(qopt_dtype_size(static_cast<qopt_dtype>(bad), &bytes),
              QOPT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(qopt_last_error()), "unknown dtype " + std::to_string(bad));
    const char *name = nullptr;
    EXPECT_EQ(qopt_dtype_name(static_cast<qopt_dtype>(bad), &name),
              QOPT_ERROR_INVALID_ARGUMENT);
    qopt_context *ctx = nullptr;
    EXPECT_EQ(qopt_context_create(static_cast<qopt_backend>(bad), 0, &ctx),
              QOPT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(qopt_last_error()), "unknown backend " + std::to_string(bad));
    EXPECT_EQ(ctx, nullptr);
  }
  qopt_context *host = nullptr;
  ASSERT_EQ(qopt_context_create(QOPT_BACKEND_HOST, 0, &host), QOPT_SUCCESS);
  qopt_kernel *k = nullptr;
  EXPECT_EQ(qopt_kernel_create_from_image(host, m, static_cast<qopt_binary_format>(77),
                                          ptx, sizeof ptx, &k),
            QOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(k, nullptr);
  qopt_context_destroy(host);
  qopt_registry_destroy(r);
  qopt_manifest_destroy(m);
}

} // namespace
