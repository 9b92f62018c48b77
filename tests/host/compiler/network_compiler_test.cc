// Whole networks as one program per batch (host/compiler/network_compiler.h): every prefix
// of LeNet agrees with the CPU int8 reference's output of that layer, on both engines.
#include "host/compiler/network_compiler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/engine/timeline.h"
#include "host/nn/int8_net.h"
#include "host/nn/int8_ops.h"
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
    for (size_t i = 0; i < act.size(); ++i) act[i] = nn::QuantizePixel(set.pixels[i]);
    const LayerJob job = nc.Build(act, batch);
    // A fresh chip each time: memories left by an earlier run could hide a read too early.
    const auto chip = test::TestEngine(kind, config::LoadConfig(preset), {});
    const engine::ExecResult e = chip->Run(job.exec);
    ASSERT_TRUE(e.ok) << e.message;
    const std::vector<int8_t> got = nc.Decode(e.host_out, batch);
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

// On a chip of two cores each core runs the whole-network program on its share of the batch
// (docs/compiler.md, "Several cores"): bit-exact, the rows (each core's cycles attributed,
// the runner checks that they add up) equal on the RTL of the 2 x 4 chip and the fast
// engine, and the batch done in fewer chip cycles than on one core.
TEST(NetworkCompilerTest, LenetOnTwoCoresSplitsTheBatchOnTheRtl) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet set = MnistLike(m, 8, 5);
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.cores = 2;
  std::unique_ptr<engine::ChipEngine> chip;
  try {
    chip = test::TestEngine(engine::EngineKind::kRtl, c, {});
  } catch (const UsageError& e) {  // a build without the 2 x 4 chip (TPUSIM_TPU_CHIPS)
    GTEST_SKIP() << e.what();
  }
  const TpuRunResult r = RunModelOnTpu(m, *chip, set.pixels.data(), nullptr, 8, 8);
  const auto fast = test::TestEngine(engine::EngineKind::kFast, c, {});
  const TpuRunResult f = RunModelOnTpu(m, *fast, set.pixels.data(), nullptr, 8, 8);
  c.cores = 1;
  const auto one = test::TestEngine(engine::EngineKind::kFast, c, {});
  const TpuRunResult o = RunModelOnTpu(m, *one, set.pixels.data(), nullptr, 8, 8);
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
