// Whole networks as one program per batch (host/compiler/network_compiler.h): every prefix
// of LeNet agrees with the CPU int8 reference's output of that layer, on both engines.
#include "host/compiler/network_compiler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/data/mnist.h"
#include "host/engine/timeline.h"
#include "host/nn/int8_net.h"
#include "host/run/tpu_runner.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/test_engines.h"

namespace tpu::compiler {

using run::LayerStats;
using run::RunModelOnTpu;
using run::TpuRunResult;
namespace {

// The model up to layer `last` (inclusive).
nn::Model Prefix(const nn::Model& m, size_t last) {
  nn::Model p = m;
  p.layers.resize(last + 1);
  return p;
}

// Random 32 x 32 images with the zero border of preprocess mnist32 (28 x 28 inside).
data::MnistSet MnistLike(const nn::Model& m, int count, uint64_t seed) {
  data::MnistSet set = test::RandomImages(m, count, seed);
  for (int64_t i = 0; i < set.count; ++i)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        if (y < 2 || y >= 30 || x < 2 || x >= 30)
          set.pixels[static_cast<size_t>(i * 1024 + y * 32 + x)] = 0;
  return set;
}

// Runs the network program on `kind` and compares every image's output with the reference.
void ExpectPrefixesExact(const nn::Model& m, const char* preset, engine::EngineKind kind,
                         int images, int batch) {
  const data::MnistSet set = MnistLike(m, images, 3);
  const nn::Int8Net net(m);
  const auto ref = net.Forward(set.pixels.data(), images);
  for (size_t last = 0; last < m.layers.size(); ++last) {
    if (m.layers[last].type == nn::LayerType::kFlatten) continue;
    if (last + 1 < m.layers.size() && (m.layers[last + 1].type == nn::LayerType::kMaxPool2d ||
                                       m.layers[last + 1].type == nn::LayerType::kAvgPool2d))
      continue;  // fused with the next layer
    const nn::Model p = Prefix(m, last);
    const NetworkCompiler nc(p, config::LoadConfig(preset), batch);
    if (!nc.Fits() && last + 1 < m.layers.size()) continue;  // a prefix's whole-batch output
    ASSERT_TRUE(nc.Fits()) << nc.WhyNot();
    std::vector<int8_t> act(static_cast<size_t>(batch * m.input.Size()));
    for (size_t i = 0; i < act.size(); ++i) act[i] = arith::QuantizePixel(set.pixels[i]);
    const LayerJob job = nc.Build(act, batch);
    // A fresh chip each time: memories left by an earlier run could hide a read too early.
    const auto chip = test::TestEngine(kind, config::LoadConfig(preset), {});
    const engine::ExecResult e = chip->Run(job.exec);
    ASSERT_TRUE(e.ok) << e.message;
    const std::vector<int8_t> got = nc.Decode<int8_t>(e.host_out, batch);
    const nn::MatrixI8& want = ref[last];
    ASSERT_EQ(static_cast<int64_t>(got.size()), want.rows() * want.cols() * batch / images);
    int64_t bad = 0;
    for (int b = 0; b < batch; ++b)
      for (int64_t c = 0; c < want.cols(); ++c)
        bad += got[static_cast<size_t>(b * want.cols() + c)] != want(b, c);
    EXPECT_EQ(bad, 0) << "up to layer " << last << " (" << nc.Name() << ")";
  }
}

TEST(NetworkCompilerTest, LenetPrefixesAreBitExactFast) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  ExpectPrefixesExact(m, "small-16", engine::EngineKind::kFast, 64, 64);
}

// Compiled once and loaded once, with only the inputs written for each batch: every batch's
// outputs and counters are those of the batch run as one job of whole images on a fresh chip.
TEST(NetworkCompilerTest, CompiledOnceRunsEachBatchAsItsOwnJobDoes) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const config::TpuConfig config = config::LoadConfig("small-16");
  constexpr int kBatch = 8;
  const NetworkCompiler nc(m, config, kBatch);
  ASSERT_TRUE(nc.Fits()) << nc.WhyNot();
  const auto loaded = test::TestEngine(engine::EngineKind::kFast, config, {});
  CompiledNetwork compiled = nc.Compile(kBatch);
  CoreJobs one = CombineCoreJobs({compiled.job.exec});
  loaded->Load(TakeExecutable(&one, {compiled.input_bytes}, nc.Name()));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const data::MnistSet set = MnistLike(m, kBatch, seed);
    std::vector<int8_t> act(static_cast<size_t>(kBatch * m.input.Size()));
    for (size_t i = 0; i < act.size(); ++i) act[i] = arith::QuantizePixel(set.pixels[i]);
    loaded->Write("inputs", nc.EncodeInputs(act, kBatch));
    const engine::ExecResult got = loaded->Run();
    const auto fresh = test::TestEngine(engine::EngineKind::kFast, config, {});
    const engine::ExecResult want = fresh->Run(nc.Build(act, kBatch).exec);
    ASSERT_TRUE(got.ok) << got.message;
    EXPECT_EQ(loaded->Read("outputs"), want.host_out) << "batch " << seed;
    EXPECT_EQ(got.counters.FirstDifference(want.counters), -1) << "batch " << seed;
    EXPECT_EQ(got.cycles, want.cycles);
  }
  EXPECT_THROW(loaded->Write("inputs", std::vector<uint8_t>(1 << 20)), UsageError);
}

