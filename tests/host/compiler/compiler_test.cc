// The compiler (host/compiler/): steps, tiling, layout and instruction counts; CNNs run
// bit-exact on the chip against the CPU int8 reference (a second, different CNN on teach-4
// and small-16; the committed LeNet on 200 MNIST test images); the energy model.
#include <gtest/gtest.h>

#include <regex>

#include "host/common/errors.h"
#include "host/compiler/layer_compiler.h"
#include "host/data/mnist.h"
#include "host/isa/assembler.h"
#include "host/nn/int8_net.h"
#include "host/nn/int8_reference.h"
#include "host/nn/quantize.h"
#include "host/report/energy.h"
#include "host/run/tpu_runner.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"
#include "tests/test_engines.h"

namespace tpu::compiler {

using run::RunModelOnTpu;
using run::TpuRunResult;
namespace {

using nn::Activation;
using nn::LayerType;
using test::MakeLayer;

// Random weights (seed), quantized with the project's quantizer on 64 random images.
nn::Model RandomQuantized(nn::Model m, uint64_t seed) {
  m = test::Randomize(m, seed);
  nn::Quantize(&m, test::RandomImages(m, 64, seed + 1), 64);
  return m;
}

// The run agreed with the CPU int8 reference on every image, and the logits vary between
// images (at least `varied` differ from the first), so agreement means something.
void ExpectExactAndVaried(const TpuRunResult& r, int varied) {
  EXPECT_EQ(r.mismatches, 0);
  int differing = 0;
  for (size_t i = 1; i < r.logits.size(); ++i) differing += r.logits[i] != r.logits[0];
  EXPECT_GT(differing, varied);
}

int Count(const std::string& text, const std::string& mnemonic) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.rfind(mnemonic + " ", 0) == 0;
  return n;
}

nn::Model Lenet() { return nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5"); }

TEST(CompilerTest, LenetBecomesFiveJobsWithPoolingFused) {
  const nn::Model m = Lenet();
  const auto steps = PlanSteps(m);
  ASSERT_EQ(steps.size(), 5u);
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.Name(m));
  EXPECT_EQ(names, (std::vector<std::string>{"conv1+pool1", "conv2+pool2", "fc1", "fc2", "fc3"}));
}

TEST(CompilerTest, TilingLayoutAndInstructionCountsOfConv2) {
  const nn::Model m = Lenet();
  const config::TpuConfig c = config::LoadConfig("small-16");
  const LayerCompiler lc(m, PlanSteps(m)[1], c);
  // conv2: 3 x 3 x 6 inputs = K 54 = 4 K-tiles of 16; 16 outputs = 1 N-tile; pooling keeps
  // the 12 x 12 conv outputs that form whole 2 x 2 windows (13 x 13 -> 6 x 6).
  EXPECT_EQ(lc.K(), 54);
  EXPECT_EQ(lc.RowsPerImage(), 144);
  EXPECT_EQ(lc.OutRowsPerImage(), 36);
  EXPECT_EQ(lc.MacsPerImage(), 144 * 54 * 16);
  const int batch = 8;  // 1,152 rows: chunks of 512 (half the accumulators) -> 3 chunks
  std::vector<int8_t> act(static_cast<size_t>(batch * lc.InShape().Size()), 1);
  const LayerJob lj = lc.Build(act, batch);
  const engine::ExecJob& job = lj.exec;
  const std::string text = isa::Disassemble(job.program);
  EXPECT_EQ(lj.chunks, 3);
  EXPECT_EQ(Count(text, "matmul"), 3 * 4);
  EXPECT_EQ(Count(text, "activate"), 3);
  EXPECT_EQ(Count(text, "read_weights"), 3);
  EXPECT_EQ(Count(text, "read_host"), 1 + 3) << text;  // parameters, one per chunk
  EXPECT_EQ(Count(text, "write_host"), 3);
  EXPECT_NE(text.find("pool=avg"), std::string::npos);
  EXPECT_NE(text.find("relu"), std::string::npos);
  EXPECT_EQ(job.weight_image.size(), 4u * 16 * 16);
  EXPECT_EQ(job.host_out_bytes, static_cast<uint64_t>(batch * 36 * 16));
  // Input rows: chunk 0's first K-tile holds the im2col of image 0's first pixel, whose
  // pooling window starts at (0, 0): 16 bytes = taps (0,0,0..5), (0,1,0..5), (0,2,0..3).
  for (int i = 0; i < 16; ++i) EXPECT_EQ(job.host_image[static_cast<size_t>(i)], 1) << i;
  EXPECT_NE(lj.summary.find("conv2"), std::string::npos) << lj.summary;
}

// A dense layer of 200 outputs on 2 x 2 inputs: 50 output tiles on teach-4.
nn::Model WideDense() {
  nn::Model wide;
  wide.name = "wide";
  wide.input = {2, 2, 1};
  wide.layers = {MakeLayer(LayerType::kFlatten), MakeLayer(LayerType::kDense, 200)};
  wide = test::Randomize(wide, 3);
  nn::Quantize(&wide, test::RandomImages(wide, 8, 4), 8);
  return wide;
}

TEST(CompilerTest, UnsupportedLayersAndSizesAreClearErrors) {
  nn::Model m;
  m.name = "badpool";
  m.input = {8, 8, 1};
  m.layers = {MakeLayer(LayerType::kMaxPool2d), MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 3)};
  m = test::Randomize(m, 1);
  EXPECT_THROW(PlanSteps(m), UsageError) << "not quantized";
  const nn::Model wide = WideDense();
  try {
    LayerCompiler(wide, PlanSteps(wide)[0], config::LoadConfig("teach-4"));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("need 50 VPU parameter sets"), std::string::npos)
        << e.what();
  }
}

