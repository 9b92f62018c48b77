// `tpusim run`, `tpusim compile` and `tpusim compare` as a user runs them: reports whose
// per-layer numbers add up to the totals, CSV, bad inputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/data/mnist.h"
#include "host/nn/inputs.h"
#include "host/nn/int8_net.h"
#include "host/nn/model.h"
#include "host/nn/quantize.h"
#include "tests/host/cli/cli_fixture.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::test {
namespace {

class RunCliTest : public CliFixture {
 protected:
  // The model on the 4 x 4 bf16 chip, 3 synthetic inputs: bit-exact on the rtl and fast
  // engines, whose JSON reports are the same apart from the engine and the wall time.
  void ExpectBf16EnginesAgree(const std::string& model) {
    nlohmann::json j[2];
    for (int e = 0; e < 2; ++e) {
      const std::string engine = e == 0 ? "rtl" : "fast";
      const Outcome o = Run("run --model " + model + " --engine " + engine +
                            " --config small-16 --set array_dim=4 --set dtype=bf16 --synthetic 3 "
                            "--json " +
                            P(engine + ".json"));
      ASSERT_EQ(o.exit_code, 0) << o.err;
      j[e] = nlohmann::json::parse(Slurp(P(engine + ".json")));
      EXPECT_TRUE(j[e]["bit_exact"].get<bool>()) << o.out;
      for (const char* key : {"engine", "wall_seconds"}) j[e].erase(key);
    }
    EXPECT_EQ(j[0].dump(), j[1].dump());
  }
  // `command` (LeNet, --json r.json) reports a row per layer with TPU v1's categories and
  // the bound (LayerRowsHaveCategoriesAndBounds).
  void ExpectCategoriesAndBounds(const std::string& command);
};

TEST_F(RunCliTest, ReportLayersAddUpToTheTotals) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  // Layer jobs, so that there are rows to add up (the whole network is one row).
  const Outcome o = Run("run --images 40 --batch 20 --host-im2col --json " + P("r.json") +
                        " --csv " + P("r.csv"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("bit-exact  yes"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("plan       layer jobs (im2col on the host)"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  for (const char* key : {"accuracy", "images", "bit_exact", "cycles", "macs", "ops_per_cycle",
                          "utilization", "energy_pj", "layers"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["images"], 40);
  ASSERT_EQ(j["layers"].size(), 5u);
  uint64_t cycles = 0, macs = 0;
  double energy = 0;
  for (const auto& l : j["layers"]) {
    EXPECT_TRUE(l.contains("name"));
    cycles += l["cycles"].get<uint64_t>();
    macs += l["macs"].get<uint64_t>();
    energy += l["energy_pj"].get<double>();
    double parts = 0;
    for (const auto& [k, v] : l["energy_components_pj"].items()) parts += v.get<double>();
    EXPECT_NEAR(parts, l["energy_pj"].get<double>(), 1e-6 * parts);
  }
  EXPECT_EQ(cycles, j["cycles"].get<uint64_t>());
  EXPECT_EQ(macs, j["macs"].get<uint64_t>());
  EXPECT_NEAR(energy, j["energy_pj"].get<double>(), 1e-6 * energy);
  const std::string csv = Slurp(P("r.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6);  // header + 5 layers
  EXPECT_EQ(csv.rfind("layer,macs,cycles,", 0), 0u);
}

// A chip of two cores (--set cores=2): each core a share of every batch; the report's rows
// count both cores' cycles, chip_cycles the run's, each core's counters under "cores"; the
// slices of the run merge into the same report.
TEST_F(RunCliTest, TwoCoresReportEachCoreAndMergeFromSlices) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string base = "run --engine fast --images 64 --batch 16 --set cores=2 -q --json ";
  ASSERT_EQ(Run(base + P("two.json") + " --csv " + P("two.csv")).exit_code, 0);
  ASSERT_EQ(Run("run --engine fast --images 64 --batch 16 -q --json " + P("one.json")).exit_code,
            0);
  const auto two = nlohmann::json::parse(Slurp(P("two.json")));
  const auto one = nlohmann::json::parse(Slurp(P("one.json")));
  EXPECT_TRUE(two["bit_exact"].get<bool>());
  EXPECT_FALSE(one.contains("cores"));
  EXPECT_EQ(one["chip_cycles"], one["cycles"]);
  ASSERT_EQ(two["cores"].size(), 2u);
  uint64_t sum = 0, most = 0;
  for (const auto& c : two["cores"]) {
    const uint64_t cycles = c["counters"]["cycles"].get<uint64_t>();
    sum += cycles;
    most = std::max(most, cycles);
  }
  EXPECT_EQ(sum, two["core_cycles"].get<uint64_t>());  // the rows count every core's cycles
  EXPECT_EQ(two["cycles"], two["chip_cycles"]);        // the headline is the chip's time
  EXPECT_FALSE(one.contains("core_cycles"));
  EXPECT_LE(most, two["chip_cycles"].get<uint64_t>());  // each run ends with its last core
  EXPECT_LT(two["chip_cycles"].get<uint64_t>(), one["chip_cycles"].get<uint64_t>());
  EXPECT_NE(two["plan"].get<std::string>().find("on 2 cores"), std::string::npos);
  // Each layer's row has a row per core: each core's half of the images' MACs, and counters
  // that add up to the layer's, counter by counter; each core's totals are its rows' sums.
  std::vector<nlohmann::json> core_sums(2, nlohmann::json::object());
  for (const auto& layer : two["layers"]) {
    ASSERT_EQ(layer["cores"].size(), 2u) << layer["name"];
    EXPECT_EQ(layer["cores"][0]["macs"], layer["cores"][1]["macs"]) << layer["name"];
    EXPECT_EQ(layer["cores"][0]["macs"].get<int64_t>() * 2, layer["macs"].get<int64_t>());
    for (const auto& [name, value] : layer["counters"].items()) {
      const uint64_t a = layer["cores"][0]["counters"][name].get<uint64_t>();
      const uint64_t b = layer["cores"][1]["counters"][name].get<uint64_t>();
      EXPECT_EQ(a + b, value.get<uint64_t>()) << layer["name"] << " " << name;
      for (size_t c = 0; c < 2; ++c)
        core_sums[c][name] = core_sums[c].value(name, uint64_t{0}) + (c == 0 ? a : b);
    }
    EXPECT_GT(layer["cores"][1]["cycles"].get<uint64_t>(), 0u) << layer["name"];
  }
  for (size_t c = 0; c < 2; ++c) EXPECT_EQ(two["cores"][c]["counters"], core_sums[c]);
  const std::string csv = Slurp(P("two.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 5 * 3);  // header, layers, cores
  EXPECT_NE(csv.find(",core\n"), std::string::npos);
  EXPECT_NE(csv.find(",1\n"), std::string::npos);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(
        Run(base + P("s" + std::to_string(i) + ".json") + " --shard " + std::to_string(i) + "/2")
            .exit_code,
        0);
  }
  ASSERT_EQ(
      Run("merge " + P("s0.json") + " " + P("s1.json") + " -q --json " + P("m.json")).exit_code, 0);
  auto merged = nlohmann::json::parse(Slurp(P("m.json"))), single = two;
  for (auto* r : {&merged, &single}) r->erase("wall_seconds");
  EXPECT_EQ(merged, single);
}

TEST_F(RunCliTest, EnergyTableOverrideChangesTheEnergy) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  std::ofstream(P("zero-dram.json")) << R"({"name": "no-dram", "dram_64bit_access_pj": 0})";
  ASSERT_EQ(Run("run --images 8 --batch 8 -q --json " + P("a.json")).exit_code, 0);
  ASSERT_EQ(
      Run("run --images 8 --batch 8 -q --energy " + P("zero-dram.json") + " --json " + P("b.json"))
          .exit_code,
      0);
  const auto a = nlohmann::json::parse(Slurp(P("a.json")));
  const auto b = nlohmann::json::parse(Slurp(P("b.json")));
  EXPECT_EQ(b["energy_components_pj"]["dram"].get<double>(), 0.0);
  EXPECT_NEAR(a["energy_pj"].get<double>() - b["energy_pj"].get<double>(),
              a["energy_components_pj"]["dram"].get<double>(), 1e-3);
  EXPECT_EQ(a["cycles"], b["cycles"]);
}

TEST_F(RunCliTest, TraceWindowSpansTheLayerJobs) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  // Cycles are counted across the layer jobs of the run; the window's timestamps follow.
  const Outcome o = Run("run --images 2 --batch 2 -q --trace " + P("r.vcd") +
                        " --trace-start 4000 --trace-end 4099");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string v = Slurp(P("r.vcd"));
  EXPECT_NE(v.find("\n#40000\n"), std::string::npos);
  EXPECT_NE(v.find("\n#40995\n"), std::string::npos);
  EXPECT_EQ(v.find("\n#41000\n"), std::string::npos);
  EXPECT_NE(v.find("u_controller"), std::string::npos);
}

TEST_F(RunCliTest, CompiledLayerRunsWithExec) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  // The whole network as one job (what run runs), and with --host-im2col one job per layer.
  const Outcome n = Run("compile --config small-16 --images 2 --out " + P("net"));
  ASSERT_EQ(n.exit_code, 0) << n.err;
  for (const char* f : {"network.asm", "network.host.bin", "network.weights.bin", "jobs.json"}) {
    EXPECT_TRUE(std::filesystem::exists(P("net/") + f)) << f;
  }
  EXPECT_NE(Slurp(P("net/network.asm")).find("set_window"), std::string::npos);
  const Outcome ne =
      Run("exec " + P("net/network.asm") + " --config small-16 --host-in " +
          P("net/network.host.bin") + " --weights-in " + P("net/network.weights.bin"));
  ASSERT_EQ(ne.exit_code, 0) << ne.err;
  EXPECT_NE(ne.out.find("status    halted (chip status: ok)"), std::string::npos);
  const Outcome c = Run("compile --config teach-4 --images 2 --host-im2col --out " + P("prog"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  for (const char* f :
       {"conv1+pool1.asm", "conv1+pool1.host.bin", "conv1+pool1.weights.bin", "fc3.asm"}) {
    EXPECT_TRUE(std::filesystem::exists(P("prog/") + f)) << f;
  }
  // Deterministic: compiling again gives the same bytes.
  ASSERT_EQ(Run("compile --config teach-4 --images 2 --host-im2col --out " + P("prog2")).exit_code,
            0);
  for (const char* f :
       {"conv1+pool1.asm", "conv2+pool2.host.bin", "fc1.weights.bin", "jobs.json"}) {
    EXPECT_EQ(Slurp(P("prog/") + f), Slurp(P("prog2/") + f)) << f;
  }
  const Outcome e =
      Run("exec " + P("prog/conv1+pool1.asm") + " --config teach-4 --host-in " +
          P("prog/conv1+pool1.host.bin") + " --weights-in " + P("prog/conv1+pool1.weights.bin"));
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("status    halted (chip status: ok)"), std::string::npos);
}

TEST_F(RunCliTest, CompareTableHasCpuAndTpuRows) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome o = Run("compare --images 50 --configs teach-4,small-16 --json " + P("c.json") +
                        " --markdown " + P("c.md"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("c.json")));
  std::vector<std::string> names;
  for (const auto& r : j["rows"]) names.push_back(r["backend"]);
  ASSERT_GE(names.size(), 4u);  // then cuda-int8 and cuda-fp32 where a GPU is usable
  names.resize(4);
  EXPECT_EQ(names,
            (std::vector<std::string>{"cpu-fp32", "cpu-int8", "tpu teach-4", "tpu small-16"}));
  // Same int8 arithmetic everywhere: the TPU rows classify exactly as the CPU int8 row.
  EXPECT_EQ(j["rows"][2]["accuracy"], j["rows"][1]["accuracy"]);
  EXPECT_EQ(j["rows"][3]["accuracy"], j["rows"][1]["accuracy"]);
  EXPECT_TRUE(j["rows"][3]["energy_per_image_uj"].is_number());
  EXPECT_NE(Slurp(P("c.md")).find("| tpu small-16 |"), std::string::npos);
}

TEST_F(RunCliTest, BadInputsAreUsageErrors) {
  ExpectError("run --batch 0", 2, "--batch must be at least 1");
  ExpectError("run --images 0", 2, "--images must be at least 1");
  ExpectError("run --config nosuch", 2, "unknown preset 'nosuch'");
  ExpectError("run --energy " + P("missing.json"), 2, "energy table");
  std::ofstream(P("bad.json")) << R"({"dram_pj": 1})";
  ExpectError("run --energy " + P("bad.json"), 2, "unknown key 'dram_pj'");
  ExpectError("run --model " + P("nomodel"), 2, "nomodel");
  ExpectError("compare --configs small-16,nosuch", 2, "unknown preset 'nosuch'");
  ExpectError("compile --out " + P("x") + " --images 0", 2,
              "--images and --batch must be at least 1");
}

// Without --batch, a run takes the most inputs per program that the chip's memories hold
// (64 at most); a --batch that does not fit still says so. 30,000 bytes of host memory on
// teach-4 hold 34 LeNet images with the network's weights, parameters and outputs.
TEST_F(RunCliTest, TheDefaultBatchIsTheMostThatFits) {
  const std::string small = "run --config teach-4 --set host_mem_bytes=30000 --engine fast -q ";
  const Outcome o = Run(small + "--images 64 --json " + P("r.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(j["batch"], 34);
  EXPECT_EQ(j["images"], 64);
  EXPECT_EQ(j["bit_exact"], true);
  ExpectError(small + "--images 64 --batch 35", 2, "a batch of 35 needs");
  ExpectError(small + "--images 64 --batch 35", 2, "use a smaller --batch");
  const Outcome few = Run("run --config teach-4 --engine fast --images 8 --json " + P("d.json"));
  EXPECT_EQ(few.exit_code, 0) << few.err;
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("d.json")))["batch"], 64);
  // The text says the batches as they ran: 8 inputs are one batch of 8.
  EXPECT_NE(few.out.find("8 test images in batches of 8\n"), std::string::npos) << few.out;
}

// --predictions: each input's class and label as CSV. The chip is bit-exact with the CPU
// int8 reference, so `run` and `infer --backend cpu-int8` write the same file; a shard
// numbers its inputs from its first; values are needed.
TEST_F(RunCliTest, PredictionsAreOneCsvLinePerInput) {
  ASSERT_EQ(Run("run --engine fast --images 20 -q --predictions " + P("run.csv")).exit_code, 0);
  ASSERT_EQ(Run("infer --images 20 -q --predictions " + P("infer.csv")).exit_code, 0);
  const std::string csv = Slurp(P("run.csv"));
  EXPECT_EQ(csv, Slurp(P("infer.csv")));
  EXPECT_EQ(csv.rfind("input,predicted,label\n0,7,7\n1,2,2\n", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 21);
  ASSERT_EQ(
      Run("run --engine fast --images 20 --batch 8 --shard 1/3 -q --predictions " + P("shard.csv"))
          .exit_code,
      0);
  const std::string shard = Slurp(P("shard.csv"));
  const size_t from = csv.find("\n8,") + 1, to = csv.find("\n16,") + 1;  // inputs 8 .. 15
  EXPECT_EQ(shard.substr(shard.find('\n') + 1), csv.substr(from, to - from)) << shard;
  ExpectError("run --timing-only --engine fast --images 2 --predictions " + P("t.csv"), 2,
              "need values; drop --timing-only");
  EXPECT_FALSE(std::filesystem::exists(P("t.csv")));
}

// The same run on both engines: the same JSON but for the engine and the wall time.
TEST_F(RunCliTest, FastEngineReportEqualsTheRtlReport) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  ASSERT_EQ(Run("run --images 48 --batch 16 -q --json " + P("rtl.json")).exit_code, 0);
  const Outcome o = Run("run --images 48 --batch 16 --engine fast --json " + P("fast.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("fast engine"), std::string::npos) << o.out;
  auto a = nlohmann::json::parse(Slurp(P("rtl.json")));
  auto b = nlohmann::json::parse(Slurp(P("fast.json")));
  EXPECT_EQ(a["engine"], "rtl");
  EXPECT_EQ(b["engine"], "fast");
  for (auto* j : {&a, &b}) {
    j->erase("engine");
    j->erase("wall_seconds");
  }
  EXPECT_EQ(a, b);
}

TEST_F(RunCliTest, TimingOnlyRunsReportCyclesWithoutValues) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  ASSERT_EQ(Run("run --images 32 --engine fast -q --json " + P("v.json")).exit_code, 0);
  const Outcome o = Run("run --images 32 --engine fast --timing-only --json " + P("t.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("not computed (timing only)"), std::string::npos) << o.out;
  const auto v = nlohmann::json::parse(Slurp(P("v.json")));
  const auto t = nlohmann::json::parse(Slurp(P("t.json")));
  EXPECT_FALSE(t["checked"].get<bool>());
  EXPECT_TRUE(t["bit_exact"].is_null());
  EXPECT_EQ(t["cycles"], v["cycles"]);
  EXPECT_EQ(t["layers"], v["layers"]);
  EXPECT_EQ(t["energy_pj"], v["energy_pj"]);
}

// A row per layer of the whole-network program, each with TPU v1's cycle categories (adding
// up to 100 %; the three wait_ counters split the matrix unit's drain and idle cycles) and
// the attainable bound, which the network's cycles never beat; on a core of one matrix unit
// and of two (each category a share of the cycles in [0, 1]).
TEST_F(RunCliTest, LayerRowsHaveCategoriesAndBounds) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  for (const std::string units : {"1", "2"}) {
    SCOPED_TRACE("mxus_per_core=" + units);
    ExpectCategoriesAndBounds("run --images 128 --batch 64 --engine fast --set mxus_per_core=" +
                              units + " --json " + P("r.json"));
    // On two units each unit's busy cycles (mxu_busy_o), per layer and in all: each unit at
    // most the cycles any unit is busy (busy_matrix), the two together at least those.
    const auto j = nlohmann::json::parse(Slurp(P("r.json")));
    if (units == "1") {
      EXPECT_FALSE(j.contains("mxu_busy_cycles"));
      continue;
    }
    ASSERT_EQ(j["mxu_busy_cycles"].size(), 2u);
    const auto busy = j["mxu_busy_cycles"].get<std::vector<uint64_t>>();
    uint64_t any = 0;  // the cycles some unit is busy
    for (const auto& l : j["layers"]) any += l["counters"]["busy_matrix"].get<uint64_t>();
    EXPECT_GT(busy[1], 0u);
    EXPECT_LE(std::max(busy[0], busy[1]), any);
    EXPECT_GE(busy[0] + busy[1], any);
    // The compiler's choice per layer (mxus) agrees with what the units did: unit 1 works on a
    // layer exactly where the layer went to two units.
    int spread = 0;
    for (const auto& l : j["layers"]) {
      SCOPED_TRACE(l["name"].get<std::string>());
      ASSERT_EQ(l["mxu_busy_cycles"].size(), 2u);
      const int mxus = l["mxus"].get<int>();
      EXPECT_TRUE(mxus == 1 || mxus == 2) << mxus;
      EXPECT_EQ(l["mxu_busy_cycles"][1].get<uint64_t>() > 0, mxus == 2);
      spread += mxus == 2;
    }
    EXPECT_GT(spread, 0);
  }
}

void RunCliTest::ExpectCategoriesAndBounds(const std::string& command) {
  const Outcome o = Run(command);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("TPU v1's categories"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("x bound"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  ASSERT_EQ(j["layers"].size(), 5u);
  uint64_t cycles = 0;
  for (const auto& l : j["layers"]) {
    SCOPED_TRACE(l["name"].get<std::string>());
    double sum = 0;
    for (const auto& [k, v] : l["tpu_v1_categories"].items()) {
      sum += v.get<double>();
      EXPECT_GE(v.get<double>(), 0.0) << k;
      EXPECT_LE(v.get<double>(), 1.0) << k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-9);
    const auto& c = l["counters"];
    EXPECT_EQ(c["wait_input"].get<uint64_t>() + c["wait_vector"].get<uint64_t>() +
                  c["wait_raw"].get<uint64_t>() + c["wait_non_matrix"].get<uint64_t>(),
              c["mxu_drain_cycles"].get<uint64_t>() + c["mxu_idle_cycles"].get<uint64_t>());
    EXPECT_GT(l["bound_cycles"].get<double>(), 0);
    EXPECT_GT(l["k"].get<int64_t>(), 0);
    cycles += l["cycles"].get<uint64_t>();
  }
  EXPECT_EQ(cycles, j["cycles"].get<uint64_t>());
  EXPECT_GE(j["cycles_over_bound"].get<double>(), 1.0);
}

// A small graph that takes float values: conv, a residual add, global pooling, dense.
nn::Model FloatGraph() {
  nn::Model m;
  m.name = "g";
  m.preprocess = "none";
  m.dataset = "none";
  m.input = {6, 6, 3};
  nn::Layer c1 = MakeLayer(nn::LayerType::kConv2d, 4, 3, 1, "same");
  nn::Layer c2 = MakeLayer(nn::LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone);
  nn::Layer add = MakeLayer(nn::LayerType::kAdd);
  add.inputs = {1, 0};
  add.activation = nn::Activation::kRelu;
  nn::Layer gap = MakeLayer(nn::LayerType::kAvgPool2d);
  gap.global_pool = true;
  m.layers = {c1,
              c2,
              add,
              gap,
              MakeLayer(nn::LayerType::kFlatten),
              MakeLayer(nn::LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kNone)};
  m = Randomize(m, 3);
  nn::Quantize(&m, nn::SyntheticInputs(m, 8, 1), 8);
  return m;
}

// Slices of several batches each: their merge keeps the bound's staged host reads (the
// input of a batch read while the batch before computes), which the layer rows carry.
TEST_F(RunCliTest, MergedSlicesKeepTheWholeRunsBound) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string run = "run --engine fast --images 256 --batch 64 -q --json ";
  ASSERT_EQ(Run(run + P("whole.json")).exit_code, 0);
  for (const char* s : {"0", "1"})
    ASSERT_EQ(Run(run + P(std::string("s") + s + ".json") + " --shard " + s + "/2").exit_code, 0);
  const Outcome m = Run("merge " + P("s0.json") + " " + P("s1.json") + " -q --json " + P("m.json"));
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const auto whole = nlohmann::json::parse(Slurp(P("whole.json")));
  const auto merged = nlohmann::json::parse(Slurp(P("m.json")));
  EXPECT_GT(whole["bound"]["staged_host"].get<double>(), 0);
  EXPECT_EQ(merged["bound"], whole["bound"]);
  EXPECT_EQ(merged["layers"], whole["layers"]);
}

// --inputs, --synthetic, --logits, --shard and merge, as a user of an imported network uses
// them; a file of the wrong shape is one line naming both shapes, exit 2, nothing written.
TEST_F(RunCliTest, FloatInputsLogitsShardsAndMerge) {
  const nn::Model m = FloatGraph();
  nn::SaveModel(m, P("g"));
  Tensor<float> x;
  x.shape = {5, 3, 6, 6};
  std::mt19937 rng(4);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < x.Size(); ++i) x.data.push_back(d(rng));
  WriteNpyTensor(P("in.npy"), x);
  const std::string model = " --model " + P("g") + " --engine fast";
  Outcome o = Run("run" + model + " --inputs " + P("in.npy") + " --batch 2 --logits " + P("y.npy") +
                  " --json " + P("r.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("5 inputs in " + P("in.npy")), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("accuracy"), std::string::npos) << o.out;  // no labels
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_TRUE(j["accuracy"].is_null());
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  // The logits are the CPU int8 network's, with its output scale.
  const Tensor<int8_t> y = ReadNpyTensor<int8_t>(P("y.npy"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{5, 5}));
  const nn::InputSet in = nn::ReadInputsNpy(P("in.npy"), m);
  const nn::MatrixI8 want = nn::Int8Net(m).Forward(nn::Int8Inputs(m, in, 0, 5)).back();
  EXPECT_TRUE(std::equal(y.data.begin(), y.data.end(), want.data()));
  EXPECT_EQ(ReadNpyTensor<float>(P("y.scale.npy")).data,
            std::vector<float>{m.layers.back().q.output_scale});
  o = Run("infer --backend cpu-fp32" + std::string(" --model ") + P("g") + " --inputs " +
          P("in.npy") + " --logits " + P("f.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(ReadNpyTensor<float>(P("f.npy")).shape, (std::vector<int64_t>{5, 5}));
  o = Run("run" + model + " --synthetic 3 --seed 7 -q --json " + P("s.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("s.json")))["images"], 3);
  // Slices of whole batches, merged: the single run's report.
  for (int i = 0; i < 3; ++i) {
    o = Run("run" + model + " --inputs " + P("in.npy") + " --batch 2 --shard " + std::to_string(i) +
            "/3 -q --json " + P("s" + std::to_string(i) + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
  }
  o = Run("merge " + P("s0.json") + " " + P("s1.json") + " " + P("s2.json") + " -q --json " +
          P("m.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto merged = nlohmann::json::parse(Slurp(P("m.json"))), single = j;
  for (auto* r : {&merged, &single}) r->erase("wall_seconds");
  EXPECT_EQ(merged, single);
  ExpectError("merge " + P("s0.json") + " " + P("s2.json"), 2, "2 of the 3 slices are there");
  ExpectError("merge " + P("s0.json") + " " + P("s0.json") + " " + P("s1.json"), 2,
              "slice 0/3 is there twice");
  // Slices of two runs of different lengths that happen to be split in as many slices.
  for (const std::string images : {"5", "4"}) {
    o = Run("run" + model + " --inputs " + P("in.npy") + " --batch 2 --images " + images +
            " --shard " + (images == "5" ? "0" : "1") + "/2 -q --json " +
            P("h" + images + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
  }
  ExpectError("merge " + P("h5.json") + " " + P("h4.json"), 2,
              "differs from slice 0/2 in its whole run's number of inputs");
  // Bad inputs.
  ExpectError("run" + model, 2, "has no data set: give its inputs with --inputs FILE.npy");
  Tensor<float> bad;
  bad.shape = {2, 3, 8, 8};
  bad.data.assign(2 * 3 * 64, 0.5f);
  WriteNpyTensor(P("bad.npy"), bad);
  ExpectError("run" + model + " --inputs " + P("bad.npy") + " --json " + P("no.json"), 2,
              "the inputs are 2 x 3 x 8 x 8; model 'g' takes N x 3 x 6 x 6");
  EXPECT_FALSE(std::filesystem::exists(P("no.json")));
  ExpectError("run" + model + " --inputs " + P("in.npy") + " --synthetic 2", 2,
              "--inputs and --synthetic both name the inputs");
  ExpectError("run" + model + " --inputs " + P("in.npy") + " --images 9", 2,
              "--images 9 is more than the 5 inputs in");
  ExpectError("run" + model + " --synthetic 4 --shard 4/4", 2, "--shard 4/4: give I/K");
  ExpectError("run --synthetic 0", 2, "0 is not a count of inputs; give 1 or more");
  ExpectError("quantize --model " + P("g") + " --out " + P("gq") + " --synthetic 0", 2,
              "0 is not a count of inputs");
  ExpectError("run --host-im2col" + model + " --synthetic 2", 2,
              "--host-im2col runs chains of layers; model 'g' is a graph");
}

// Results that mean nothing are said to: int8 inputs far outside the calibrated range, and
// bf16 outputs that are NaN or infinite, each a warning on stderr (the run still succeeds).
TEST_F(RunCliTest, WarnsOfClippedInputsAndNonFiniteOutputs) {
  const nn::Model m = FloatGraph();
  nn::SaveModel(m, P("g"));
  Tensor<float> x;
  x.shape = {2, 3, 6, 6};
  x.data.assign(2 * 3 * 36, 0.25f);
  WriteNpyTensor(P("fine.npy"), x);
  x.data[7] = 1e30f;
  x.data[80] = -1e30f;
  WriteNpyTensor(P("far.npy"), x);
  const std::string run = "run --model " + P("g") + " --engine fast --inputs ";
  Outcome o = Run(run + P("fine.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  o = Run(run + P("far.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err.rfind("tpusim: warning: 2 of the 216 input values lie far outside the range", 0),
            0u)
      << o.err;
  EXPECT_NE(o.err.find("the largest |x| is 1e+30"), std::string::npos) << o.err;
  x.data[7] = x.data[150] = 3.4e38f;  // beyond bfloat16's largest: an infinity in each input
  WriteNpyTensor(P("huge.npy"), x);
  o = Run(run + P("huge.npy") + " --config small-16 --set dtype=bf16");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find("tpusim: warning: the outputs of 2 of 2 inputs are NaN or infinite"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.out.find("the outputs of 2 of 2 inputs are not finite"), std::string::npos) << o.out;
}

// An fp32 model on a bf16 chip (docs/bf16.md): no quantization, bit-exact against the bf16
// reference on both engines, which agree on every number of the report.
TEST_F(RunCliTest, Bf16LenetIsBitExactAndTheEnginesAgree) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string chip = " --config small-16 --set array_dim=4 --set dtype=bf16 --images 12";
  nlohmann::json j[2];
  for (int e = 0; e < 2; ++e) {
    const std::string engine = e == 0 ? "rtl" : "fast";
    const Outcome o = Run("run --engine " + engine + chip + " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("(4 x 4, bf16, 700 MHz)"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("bit-exact  yes (bf16 outputs"), std::string::npos) << o.out;
    j[e] = nlohmann::json::parse(Slurp(P(engine + ".json")));
    EXPECT_TRUE(j[e]["bit_exact"].get<bool>());
    EXPECT_TRUE(j[e]["non_finite"].is_null());
    EXPECT_EQ(j[e]["config"]["dtype"], "bf16");
    for (const char* key : {"engine", "wall_seconds", "images_per_second_wall"}) j[e].erase(key);
  }
  EXPECT_EQ(j[0].dump(), j[1].dump());
}

// Weights through vector memory (`--weights vmem`, docs/compiler.md): every read_weights made
// read_hbm + load_weights, on a core of one matrix unit and of two (the 1 x 2 x 4 bf16
// chip); bit-exact on both engines, every number of the report equal between them, and the
// same tiles reach the FIFOs as by read_weights (the fast engine's fifo run).
TEST_F(RunCliTest, Bf16LenetWithWeightsThroughVectorMemoryIsBitExactAndTheEnginesAgree) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  for (const char* units : {"1", "2"}) {
    SCOPED_TRACE(std::string("mxus_per_core=") + units);
    const std::string chip =
        std::string(" --config teach-4 --set dtype=bf16 --set mxus_per_core=") + units +
        " --images 12 --batch 12";
    nlohmann::json j[3];
    for (int e = 0; e < 3; ++e) {
      const std::string engine = e == 0 ? "rtl" : "fast";
      const std::string weights = e < 2 ? " --weights vmem" : " --weights fifo";
      const Outcome o =
          Run("run --engine " + engine + chip + weights + " --json " + P(engine + ".json"));
      ASSERT_EQ(o.exit_code, 0) << o.err;
      EXPECT_NE(o.out.find("bit-exact  yes (bf16 outputs"), std::string::npos) << o.out;
      j[e] = nlohmann::json::parse(Slurp(P(engine + ".json")));
      EXPECT_EQ(j[e]["plan"].get<std::string>().find("weights through vector memory") !=
                    std::string::npos,
                e < 2)
          << j[e]["plan"];
      for (const char* key : {"engine", "wall_seconds", "images_per_second_wall"}) j[e].erase(key);
    }
    EXPECT_EQ(j[0].dump(), j[1].dump());
    const nlohmann::json &vmem = j[1]["counters"], &fifo = j[2]["counters"];
    EXPECT_EQ(vmem["weight_fifo_pushes"], fifo["weight_fifo_pushes"]);
    EXPECT_EQ(vmem["weight_tiles"], fifo["weight_tiles"]);
    // The weights' bytes, and each of their rows written to the buffer and read back once.
    EXPECT_EQ(vmem["weight_bytes_read"], fifo["weight_bytes_read"]);
    for (const char* key : {"ub_reads", "ub_writes"})
      EXPECT_EQ(vmem[key].get<uint64_t>() - fifo[key].get<uint64_t>(),
                fifo["weight_fifo_pushes"].get<uint64_t>())
          << key;
  }
}

// Every chip preset runs MNIST on its own chip's RTL, bit-exact, every number of the report
// equal to the fast engine's (issue 71: tpu-v1's 256 x 256 and tpu-v2's 128 x 128 bf16 give
// the headline figures); tpu-v1 runs the int8 model, the bf16 presets the fp32 one. A preset
// whose chip this build left out (tpu-v4's, unless CMake's TPUSIM_TPU_CHIPS adds it:
// docs/architecture.md) is SKIPPED, saying so, and its rtl run says how to add it.
class PresetChipTest : public RunCliTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(PresetChipTest, MnistIsBitExactOnBothEngines) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string preset = GetParam();
  const std::string chip = " --config " + preset + " --images 16 --batch 16";
  const Outcome rtl = Run("run --engine rtl" + chip + " --json " + P("rtl.json"));
  if (rtl.exit_code != 0 && rtl.err.find("no RTL model of") != std::string::npos) {
    EXPECT_NE(rtl.err.find("-DTPUSIM_TPU_CHIPS="), std::string::npos) << rtl.err;
    GTEST_SKIP() << preset << "'s chip is not in this build: " << rtl.err;
  }
  ASSERT_EQ(rtl.exit_code, 0) << rtl.err;
  const Outcome fast = Run("run --engine fast" + chip + " --json " + P("fast.json"));
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  nlohmann::json j[2];
  for (int e = 0; e < 2; ++e) {
    j[e] = nlohmann::json::parse(Slurp(P(e == 0 ? "rtl.json" : "fast.json")));
    EXPECT_TRUE(j[e]["bit_exact"].get<bool>()) << preset;
    EXPECT_EQ(j[e]["config"]["name"].get<std::string>(), preset);
    for (const char* key : {"engine", "wall_seconds", "images_per_second_wall"}) j[e].erase(key);
  }
  EXPECT_EQ(j[0].dump(), j[1].dump()) << preset;
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetChipTest,
                         ::testing::Values("tpu-v1", "tpu-v2", "tpu-v3", "tpu-v4"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string name = p.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

// NaN or infinity in the weights: the run names the layer and the value where it first
// appeared.
TEST_F(RunCliTest, Bf16RunNamesTheFirstNonFiniteValue) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  m.layers[5].weights.data[0] = INFINITY;  // fc1, the first weight
  nn::SaveModel(m, P("inf"));
  const Outcome o = Run("run --engine fast --config small-16 --set dtype=bf16 --images 3 --model " +
                        P("inf") + " --json " + P("r.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_TRUE(j["bit_exact"].get<bool>());
  EXPECT_EQ(j["non_finite"],
            "input 0: first in layer '" + m.layers[5].name + "', value 0 of its output")
      << o.out;
  EXPECT_NE(o.out.find("NaN/inf    input 0: first in layer"), std::string::npos) << o.out;
  // A finite input beyond bfloat16's range: an infinity in the input itself.
  nn::Model plain = nn::MakeLenet5(3);
  plain.preprocess = "none";  // float inputs as they are
  plain.dataset = "none";
  nn::SaveModel(plain, P("plain"));
  Tensor<float> x;
  x.shape = {2, 1, 32, 32};
  x.data.assign(2 * 32 * 32, 0.25f);
  x.data[32 * 32 + 70] = 3.3999e38f;
  WriteNpyTensor(P("big.npy"), x);
  const Outcome big = Run("run --engine fast --config small-16 --set dtype=bf16 --model " +
                          P("plain") + " --inputs " + P("big.npy") + " --json " + P("b.json"));
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("b.json")))["non_finite"],
            "input 1: first in the input, value 70 (beyond bfloat16's range)");
}

// A global average pooling of 8 channels on the 4 x 4 bf16 chip: two channel tiles, whose
// off-diagonal weight tiles are zeros. An infinity in channel 0 makes NaN of its own tile's
// outputs (channels 0 to 3: infinity x 0 inside the diagonal tile) and not of the other's,
// whose terms skip the zero tiles on the chip and in nn::Bf16Net alike: bit-exact on both
// engines, which agree.
TEST_F(RunCliTest, Bf16AnInfinitySpreadsOnlyThroughTheTilesTaken) {
  nn::Model m;
  m.name = "gap";
  m.preprocess = "none";
  m.dataset = "none";
  m.input = {3, 3, 8};
  nn::Layer gap = MakeLayer(nn::LayerType::kAvgPool2d);
  gap.global_pool = true;
  m.layers = {gap, MakeLayer(nn::LayerType::kFlatten)};
  m = Randomize(m, 3);
  nn::SaveModel(m, P("gap"));
  Tensor<float> x;
  x.shape = {1, 8, 3, 3};
  x.data.assign(8 * 9, 0.5f);
  x.data[4] = 3.3999e38f;  // channel 0, pixel (1, 1): an infinity in bfloat16
  WriteNpyTensor(P("x.npy"), x);
  std::vector<float> logits[2];
  for (int e = 0; e < 2; ++e) {
    const std::string engine = e == 0 ? "rtl" : "fast";
    const Outcome o =
        Run("run --model " + P("gap") + " --engine " + engine +
            " --config small-16 --set array_dim=4 --set dtype=bf16 --inputs " + P("x.npy") +
            " --logits " + P(engine + ".npy") + " --json " + P(engine + ".json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_TRUE(nlohmann::json::parse(Slurp(P(engine + ".json")))["bit_exact"].get<bool>())
        << o.out;
    logits[e] = ReadNpyTensor<float>(P(engine + ".npy")).data;
    ASSERT_EQ(logits[e].size(), 8u);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(std::isfinite(logits[e][c]), c >= 4) << engine << c;
  }
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), 8 * sizeof(float)));
}

// A graph (a residual add fused into a convolution, global average pooling) runs on a bf16
// chip bit-exact on both engines, which agree; an add ending in ReLU6, which the chip's
// residual add does not apply, stops the run with its name, exit 2; the logits of a bf16
// run are written as float32, exactly the chip's bfloat16 values.
TEST_F(RunCliTest, Bf16RunsGraphsRefusesAnAddWithRelu6AndWritesFloatLogits) {
  nn::Model g = FloatGraph();
  nn::SaveModel(g, P("g"));
  ExpectBf16EnginesAgree(P("g"));
  g.layers[2].activation = nn::Activation::kRelu6;
  nn::SaveModel(g, P("g6"));
  ExpectError("run --model " + P("g6") +
                  " --engine fast --config small-16 --set dtype=bf16 "
                  "--synthetic 2",
              2, "add 'l2' ends in ReLU6");
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome o =
      Run("run --engine fast --config small-16 --set dtype=bf16 --images 3 --logits " + P("y.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const Tensor<float> y = ReadNpyTensor<float>(P("y.npy"));
  ASSERT_EQ(y.shape, (std::vector<int64_t>{3, 10}));
  for (float v : y.data) {  // bfloat16 values: the low 16 bits of each float are zero
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    EXPECT_EQ(bits & 0xffffu, 0u) << v;
  }
}

// An imported ONNX network (depthwise convolution with ReLU6, max pooling fused into a
// convolution, a 2 x 2 average pooling of stride 1 run as a depthwise convolution, softmax)
// on a bf16 chip, without quantization: bit-exact on both engines, which agree.
TEST_F(RunCliTest, Bf16RunsAnImportedOnnxNetwork) {
  const Outcome imp = Run("import " + std::string(TPUSIM_SOURCE_DIR) +
                          "/models/onnx/torch_cnn.onnx --out " + P("cnn") + " -q");
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  ExpectBf16EnginesAgree(P("cnn"));
}

}  // namespace
}  // namespace tpu::test