// The RTL runs the whole LeNet program bit-exact (one SystemC chip per test process), with a
// row per layer whose counters equal the fast engine's (docs/timing.md, "Per-layer
// attribution"; the runner checks that the rows add up to the chip's counters).
TEST(NetworkCompilerTest, LenetIsBitExactOnTheRtlWithARowPerLayer) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet set = MnistLike(m, 8, 4);
  const config::TpuConfig c = config::LoadConfig("small-16");
  const auto chip = test::TestEngine(engine::EngineKind::kRtl, c, {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, set.pixels.data(), nullptr, 8, 8);
  EXPECT_EQ(r.plan.rfind("whole network", 0), 0u) << r.plan;
  EXPECT_EQ(r.mismatches, 0);
  std::vector<std::string> names;
  for (const LayerStats& l : r.layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1+pool1", "conv2+pool2", "fc1", "fc2", "fc3"}));
  const auto fast = test::TestEngine(engine::EngineKind::kFast, c, {});
  engine::Timeline timeline(c.clock_mhz);
  fast->SetTimeline(&timeline);
  const TpuRunResult f = RunModelOnTpu(m, *fast, set.pixels.data(), nullptr, 8, 8);
  ASSERT_EQ(f.layers.size(), r.layers.size());
  // The timeline's layers track: each layer's slices hold its cycles.
  std::map<std::string, uint64_t> sliced;
  for (const auto& e : timeline.Events())
    if (e["tid"] == hw::kNumUnits + 1) sliced[e["name"]] += e["args"]["cycles"].get<uint64_t>();
  for (const LayerStats& l : f.layers) EXPECT_EQ(sliced[l.name], l.counters.cycles) << l.name;
  for (size_t i = 0; i < r.layers.size(); ++i) {
    SCOPED_TRACE(r.layers[i].name);
    EXPECT_EQ(r.layers[i].jobs, 1);
    EXPECT_EQ(r.layers[i].macs, f.layers[i].macs);
    const int d = r.layers[i].counters.FirstDifference(f.layers[i].counters);
    EXPECT_EQ(d, -1) << (d >= 0 ? hw::kCounterNames[static_cast<size_t>(d)] : "");
    // Each layer's useful MACs fit in the MACs its streamed rows did, which it owns.
    EXPECT_LE(r.layers[i].macs, static_cast<int64_t>(r.layers[i].counters.macs));
    EXPECT_EQ(r.layers[i].counters.macs,
              r.layers[i].counters.mxu_stream_cycles * static_cast<uint64_t>(16 * 16));
  }
}

// LeNet on teach-4's chip of two cores, on its RTL and the fast engine, and on one core (fast);
// nullopt with `skip` set in a build without the 2 x 4 chip (TPUSIM_TPU_CHIPS).
struct TwoCoreRuns {
  TpuRunResult rtl, fast, one;
};
std::optional<TwoCoreRuns> LenetOnTwoCores(const data::MnistSet& set, int images, int batch,
                                           std::string* skip) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.cores = 2;
  std::unique_ptr<engine::ChipEngine> chip;
  try {
    chip = test::TestEngine(engine::EngineKind::kRtl, c, {});
  } catch (const UsageError& e) {
    *skip = e.what();
    return std::nullopt;
  }
  TwoCoreRuns runs;
  runs.rtl = RunModelOnTpu(m, *chip, set.pixels.data(), nullptr, images, batch);
  const auto fast = test::TestEngine(engine::EngineKind::kFast, c, {});
  runs.fast = RunModelOnTpu(m, *fast, set.pixels.data(), nullptr, images, batch);
  c.cores = 1;
  const auto one = test::TestEngine(engine::EngineKind::kFast, c, {});
  runs.one = RunModelOnTpu(m, *one, set.pixels.data(), nullptr, images, batch);
  return runs;
}