// A layer whose K-tiles the unified buffer cannot hold is refused when its compiler is
// made, before any layer of the network runs (it was refused only when its turn came).
TEST(CompilerTest, KTilesBeyondTheUnifiedBufferAreRefusedUpFront) {
  const nn::Model wide = WideDense();  // K = 4: one K-tile of a 16 x 16 array
  config::TpuConfig c = config::LoadConfig("small-16");
  EXPECT_NO_THROW(LayerCompiler(wide, PlanSteps(wide, c)[0], c));
  c.ub_depth_rows = 3;  // two K-tiles of inputs and two output tiles need 4 at the least
  try {
    LayerCompiler(wide, PlanSteps(wide, c)[0], c);
    FAIL() << "made a compiler for a layer the unified buffer cannot hold";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("1 K-tiles do not fit the unified buffer (3 rows)"),
              std::string::npos)
        << e.what();
  }
}

// Layers wider than a chip's parameter sets or weight memory are split into output-channel
// groups; a config that cannot hold even one output tile is an error naming the field.
TEST(CompilerTest, WideLayersSplitIntoChannelGroups) {
  const nn::Model wide = WideDense();
  config::TpuConfig c = config::LoadConfig("teach-4");  // 32 parameter sets: 128 channels
  std::vector<std::string> names;
  for (const auto& s : PlanSteps(wide, c)) names.push_back(s.Name(wide));
  EXPECT_EQ(names, (std::vector<std::string>{"l1.ch0-127", "l1.ch128-199"}));
  c.weight_mem_bytes = 16 * 10;  // K = 4: one K-tile of 16 bytes per output tile: 10 tiles
  EXPECT_EQ(PlanSteps(wide, c).size(), 5u);
  c.weight_mem_bytes = 15;  // not even one tile
  const auto steps = PlanSteps(wide, c);
  ASSERT_EQ(steps.size(), 1u);
  try {
    LayerCompiler(wide, steps[0], c);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("weight_mem_bytes"), std::string::npos) << e.what();
  }
}

// Awkward shapes: a 5 x 5 stride-2 same conv of 150 filters with fused max pooling of an
// odd map, a 1 x 1 conv, a 3 x 3 same conv of 7 filters, a dense layer of 300; on teach-4
// the first and the dense layer need more parameter sets than it has.
nn::Model AwkwardCnn() {
  nn::Model m;
  m.name = "awkward";
  m.input = {13, 11, 3};
  m.layers = {MakeLayer(LayerType::kConv2d, 150, 5, 2, "same"),  // 7 x 6 x 150
              MakeLayer(LayerType::kMaxPool2d),                  // 3 x 3 x 150
              MakeLayer(LayerType::kConv2d, 40, 1),              // 3 x 3 x 40
              MakeLayer(LayerType::kConv2d, 7, 3, 1, "same"),    // 3 x 3 x 7
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 300),
              MakeLayer(LayerType::kDense, 10, 1, 1, "valid", Activation::kSoftmax)};
  return RandomQuantized(m, 12);
}

