// Topology files (SCALE-Sim's CSV format) and `tpusim run --topology`: the GEMM each layer
// becomes (the same as SCALE-Sim's), runs bit-exact on the chip, the same counters on both
// engines, and clear errors for bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/run/topology.h"
#include "tests/host/cli/cli_fixture.h"

namespace tpu::test {
namespace {

class TopologyCliTest : public CliFixture {
 protected:
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(P(name)) << text;
    return P(name);
  }
  static constexpr const char* kHeader =
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num "
      "Filter, Strides,\n";
};

TEST_F(TopologyCliTest, LayersBecomeTheGemmsScaleSimUses) {
  const auto lenet = compiler::ReadTopologyCsv(TPUSIM_SOURCE_DIR "/models/topologies/lenet.csv");
  // ../shared/peers/scalesim/README.txt: conv1 576x25x6, conv2 64x150x16, fc1 1x256x120, ...
  const std::vector<std::array<int64_t, 3>> want = {
      {576, 25, 6}, {64, 150, 16}, {1, 256, 120}, {1, 120, 84}, {1, 84, 10}};
  ASSERT_EQ(lenet.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto g = lenet[i].Gemm();
    EXPECT_EQ((std::array<int64_t, 3>{g.m, g.k, g.n}), want[i]) << lenet[i].name;
  }
  // Output size ceil((H - F + S) / S): AlexNet's conv1, 227 with 11 x 11 at stride 4 -> 55.
  const auto alex = compiler::ReadTopologyCsv(TPUSIM_SOURCE_DIR "/models/topologies/alexnet.csv");
  EXPECT_EQ(alex[0].OfmapH(), 55);
  const auto dark = compiler::ReadTopologyCsv(TPUSIM_SOURCE_DIR "/models/topologies/darknet19.csv");
  ASSERT_EQ(dark.size(), 19u);
  EXPECT_EQ(dark[0].Gemm().m, 256 * 256);
  EXPECT_EQ(dark.back().Gemm().n, 1000);
}

TEST_F(TopologyCliTest, GemmListsRunEachRowAsADenseLayerOnABatchOfItsM) {
  // SCALE-Sim v2's rows are name, M, N, K (topology_utils.py load_arrays_gemm): C (M x N) =
  // A (M x K) x B (K x N); its gemm_shapes.csv names this row after M x K x N.
  const std::string topo =
      Write("g.csv", "Layer Name, M, N, K,\ngemm_100x150x16, 100, 16, 150,\nfc, 7, 5, 16,\n");
  const auto layers = compiler::ReadTopologyCsv(topo);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_TRUE(layers[0].IsDense());
  EXPECT_EQ(layers[0].batch, 100);
  const auto g = layers[0].Gemm();  // one row of the batch
  EXPECT_EQ((std::array<int64_t, 3>{g.m * layers[0].batch, g.k, g.n}),
            (std::array<int64_t, 3>{100, 150, 16}));
  std::map<std::string, nlohmann::json> runs;
  for (const std::string engine : {"rtl", "fast"}) {
    const Outcome o = Run("run --topology " + topo + " --config teach-4 --engine " + engine +
                          " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("(2 GEMMs, each on a batch of its M)"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("gemm_100x150x16 (dense, maps on chip)"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("\n  per run "), std::string::npos) << o.out;  // not per image
    runs[engine] = nlohmann::json::parse(Slurp(P(engine + ".json")));
    for (const char* k : {"engine", "wall_seconds", "revision"}) runs[engine].erase(k);
  }
  const nlohmann::json& j = runs["rtl"];
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_TRUE(j["gemm_list"].get<bool>());
  EXPECT_EQ(j["images"], 1);  // the list runs once
  EXPECT_EQ(j["macs"], 100 * 150 * 16 + 7 * 16 * 5);
  EXPECT_EQ(runs["rtl"], runs["fast"]) << "the engines disagree on the GEMM list";
  // The batch's rows stream through each weight tile as one matmul: on small-16 the 100 x
  // 150 x 16 GEMM is 10 weight tiles, so its program holds 10 matmuls besides the reads and
  // activates; a matmul per row (the model's input laid out as packed pixels) would be 1,000.
  const Outcome s16 =
      Run("run --topology " + topo + " --config small-16 --engine fast --json " + P("s16.json"));
  ASSERT_EQ(s16.exit_code, 0) << s16.err;
  const auto l0 = nlohmann::json::parse(Slurp(P("s16.json")))["layers"][0];
  EXPECT_EQ(l0["counters"]["weight_tiles"], 10);
  EXPECT_LT(l0["counters"]["instructions"].get<int>(), 100) << l0["counters"];
  ExpectError("run --topology " + topo + " --batch 2", 2,
              "--batch 2 does not apply to layer 'gemm_100x150x16': a GEMM's batch is its M (100)");
}

// A list whose rows chain (one M, each K the previous N) is one application, like TPU v1's
// MLPs (models/tpu-v1-apps): one whole-network program, its input over the host link once,
// its activations kept in the unified buffer, a row per layer; bit-exact on both engines.
TEST_F(TopologyCliTest, ChainedGemmListsRunAsOneNetworkProgram) {
  const std::string topo = Write("chain.csv",
                                 "Layer name, M, N, K,\nfc1, 24, 20, 30,\n"
                                 "fc2, 24, 12, 20,\nfc3, 24, 6, 12,\n");
  std::map<std::string, nlohmann::json> runs;
  for (const std::string engine : {"rtl", "fast"}) {
    const Outcome o = Run("run --topology " + topo + " --config teach-4 --engine " + engine +
                          " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("whole network, one program per batch: fc1 .. fc3"), std::string::npos)
        << o.out;
    runs[engine] = nlohmann::json::parse(Slurp(P(engine + ".json")));
    for (const char* k : {"engine", "wall_seconds", "revision"}) runs[engine].erase(k);
  }
  const nlohmann::json& j = runs["rtl"];
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["images"], 1);
  EXPECT_EQ(j["macs"], 24 * (30 * 20 + 20 * 12 + 12 * 6));
  ASSERT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["layers"][2]["name"], "fc3");
  EXPECT_GT(j["counters"]["host_bytes_written"].get<int64_t>(), 0) << "the output goes back";
  EXPECT_EQ(runs["rtl"], runs["fast"]) << "the engines disagree on the chained list";
  // With --maps host each row runs on its own, as a list that does not chain does.
  const Outcome host =
      Run("run --topology " + topo + " --config teach-4 --engine fast --maps host");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_EQ(host.out.find("whole network"), std::string::npos) << host.out;
}

TEST_F(TopologyCliTest, RunsBitExactWithTheSameCountersOnBothEngines) {
  const std::string topo = Write("t.csv", std::string(kHeader) +
                                              "wide, 6, 7, 3, 2, 5, 11, 2,\n"
                                              "dense, 1, 1, 1, 1, 40, 9, 1,\n");
  const Outcome rtl = Run("run --topology " + topo + " --config teach-4 --json " + P("rtl.json"));
  ASSERT_EQ(rtl.exit_code, 0) << rtl.err;
  EXPECT_NE(rtl.out.find("bit-exact  yes"), std::string::npos) << rtl.out;
  const Outcome fast =
      Run("run --topology " + topo + " --config teach-4 --engine fast --json " + P("fast.json"));
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  auto a = nlohmann::json::parse(Slurp(P("rtl.json")));
  auto b = nlohmann::json::parse(Slurp(P("fast.json")));
  EXPECT_EQ(a["engine"], "rtl");
  ASSERT_EQ(a["layers"].size(), 2u);
  // ceil((6 - 3 + 2) / 2) x ceil((7 - 2 + 2) / 2) = 3 x 4 outputs, K = 3 x 2 x 5, N = 11.
  EXPECT_EQ(a["macs"], 12 * 30 * 11 + 40 * 9);
  EXPECT_TRUE(a["topology"].get<bool>());
  EXPECT_TRUE(a["bit_exact"].get<bool>());
  for (auto* j : {&a, &b}) {
    for (const char* k : {"engine", "wall_seconds", "revision"}) j->erase(k);
  }
  EXPECT_EQ(a, b) << "the engines disagree on the topology run";
  // Timing-only gives the same counters without values.
  const Outcome t = Run("run --topology " + topo +
                        " --config teach-4 --engine fast --timing-only --json " + P("t.json"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  auto c = nlohmann::json::parse(Slurp(P("t.json")));
  EXPECT_EQ(c["cycles"], b["cycles"]);
  EXPECT_TRUE(c["bit_exact"].is_null());
}

// On a bf16 chip a topology's layers run in bfloat16 (random float weights and inputs
// rounded to bfloat16, as a bf16 chip runs a model's fp32 weights): each way a layer can run
// (a network program forming its windows, im2col GEMM programs, a chained GEMM list as one
// program) bit-exact against the CPU bf16 reference on both engines, with the same counters,
// and the same tiles as on an int8 chip, each weight two bytes.
TEST_F(TopologyCliTest, BfloatChipsRunTheLayersInBfloat16) {
  const std::string conv = Write("t.csv", std::string(kHeader) +
                                              "wide, 6, 7, 3, 2, 5, 11, 2,\n"
                                              "dense, 1, 1, 1, 1, 40, 9, 1,\n");
  const std::string chain =
      Write("chain.csv", "Layer name, M, N, K,\nfc1, 24, 20, 30,\nfc2, 24, 12, 20,\n");
  for (const auto& [topo, extra] : std::vector<std::pair<std::string, std::string>>{
           {conv, ""}, {conv, " --host-im2col"}, {chain, ""}}) {
    std::map<std::string, nlohmann::json> runs;
    for (const std::string dtype : {"bf16", "int8"}) {
      for (const std::string engine : {"rtl", "fast"}) {
        const std::string json = P(dtype + engine + ".json");
        const Outcome o =
            Run("run --topology " + topo + extra + " --config teach-4 --set dtype=" + dtype +
                " --engine " + engine + " --json " + json);
        ASSERT_EQ(o.exit_code, 0) << extra << o.err;
        EXPECT_NE(o.out.find("bit-exact  yes (every layer's " + dtype + " outputs"),
                  std::string::npos)
            << extra << o.out;
        runs[dtype + engine] = nlohmann::json::parse(Slurp(json));
        for (const char* k : {"engine", "wall_seconds", "revision"}) runs[dtype + engine].erase(k);
      }
    }
    const nlohmann::json& bf = runs["bf16rtl"];
    EXPECT_EQ(bf["config"]["dtype"], "bf16");
    EXPECT_TRUE(bf["bit_exact"].get<bool>()) << topo << extra;
    EXPECT_EQ(bf, runs["bf16fast"]) << "the engines disagree on the bf16 run" << extra;
    const nlohmann::json& i8 = runs["int8fast"]["counters"];
    EXPECT_EQ(bf["counters"]["weight_tiles"], i8["weight_tiles"]) << topo << extra;
    EXPECT_EQ(bf["counters"]["weight_bytes_read"], 2 * i8["weight_bytes_read"].get<int64_t>())
        << topo << extra;
  }
}

// A batch smaller than the cores (one map on two cores) shares each layer's output-column
// tiles out over them (model parallel): bit-exact on both engines with equal reports, each
// core's row with the MACs of its tiles (wide: 11 filters, 3 tiles of 4 columns: 4 and 7
// filters), a layer of one tile on one core, and the chip's time shorter than the cores'
// together; not where the split's bound is no lower (a layer bound by the weight channel or
// the host link, which the cores share). With a map per core the batch is split
// instead (data parallel); the same holds in bf16.
TEST_F(TopologyCliTest, ABatchOfOneSharesTheOutputChannelsOutOverTheCores) {
  const std::string topo = Write("t.csv", std::string(kHeader) +
                                              "wide, 6, 7, 3, 2, 5, 11, 2,\n"
                                              "dense, 1, 1, 1, 1, 40, 9, 1,\n"
                                              "one, 5, 5, 3, 3, 3, 3, 1,\n");
  std::map<std::string, nlohmann::json> runs;
  for (const std::string engine : {"rtl", "fast"}) {
    const Outcome o = Run("run --topology " + topo + " --config teach-4 --set cores=2 --engine " +
                          engine + " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("bit-exact  yes"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("wide (windows, maps on chip, output channels over 2 cores)"),
              std::string::npos)
        << o.out;
    runs[engine] = nlohmann::json::parse(Slurp(P(engine + ".json")));
    for (const char* k : {"engine", "wall_seconds", "revision"}) runs[engine].erase(k);
  }
  EXPECT_EQ(runs["rtl"], runs["fast"]) << "the engines disagree on the split layers";
  const nlohmann::json& j = runs["rtl"];
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  const nlohmann::json& wide = j["layers"][0];
  ASSERT_EQ(wide["cores"].size(), 2u);
  EXPECT_EQ(wide["cores"][0]["macs"], 12 * 30 * 4);
  EXPECT_EQ(wide["cores"][1]["macs"], 12 * 30 * 7);
  EXPECT_EQ(wide["macs"], 12 * 30 * 11);
  // dense's 30 tiles are bound by the weight channel (a row a cycle), which the cores share:
  // split, its bound is no lower, so it stays whole.
  EXPECT_EQ(j["layers"][1]["cores"][1]["macs"], 0) << "bound by the shared weight channel";
  EXPECT_EQ(j["layers"][2]["cores"][1]["macs"], 0) << "one tile: one core";
  EXPECT_LT(j["chip_cycles"].get<int64_t>(), j["core_cycles"].get<int64_t>());
  // The CSV quotes the names, which hold commas: every line has the header's fields.
  const Outcome csv =
      Run("run --topology " + topo + " --config teach-4 --set cores=2 --csv " + P("t.csv.out"));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(Slurp(P("t.csv.out")));
  std::vector<size_t> fields;
  for (std::string line; std::getline(lines, line);) {
    size_t n = 1;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      n += ch == ',' && !quoted;
    }
    fields.push_back(n);
  }
  ASSERT_EQ(fields.size(), 1u + 3u * 3u) << "the header, and 3 layers of 2 core rows each";
  for (size_t n : fields) EXPECT_EQ(n, fields[0]);
  // A layer whose maps cross the one host link both ways (--maps host) is bound by it, and
  // both cores would read its whole input: its bound split is no lower, so it stays whole.
  const std::string flat =
      Write("flat.csv", std::string(kHeader) + "flat, 32, 32, 1, 1, 4, 8, 1,\n");
  for (const std::string maps : {"chip", "host"}) {
    const Outcome o = Run("run --topology " + flat + " --config teach-4 --set cores=2 --maps " +
                          maps + " --engine fast");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.find("output channels over 2 cores") != std::string::npos, maps == "chip")
        << o.out;
  }
  for (const std::string args : {" --batch 2", " --set dtype=bf16"}) {
    const Outcome o =
        Run("run --topology " + topo + " --config teach-4 --set cores=2" + args + " --engine fast");
    ASSERT_EQ(o.exit_code, 0) << args << o.err;
    EXPECT_NE(o.out.find("bit-exact  yes"), std::string::npos) << args << o.out;
    EXPECT_EQ(o.out.find("output channels over") != std::string::npos, args != " --batch 2")
        << args << o.out;
  }
}

// On a chip of two cores each layer's batch is split between them (data parallel): bit-exact
// on both engines with the same counters, each core's row with its share of the MACs (3
// maps: 1 and 2), the core rows adding up to the layer's, and the run's time (chip_cycles)
// shorter than the cores' cycles together.
TEST_F(TopologyCliTest, TwoCoresSplitEachLayersBatch) {
  const std::string topo = Write("t.csv", std::string(kHeader) +
                                              "wide, 6, 7, 3, 2, 5, 11, 2,\n"
                                              "dense, 1, 1, 1, 1, 40, 9, 1,\n");
  std::map<std::string, nlohmann::json> runs;
  for (const std::string engine : {"rtl", "fast"}) {
    const Outcome o = Run("run --topology " + topo + " --config teach-4 --set cores=2 --batch 3" +
                          " --engine " + engine + " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("bit-exact  yes"), std::string::npos) << o.out;
    runs[engine] = nlohmann::json::parse(Slurp(P(engine + ".json")));
  }
  const nlohmann::json& r = runs["rtl"];
  ASSERT_EQ(r["layers"].size(), 2u);
  const int64_t macs[2] = {12 * 30 * 11, 40 * 9};  // per map
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& l = r["layers"][i];
    ASSERT_EQ(l["cores"].size(), 2u) << l["name"];
    EXPECT_EQ(l["cores"][0]["macs"], macs[i]);
    EXPECT_EQ(l["cores"][1]["macs"], 2 * macs[i]);
    EXPECT_EQ(l["cores"][0]["counters"]["cycles"].get<int64_t>() +
                  l["cores"][1]["counters"]["cycles"].get<int64_t>(),
              l["counters"]["cycles"].get<int64_t>());
  }
  EXPECT_LT(r["chip_cycles"].get<int64_t>(), r["core_cycles"].get<int64_t>());
  for (auto& [name, j] : runs) {
    for (const char* k : {"engine", "wall_seconds", "revision"}) j.erase(k);
  }
  EXPECT_EQ(runs["rtl"], runs["fast"]) << "the engines disagree on two cores";
}

// On cores of two matrix units each layer's row has each unit's busy cycles (mxu_busy_o,
// observed on each core), each at most the cycles any unit is busy; the same on both
// engines (the rtl engine's 2 x 2 x 4 chip).
TEST_F(TopologyCliTest, EachMatrixUnitsBusyCyclesPerLayer) {
  const std::string topo = Write("t.csv", std::string(kHeader) + "wide, 6, 7, 3, 2, 5, 11, 2,\n");
  std::map<std::string, nlohmann::json> runs;
  for (const std::string engine : {"rtl", "fast"}) {
    const Outcome o = Run("run --topology " + topo +
                          " --config teach-4 --set cores=2 --set mxus_per_core=2 --batch 4" +
                          " --engine " + engine + " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("units busy"), std::string::npos) << o.out;
    runs[engine] = nlohmann::json::parse(Slurp(P(engine + ".json")));
  }
  const nlohmann::json& l = runs["fast"]["layers"][0];
  const auto busy = l["mxu_busy_cycles"].get<std::vector<uint64_t>>();
  ASSERT_EQ(busy.size(), 2u);
  const auto any = l["counters"]["busy_matrix"].get<uint64_t>();
  EXPECT_GT(busy[0], 0u);
  EXPECT_LE(std::max(busy[0], busy[1]), any);
  EXPECT_GE(busy[0] + busy[1], any);
  for (auto& [name, j] : runs) {
    for (const char* k : {"engine", "wall_seconds", "revision"}) j.erase(k);
  }
  EXPECT_EQ(runs["rtl"], runs["fast"]) << "the engines disagree";
}

// --batch streams B maps through each layer's weight tiles; --maps chip (the default) keeps
// each layer's maps in the unified buffer, so the host link carries only weights' parameters
// and nothing of the maps; both engines agree and every output is checked.
TEST_F(TopologyCliTest, BatchesAndMapsOnChip) {
  const std::string lenet = TPUSIM_SOURCE_DIR "/models/topologies/lenet.csv";
  auto run = [&](const std::string& args, const std::string& json) {
    const Outcome o =
        Run("run --topology " + lenet + " --config lab-8 " + args + " --json " + json);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    return nlohmann::json::parse(Slurp(json));
  };
  auto rtl = run("--batch 3", P("rtl.json"));
  auto fast = run("--batch 3 --engine fast", P("fast.json"));
  auto host = run("--batch 3 --engine fast --maps host", P("host.json"));
  auto one = run("--engine fast", P("one.json"));
  EXPECT_TRUE(rtl["bit_exact"].get<bool>());
  EXPECT_TRUE(host["bit_exact"].get<bool>());
  EXPECT_EQ(rtl["images"], 3);
  EXPECT_EQ(rtl["macs"], 3 * one["macs"].get<int64_t>());
  for (const auto& l : rtl["layers"])
    EXPECT_NE(l["name"].get<std::string>().find("maps on chip"), std::string::npos) << l["name"];
  // On chip, the maps never cross the host link: what it reads is the parameter sets.
  EXPECT_LT(fast["counters"]["host_bytes_read"].get<int64_t>(),
            host["counters"]["host_bytes_read"].get<int64_t>() - 3 * 28 * 28);
  EXPECT_EQ(fast["counters"]["host_bytes_written"], 0);
  EXPECT_LT(fast["cycles"].get<int64_t>(), host["cycles"].get<int64_t>());
  for (auto* j : {&rtl, &fast}) {
    for (const char* k : {"engine", "wall_seconds", "revision"}) j->erase(k);
  }
  EXPECT_EQ(rtl, fast) << "the engines disagree with the maps on chip";
  ExpectError("run --maps host --images 2", 2, "--maps applies with --topology only");
  ExpectError("run --topology " + lenet + " --maps disk", 2, "--maps");
}

// The attainable bound of each layer (host/compiler/graph_bound.h) against the
// weight-stationary mapping's count derived here from the file alone: every K-tile x
// N-tile pair of a layer streams the batch's M rows, and no tile streams fewer than N
// cycles. With the maps on chip and 8 maps, Darknet-19's array term is 168,960 cycles per
// image, and the chip's cycles are never below the bound.
TEST_F(TopologyCliTest, TheBoundIsTheWeightStationaryMapping) {
  const std::string dark = TPUSIM_SOURCE_DIR "/models/topologies/darknet19.csv";
  const Outcome o =
      Run("run --topology " + dark +
          " --config tpu-v1 --engine fast --timing-only --batch 8 -q --json " + P("d.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("d.json")));
  const auto layers = compiler::ReadTopologyCsv(dark);
  ASSERT_EQ(j["layers"].size(), layers.size());
  double array = 0;
  std::vector<double> tiles, rows;  // each layer's weight tiles, and the rows each streams
  for (size_t i = 0; i < layers.size(); ++i) {
    const gemm::GemmShape g = layers[i].Gemm();
    tiles.push_back(static_cast<double>(((g.k + 255) / 256) * ((g.n + 255) / 256)));
    rows.push_back(static_cast<double>(g.m * 8));
    const double mapped = tiles.back() * std::max(rows.back(), 256.0);
    const auto& l = j["layers"][i];
    EXPECT_EQ(l["bound"]["array"].get<double>(), mapped) << l["name"];
    EXPECT_EQ(l["m"], g.m * 8);
    EXPECT_EQ(l["k"], g.k);
    EXPECT_EQ(l["n"], g.n);
    EXPECT_GE(l["cycles_over_bound"].get<double>(), 1.0) << l["name"];
    array += mapped;
  }
  EXPECT_EQ(array / 8, 168960);
  EXPECT_EQ(j["bound"]["array"].get<double>(), array);
  // The 4-tile FIFO cannot hide the weight-bound layers' loads (conv14 .. conv19) behind the
  // array-bound ones: the array and the weights as one pipeline take longer than either.
  EXPECT_EQ(j["binds"], "array+weights");
  EXPECT_GT(j["bound"]["pipeline"].get<double>(), j["bound"]["weights"].get<double>());
  EXPECT_GT(j["bound"]["pipeline"].get<double>(), array);
  EXPECT_GE(j["cycles"].get<double>(), j["bound_cycles"].get<double>());

  // Whatever the order and the grouping of images, as long as each layer of an image runs
  // after the layer before has finished for that image (docs/performance.md, "No
  // layer-at-a-time schedule reaches 190,000"): the image whose layers before layer s finish
  // last does so after every image's rows of those layers have streamed (one row a cycle),
  // and then needs every tile of layers s .. 19, of which at most the FIFO's tiles, the
  // shadow registers' and one on its way can already be on chip; each of the others takes
  // 256 x 256 bytes over the weight memory's bytes per cycle.
  const config::TpuConfig v1 = config::LoadConfig("tpu-v1");
  const double load = v1.CoreWeightRowCycles() * v1.array_dim;  // a tile's 256 rows
  const int on_chip = v1.weight_fifo_tiles + 2;
  double schedule_free = 0, head = 0;
  double tail = std::accumulate(tiles.begin(), tiles.end(), 0.0);
  for (size_t s = 0; s < layers.size(); ++s) {  // split before layer s
    schedule_free = std::max(schedule_free, head + std::max(0.0, tail - on_chip) * load);
    head += tiles[s] * rows[s];
    tail -= tiles[s];
  }
  EXPECT_NEAR(schedule_free / 8, 194389.33, 0.01);  // split before conv14: 248 tiles
  EXPECT_GE(j["cycles"].get<double>(), schedule_free);
  EXPECT_GE(j["bound"]["pipeline"].get<double>(), schedule_free);
}

TEST_F(TopologyCliTest, LayersLargerThanTheBuffersAreSplit) {
  // On teach-4 (1,024 accumulator rows, 16,384 unified-buffer rows, 32 parameter sets):
  // 300 filters are 75 column tiles, run in 3 groups of at most 32; with K = 18 (5 row
  // blocks) a chunk holds 16384 / (5 + 32) = 442 rows, so the 38 x 38 = 1,444 output rows
  // take 4 chunks.
  const std::string topo =
      Write("big.csv", std::string(kHeader) + "big, 40, 40, 3, 3, 2, 300, 1,\n");
  const Outcome o =
      Run("run --topology " + topo + " --config teach-4 --engine fast --json " + P("b.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("b.json")));
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["macs"], 1444 * 18 * 300);
}

TEST_F(TopologyCliTest, WeightsLargerThanTheWeightMemoryAreSplit) {
  // K = 400 on teach-4 is 100 weight tiles of 16 bytes per column of 4 outputs: 8,192 bytes
  // of weight memory hold 5 such columns, so the 16 columns run in 4 groups (they ran as one
  // and stopped on the weight image before); 1,024 bytes cannot hold one column.
  const std::string topo = Write("fc.csv", std::string(kHeader) + "fc, 1, 1, 1, 1, 400, 64, 1,\n");
  const std::string run = "run --topology " + topo + " --config teach-4 --host-im2col ";
  const Outcome o = Run(run + "--set weight_mem_bytes=8192 --json " + P("w.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("w.json")));
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["macs"], 400 * 64);
  EXPECT_EQ(j["layers"][0]["counters"]["weight_bytes_read"], 400 * 64);  // each tile once
  ExpectError(run + "--set weight_mem_bytes=1024", 2,
              "layer 'fc' (K = 400) does not fit the chip: one column of its weight tiles is 1600 "
              "bytes and the weight memory holds 1024; raise weight_mem_bytes");
}

TEST_F(TopologyCliTest, Im2colRowsBeyondHostMemoryRunInGroupsThatFit) {
  // 900 im2col rows of K = 27 on teach-4 (7 rows of 4 bytes each, and 2 output rows): host
  // memory of 16 KiB holds a few hundred of them at once, so the layer runs in groups of
  // rows, each a program of its own (it stopped with "needs ... bytes of host memory").
  const std::string topo = Write("c.csv", std::string(kHeader) + "c, 32, 32, 3, 3, 3, 8, 1,\n");
  const Outcome o = Run("run --topology " + topo + " --config teach-4 --host-im2col --set " +
                        "host_mem_bytes=16384 --json " + P("g.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("g.json")));
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["macs"], 900 * 27 * 8);
}

TEST_F(TopologyCliTest, BadFilesGetOneClearLineAndNoOutput) {
  const std::string json = P("never.json");
  auto bad = [&](const std::string& name, const std::string& text, const std::string& fragment) {
    SCOPED_TRACE(name);
    ExpectError("run --topology " + Write(name, text) + " --engine fast --json " + json, 2,
                fragment);
    EXPECT_FALSE(std::ifstream(json).good()) << "no output file after an error";
  };
  bad("other.csv", "Name, M, N, K,\ng, 1, 2, 3,\n", "other.csv:1: not a SCALE-Sim topology");
  bad("gemmhead.csv", "Layer Name, M, N, X,\ng, 1, 2, 3,\n",
      "gemmhead.csv:1: column 4 of the header is 'X', expected 'K'");
  bad("gemmrow.csv", "Layer Name, M, N, K,\ng, 1, 2,\n",
      "gemmrow.csv:2: the row has 3 fields; column 'K' is missing");
  bad("gemmzero.csv", "Layer Name, M, N, K,\ng, 0, 2, 3,\n",
      "gemmzero.csv:2: '0' in column 'M' of layer 'g' is not a positive integer");
  bad("missing.csv", std::string(kHeader) + "c1, 8, 8, 3, 3, 1,\n",
      "missing.csv:2: the row has 6 fields; column 'Num Filter' is missing");
  bad("word.csv", std::string(kHeader) + "c1, 8, eight, 3, 3, 1, 4, 1,\n",
      "word.csv:2: 'eight' in column 'IFMAP Width' of layer 'c1' is not a positive integer");
  bad("zero.csv", std::string(kHeader) + "c1, 8, 8, 3, 3, 1, 4, 0,\n", "column 'Strides'");
  bad("filter.csv", std::string(kHeader) + "c1, 2, 8, 3, 3, 1, 4, 1,\n",
      "filter.csv:2: layer 'c1' has a 3 x 3 filter on a 2 x 8 IFMAP");
  // A layer no machine holds (it ended in std::bad_alloc, naming nothing).
  bad("huge.csv",
      std::string(kHeader) + "small, 8, 8, 3, 3, 1, 4, 1,\nhuge, 20000, 20000, 3, 3, 512, 64, 1,\n",
      "layer 'huge' (20000 x 20000 x 512 input, 64 filters of 3 x 3, batch 1) needs at least "
      "230.4 GB to simulate");
  bad("empty.csv", "", "is empty");
  bad("header.csv", kHeader, "has no layers");
  ExpectError("run --topology " + P("nope.csv"), 2, "cannot read topology file");
  ExpectError(
      std::string("run --topology ") + TPUSIM_SOURCE_DIR "/models/topologies/lenet.csv --images 5",
      2, "--images does not apply with --topology");
}

}  // namespace
}  // namespace tpu::test