// On a chip of two cores each core runs the whole-network program on its share of the batch
// (docs/compiler.md, "Several cores"): bit-exact, the rows (each core's cycles attributed,
// the runner checks that they add up) equal on the RTL of the 2 x 4 chip and the fast
// engine, and the batch done in fewer chip cycles than on one core.
TEST(NetworkCompilerTest, LenetOnTwoCoresSplitsTheBatchOnTheRtl) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  std::string skip;
  const std::optional<TwoCoreRuns> runs = LenetOnTwoCores(MnistLike(m, 8, 5), 8, 8, &skip);
  if (!runs) GTEST_SKIP() << skip;
  const TpuRunResult &r = runs->rtl, &f = runs->fast, &o = runs->one;
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(f.mismatches, 0);
  EXPECT_EQ(r.logits, o.logits);
  EXPECT_EQ(r.chip_cycles, f.chip_cycles);
  ASSERT_EQ(r.layers.size(), f.layers.size());
  for (size_t i = 0; i < r.layers.size(); ++i) {
    SCOPED_TRACE(r.layers[i].name);
    EXPECT_EQ(r.layers[i].jobs, 2);  // a program per core
    EXPECT_EQ(r.layers[i].macs, o.layers[i].macs);
    EXPECT_EQ(r.layers[i].counters.FirstDifference(f.layers[i].counters), -1);
    ASSERT_EQ(r.layers[i].cores.size(), 2u);  // each core's part, equal on both engines
    ASSERT_EQ(f.layers[i].cores.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(r.layers[i].cores[k].macs, f.layers[i].cores[k].macs);
      EXPECT_EQ(r.layers[i].cores[k].counters.FirstDifference(f.layers[i].cores[k].counters), -1)
          << "core " << k;
    }
  }
  // Each core counts its own cycles: the rows hold more than the chip took.
  EXPECT_GT(r.Total().cycles, r.chip_cycles);
  EXPECT_LT(r.chip_cycles, o.chip_cycles);
  std::printf("LeNet, 8 images on teach-4: one core %lu cycles, two cores %lu\n", o.chip_cycles,
              r.chip_cycles);
}

// One image on two cores (model parallel, docs/compiler.md): the operations the bounds choose
// split by output channels, each core its share, the maps exchanged through host memory at
// barriers. Bit-exact on the RTL of the 2 x 4 chip and the fast engine, every row and each
// core's part equal on both, each split row's MACs shared out, and the image done in fewer
// chip cycles than on one core.
TEST(NetworkCompilerTest, OneImageSplitsOutputChannelsOverTwoCoresOnTheRtl) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.cores = 2;
  const NetworkCompiler nc(m, c, 1);
  const std::vector<bool> want = {true, true, true, true, false};  // fc3: the model's output
  EXPECT_EQ(nc.SplitOfOne().split, want);
  std::string skip;
  const std::optional<TwoCoreRuns> runs = LenetOnTwoCores(MnistLike(m, 2, 6), 2, 1, &skip);
  if (!runs) GTEST_SKIP() << skip;
  const TpuRunResult &r = runs->rtl, &f = runs->fast, &o = runs->one;
  EXPECT_NE(r.plan.find("model parallel"), std::string::npos) << r.plan;
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(f.mismatches, 0);
  EXPECT_EQ(r.logits, o.logits);
  EXPECT_EQ(r.chip_cycles, f.chip_cycles);
  ASSERT_EQ(r.layers.size(), want.size());
  ASSERT_EQ(f.layers.size(), want.size());
  for (size_t i = 0; i < r.layers.size(); ++i) {
    SCOPED_TRACE(r.layers[i].name);
    EXPECT_EQ(r.layers[i].name.find(run::kOutputChannelsSplit) != std::string::npos, want[i]);
    EXPECT_EQ(r.layers[i].macs, o.layers[i].macs);
    EXPECT_EQ(r.layers[i].counters.FirstDifference(f.layers[i].counters), -1);
    ASSERT_EQ(r.layers[i].cores.size(), 2u);
    for (size_t k = 0; k < 2; ++k)
      EXPECT_EQ(r.layers[i].cores[k].counters.FirstDifference(f.layers[i].cores[k].counters), -1)
          << "core " << k;
    // A split operation's MACs are shared out; a whole one's are core 0's (core 1 repeats it).
    const int64_t core1 = r.layers[i].cores[1].macs;
    EXPECT_EQ(r.layers[i].cores[0].macs + core1, r.layers[i].macs);
    EXPECT_EQ(core1 > 0, want[i]);
  }
  EXPECT_LT(r.chip_cycles, o.chip_cycles);
  std::printf("LeNet, 1 image at a time on teach-4: one core %lu cycles, two cores %lu\n",
              o.chip_cycles / 2, r.chip_cycles / 2);
}