void ExpectAwkwardBitExact(const config::TpuConfig& c, engine::EngineKind kind, size_t steps) {
  SCOPED_TRACE(c.name);
  const nn::Model m = AwkwardCnn();
  EXPECT_EQ(PlanSteps(m, c).size(), steps);
  const data::MnistSet images = test::RandomImages(m, 9, 14);
  const auto chip = test::TestEngine(kind, c, {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, 4);
  ExpectExactAndVaried(r, 3);
}

TEST(CompilerTest, AwkwardCnnIsBitExactOnEveryPresetFastEngine) {
  // teach-4: conv1 and the 300-unit layer split (2 and 3 groups); lab-8: the 300 (2).
  const std::vector<std::pair<const char*, size_t>> presets = {
      {"teach-4", 8}, {"lab-8", 6}, {"small-16", 5}, {"edge-32", 5}, {"tpu-v1", 5}};
  for (const auto& [preset, steps] : presets) {
    ExpectAwkwardBitExact(config::LoadConfig(preset), engine::EngineKind::kFast, steps);
  }
  config::TpuConfig tight = config::LoadConfig("teach-4");
  // 4 KB of weight memory: conv1 has 19 K-tiles of 16 bytes per output tile, so 13 tiles
  // (52 channels) per job, 3 jobs; then 2, 1, 5 and 1 jobs for the other layers.
  tight.weight_mem_bytes = 4096;
  ExpectAwkwardBitExact(tight, engine::EngineKind::kFast, 12);
}

TEST(CompilerTest, AwkwardCnnIsBitExactOnTeach4Rtl) {
  ExpectAwkwardBitExact(config::LoadConfig("teach-4"), engine::EngineKind::kRtl, 8);
}

// A CNN unlike LeNet: 5 x 5 kernels with stride 2 and same padding, 20 channels (more than
// one output tile), max pooling of an odd-sized map, a 3 x 3 same conv without pooling.
nn::Model SecondCnn() {
  nn::Model m;
  m.name = "second";
  m.input = {11, 11, 3};
  m.layers = {MakeLayer(LayerType::kConv2d, 20, 5, 2, "same"),  // 6 x 6 x 20
              MakeLayer(LayerType::kMaxPool2d),                 // 3 x 3 x 20
              MakeLayer(LayerType::kConv2d, 7, 3, 1, "same"),   // 3 x 3 x 7
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 33),
              MakeLayer(LayerType::kDense, 10, 1, 1, "valid", Activation::kSoftmax)};
  return RandomQuantized(m, 5);
}

void ExpectBitExact(const char* preset, int batch, engine::EngineKind kind) {
  const nn::Model m = SecondCnn();
  const data::MnistSet images = test::RandomImages(m, 20, 7);
  const auto chip = test::TestEngine(kind, config::LoadConfig(preset), {});
  // Layer jobs (host im2col), then the whole network as one program per batch.
  const TpuRunResult r =
      RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, batch, {}, true);
  ASSERT_EQ(r.logits.size(), 20u);
  ExpectExactAndVaried(r, 10);
  EXPECT_EQ(r.layers.size(), 4u);
  EXPECT_EQ(r.layers[0].name, "l0+l1");
  const TpuRunResult w =
      RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, batch);
  EXPECT_EQ(w.plan.rfind("whole network", 0), 0u) << w.plan;
  EXPECT_EQ(w.logits, r.logits);
  ExpectExactAndVaried(w, 10);
}

class CompilerEngineTest : public ::testing::TestWithParam<engine::EngineKind> {};

TEST_P(CompilerEngineTest, SecondCnnIsBitExactOnTeach4) {
  ExpectBitExact("teach-4", 7, GetParam());
}
TEST_P(CompilerEngineTest, SecondCnnIsBitExactOnSmall16) {
  ExpectBitExact("small-16", 20, GetParam());
}

TEST_P(CompilerEngineTest, LenetOn200MnistImagesIsBitExact) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const nn::Model m = Lenet();
  const data::MnistSet set = data::LoadMnist(dir, false, 200);
  const auto chip = test::TestEngine(GetParam(), config::LoadConfig("small-16"), {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, set.pixels.data(), set.labels.data(), 200, 64);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_GE(r.correct, 194);  // the committed model gets 98.9 % of all 10,000 right
  // Per-layer counters add up; MACs match the layers' arithmetic.
  EXPECT_EQ(r.TotalMacs(),
            200 * (30 * 30 * 9 * 6 + 12 * 12 * 54 * 16 + 576 * 120 + 120 * 84 + 84 * 10));
  uint64_t cycles = 0;
  for (const auto& l : r.layers) cycles += l.counters.cycles;
  EXPECT_EQ(cycles, r.Total().cycles);
}