// Whether an operation splits is the bounds' choice (model_parallel.h): over a host link whose
// reads return 100,000 cycles late the maps' exchange costs more than any split saves, and
// nothing splits; on one core nothing splits either.
TEST(NetworkCompilerTest, TheSplitIsTakenWhereTheBoundsSayItPays) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.cores = 2;
  const NetworkCompiler nc(m, c, 1);
  const ModelSplit& fast_link = nc.SplitOfOne();
  EXPECT_TRUE(fast_link.Any());
  EXPECT_LT(fast_link.shared, fast_link.one_core);
  c.host_mem_latency_cycles = 100000;
  EXPECT_FALSE(NetworkCompiler(m, c, 1).SplitOfOne().Any());
  c = config::LoadConfig("teach-4");
  EXPECT_FALSE(NetworkCompiler(m, c, 1).SplitOfOne().Any());  // one core
  // Each core's share of a split operation: whole tiles, every tile once; conv1's 6 channels
  // are tiles of 4 and 2 on teach-4, and so are the cores' useful MACs.
  EXPECT_EQ(CoreTiles(5, 0, 2), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(CoreTiles(5, 1, 2), std::make_pair(int64_t{2}, int64_t{3}));
  const GraphOp& conv1 = nc.Graph().ops[0];
  ASSERT_EQ(conv1.nt, 2);
  const GraphOp a = CoreGraph(nc.Graph(), {true}, 0, 2).ops[0];
  const GraphOp b = CoreGraph(nc.Graph(), {true}, 1, 2).ops[0];
  EXPECT_EQ(a.macs, conv1.macs / 6 * 4);
  EXPECT_EQ(b.macs, conv1.macs / 6 * 2);
  EXPECT_EQ(std::make_pair(a.tile0, b.tile0), std::make_pair(int64_t{0}, int64_t{1}));
  EXPECT_EQ(b.first_param, conv1.first_param + 1);
  EXPECT_EQ(a.nt + b.nt, 2);
}

// The zero border of mnist32 is the first convolution's padding: the host sends 28 x 28, and
// an image whose border is not zero is refused, not computed wrong.
TEST(NetworkCompilerTest, TheMnistBorderIsPaddingOnTheChip) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const NetworkCompiler nc(m, config::LoadConfig("small-16"), 2);
  std::vector<int8_t> act(2 * 1024, 0);
  act[5 * 32 + 5] = 7;
  const LayerJob job = nc.Build(act, 2);
  EXPECT_EQ(job.exec.program.words.size() > 0, true);
  // Image rows: 28 x 28 bytes = 49 rows of 16 per image, then the parameters.
  EXPECT_EQ(job.exec.host_image[(5 - 2) * 28 + (5 - 2)], 7);
  act[1 * 32 + 5] = 1;
  try {
    nc.Build(act, 2);
    ADD_FAILURE() << "a nonzero border was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("border"), std::string::npos) << e.what();
  }
}

// A unified buffer too small for the batch's maps: the convolutions run in smaller groups of
// images, and the result is the same.
TEST(NetworkCompilerTest, SmallBuffersRunInSmallerGroups) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  config::TpuConfig c = config::LoadConfig("small-16");
  c.ub_depth_rows = 4096;
  const NetworkCompiler nc(m, c, 64);
  ASSERT_TRUE(nc.Fits()) << nc.WhyNot();
  EXPECT_EQ(nc.PlanText().find("conv1+pool1 .. conv2+pool2 in groups of 64"), std::string::npos)
      << nc.PlanText();
  EXPECT_NE(nc.PlanText().find("fc1 .. fc3 in groups of 64"), std::string::npos) << nc.PlanText();
  EXPECT_LE(nc.UbRows(), 4096);
  const data::MnistSet set = MnistLike(m, 64, 5);
  const auto chip = test::TestEngine(engine::EngineKind::kFast, c, {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, set.pixels.data(), nullptr, 64, 64);
  EXPECT_EQ(r.mismatches, 0) << r.plan;
}

}  // namespace
}  // namespace tpu::compiler