// What imported models bring: a depthwise convolution with explicit, uneven padding and
// ReLU6, a 1 x 1 convolution, average pooling of a 3 x 3 window at stride 1 (its own
// step, a convolution on the chip), a stride-2 convolution, global average pooling.
nn::Model ThirdCnn() {
  nn::Model m;
  m.name = "third";
  m.input = {10, 9, 3};
  nn::Layer dw = MakeLayer(LayerType::kConv2d, 3, 3, 2, "explicit", Activation::kRelu6);
  dw.depthwise = true;
  dw.pad_top = 1, dw.pad_left = 0, dw.pad_bottom = 2, dw.pad_right = 1;  // 6 x 5 x 3
  nn::Layer avg = MakeLayer(LayerType::kAvgPool2d);
  avg.pool_h = avg.pool_w = 3, avg.pool_stride = 1;  // 4 x 3 x 18
  nn::Layer gap = MakeLayer(LayerType::kAvgPool2d);
  gap.global_pool = true;                           // 1 x 1 x 21
  m.layers = {MakeLayer(LayerType::kConv2d, 3, 1),  // 10 x 9 x 3
              dw,
              MakeLayer(LayerType::kConv2d, 18, 1, 1, "valid", Activation::kNone),
              avg,
              MakeLayer(LayerType::kConv2d, 21, 2, 1, "same"),
              gap,
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 10, 1, 1, "valid", Activation::kSoftmax)};
  return RandomQuantized(m, 8);
}

// The steps, and the CPU references agreeing layer by layer (the scalar one and the batched
// one), then the chip agreeing with them on a preset (one SystemC chip per test process).
void ExpectThirdCnnBitExact(const char* preset, engine::EngineKind kind) {
  const nn::Model m = ThirdCnn();
  const auto steps = PlanSteps(m);
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.Name(m));
  EXPECT_EQ(names, (std::vector<std::string>{"l0", "l1", "l2", "l3", "l4", "l5", "l7"}));
  EXPECT_TRUE(steps[3].lowered && steps[5].lowered);
  const data::MnistSet images = test::RandomImages(m, 12, 10);
  const nn::Int8Net net(m);
  for (int64_t i = 0; i < images.count; ++i) {
    const auto ref = nn::ReferenceInt8(m, images.Image(i));
    const auto batched = net.Forward(images.Image(i), 1);
    for (size_t l = 0; l < ref.size(); ++l) {
      ASSERT_TRUE(std::equal(ref[l].begin(), ref[l].end(), batched[l].data())) << "layer " << l;
    }
  }
  const auto chip = test::TestEngine(kind, config::LoadConfig(preset), {});
  const TpuRunResult r =
      RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, 5, {}, true);
  ExpectExactAndVaried(r, 5);
  // The depthwise layer's useful MACs: 6 x 4 outputs x 9 taps x 3 channels, not the zeros.
  EXPECT_EQ(r.layers[1].macs, images.count * 6 * 4 * 9 * 3);
  // The whole network in one program: windows of every kind (uneven padding, stride 2, the
  // average poolings as convolutions, a window of the whole map).
  const TpuRunResult w = RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, 5);
  EXPECT_EQ(w.plan.rfind("whole network", 0), 0u) << w.plan;
  ExpectExactAndVaried(w, 5);
  EXPECT_EQ(w.TotalMacs(), r.TotalMacs());
}

TEST_P(CompilerEngineTest, ImportedLayerKindsAreBitExactOnTeach4) {
  ExpectThirdCnnBitExact("teach-4", GetParam());
}
TEST_P(CompilerEngineTest, ImportedLayerKindsAreBitExactOnSmall16) {
  ExpectThirdCnnBitExact("small-16", GetParam());
}

// Max pooling of other windows runs as passes of the VPU's 4-row maximum: a standalone
// 2 x 2 at the input (4 taps: 1 pass), a 2 x 3 window of stride 1 (6 taps: 2 groups, then
// 1), a 3 x 3 window of stride 2 (9 taps: 3 groups, then 1); bit-exact on both engines.
nn::Model MaxPoolCnn() {
  nn::Model m;
  m.name = "maxpools";
  m.input = {12, 11, 3};
  nn::Layer p23 = MakeLayer(LayerType::kMaxPool2d);
  p23.pool_h = 2, p23.pool_w = 3, p23.pool_stride = 1;
  nn::Layer p33 = MakeLayer(LayerType::kMaxPool2d);
  p33.pool_h = p33.pool_w = 3, p33.pool_stride = 2;
  m.layers = {MakeLayer(LayerType::kMaxPool2d),                 // 6 x 5 x 3
              MakeLayer(LayerType::kConv2d, 6, 3, 1, "same"),   // 6 x 5 x 6
              p23,                                              // 5 x 3 x 6
              MakeLayer(LayerType::kConv2d, 5, 1, 1, "valid"),  // 5 x 3 x 5
              p33,                                              // 2 x 1 x 5
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 10, 1, 1, "valid", Activation::kSoftmax)};
  return RandomQuantized(m, 15);
}

TEST_P(CompilerEngineTest, MaxPoolingOfAnyWindowIsBitExact) {
  const nn::Model m = MaxPoolCnn();
  std::vector<std::string> names;
  for (const auto& s : PlanSteps(m)) names.push_back(s.Name(m));
  EXPECT_EQ(names, (std::vector<std::string>{"l0.pass1", "l1", "l2.pass1", "l2.pass2", "l3",
                                             "l4.pass1", "l4.pass2", "l6"}));
  const data::MnistSet images = test::RandomImages(m, 10, 17);
  const auto chip = test::TestEngine(GetParam(), config::LoadConfig("teach-4"), {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, images.pixels.data(), nullptr, images.count, 3);
  ExpectExactAndVaried(r, 3);
}

INSTANTIATE_TEST_SUITE_P(Engines, CompilerEngineTest, ::testing::ValuesIn(test::TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

TEST(EnergyTest, TotalsAreTheSumOfComponentsAndTheTableDrivesThem) {
  const config::TpuConfig c = config::LoadConfig("small-16");
  const report::EnergyTable t = report::LoadEnergyTable(report::DefaultEnergyTablePath());
  hw::ChipCounters get;
  get.macs = 1000;
  get.weight_fifo_pops = 10;
  get.ub_reads = 7;
  get.ub_writes = 3;
  get.acc_reads = 5;
  get.acc_writes = 5;
  get.weight_fifo_pushes = 10;
  get.vpu_rows_in = 4;
  get.host_bytes_read = 800;
  const report::EnergyBreakdown e = report::ComputeEnergy(get, c, t);
  double sum = 0;
  for (const auto& [k, v] : e.components) sum += v;
  EXPECT_DOUBLE_EQ(e.Total(), sum);
  EXPECT_DOUBLE_EQ(e.components[0].second, 1000 * (0.2 + 0.1));    // mac
  EXPECT_DOUBLE_EQ(e.components.back().second, 800 * 1300.0 / 8);  // dram
  // 256 KiB unified buffer: between the 32 KiB (20 pJ) and 1 MiB (100 pJ) points.
  EXPECT_GT(t.SramAccessPj(262144), 20.0);
  EXPECT_LT(t.SramAccessPj(262144), 100.0);
  EXPECT_DOUBLE_EQ(t.SramAccessPj(32768), 20.0);
  report::EnergyTable doubled = t;
  doubled.dram_64bit_access_pj *= 2;
  const report::EnergyBreakdown e2 = report::ComputeEnergy(get, c, doubled);
  EXPECT_DOUBLE_EQ(e2.Total() - e.Total(), e.components.back().second);
  // The same counts on a bf16 chip (docs/energy.md): float MACs and vector lanes, two bytes
  // an operand in the unified buffer, the FIFO and the weight registers.
  config::TpuConfig b = c;
  b.dtype = hw::Dtype::kBf16;
  const report::EnergyBreakdown eb = report::ComputeEnergy(get, b, t);
  auto at = [](const report::EnergyBreakdown& x, const std::string& name) {
    for (const auto& [k, v] : x.components)
      if (k == name) return v;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(at(eb, "mac"), 1000 * (1.1 + 0.9));
  EXPECT_DOUBLE_EQ(at(eb, "vpu"), 4 * 16 * 1.1);
  EXPECT_DOUBLE_EQ(at(eb, "weight_load"), 2 * at(e, "weight_load"));
  EXPECT_DOUBLE_EQ(at(eb, "accumulators"), at(e, "accumulators"));  // float32 as int32
  EXPECT_GT(at(eb, "unified_buffer"),
            2 * at(e, "unified_buffer"));  // twice the bytes, a larger SRAM
}

}  // namespace
}  // namespace tpu::compiler
