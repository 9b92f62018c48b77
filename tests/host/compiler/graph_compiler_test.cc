// Graph models on the chip (host/compiler/graph_*.h, network_compiler.h): a network with
// every kind of layer and join the compiler lowers (residual adds fused into a layer's
// activate and standalone, concatenations of channels that straddle tiles, max pooling with
// padding of maps with and without negative values, depthwise and average pooling with
// padding, global pooling, a dense layer over a map and over a concatenation of vectors)
// runs bit-exact against the CPU int8 reference on every preset and on the RTL; and the
// plan keeps working when the unified buffer, the parameter sets or the accumulators are
// small: groups of images, spilled tensors, bands of rows, parameter sets streamed.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <utility>

#include "arith/bf16.h"
#include "arith/vector.h"
#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/compiler/graph_bound.h"
#include "host/compiler/graph_emitter.h"
#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/compiler/network_compiler.h"
#include "host/isa/assembler.h"
#include "host/nn/int8_net.h"
#include "host/nn/int8_reference.h"
#include "host/nn/quantize.h"
#include "host/run/tpu_runner.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/test_engines.h"

namespace tpu::compiler {

using run::RunModelOnTpu;
using run::TpuRunResult;
namespace {

using nn::Activation;
using nn::LayerType;

nn::Layer L(LayerType type, std::vector<int> inputs, int out_c = 0, int k = 3, int stride = 1,
            int pad = 0, Activation act = Activation::kNone) {
  nn::Layer l = test::MakeLayer(type, out_c, k, stride, pad ? "explicit" : "valid", act);
  l.activation = act;
  l.inputs = std::move(inputs);
  l.pad_top = l.pad_left = l.pad_bottom = l.pad_right = pad;
  if (l.IsPool()) {
    l.pool_h = l.pool_w = k;
    l.pool_stride = stride;
  }
  return l;
}

// A model of no data set taking `input` (its layers still to come).
nn::Model NewModel(const std::string& name, const decltype(nn::Model::input)& input) {
  nn::Model m;
  m.name = name;
  m.preprocess = "none";
  m.dataset = "none";
  m.input = input;
  return m;
}
nn::Layer Depthwise(int input, int stride) {
  nn::Layer l = L(LayerType::kConv2d, {input}, 0, 3, stride, 1, Activation::kRelu);
  l.depthwise = true;
  return l;
}
nn::Layer GlobalPool(int input) {
  nn::Layer l = L(LayerType::kAvgPool2d, {input});
  l.global_pool = true;
  return l;
}

// 12 x 12 x 3 float inputs through every join and layer kind the compiler lowers.
nn::Model GraphModel(uint64_t seed) {
  nn::Model m = NewModel("graph", {12, 12, 3});
  const nn::Layer dw = Depthwise(7, 2), gap = GlobalPool(11);
  m.layers = {
      L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),  // 0
      L(LayerType::kMaxPool2d, {0}, 0, 3, 2, 1),                   // 1: 6 x 6 x 8, >= 0
      L(LayerType::kConv2d, {1}, 8, 3, 1, 1),                      // 2
      L(LayerType::kAdd, {2, 1}, 0, 0, 1, 0, Activation::kRelu),   // 3: into 2
      L(LayerType::kConv2d, {3}, 5, 1),                            // 4: negatives
      L(LayerType::kConv2d, {3}, 7, 3, 1, 1, Activation::kRelu6),  // 5
      L(LayerType::kConcat, {4, 5}),                               // 6: 12 channels
      L(LayerType::kMaxPool2d, {6}, 0, 3, 1, 1),                   // 7: pads -128
      dw,                                                          // 8: 3 x 3 x 12
      L(LayerType::kFlatten, {8}),                                 // 9
      L(LayerType::kAdd, {1, 3}),                                  // 10: standalone
      L(LayerType::kAvgPool2d, {10}, 0, 3, 1, 1),                  // 11: with padding
      gap,                                                         // 12: 1 x 1 x 8
      L(LayerType::kDense, {9}, 6, 1, 1, 0, Activation::kRelu),    // 13: over a map
      L(LayerType::kConcat, {12, 13}),                             // 14: 1 x 1 x 14
      L(LayerType::kDense, {14}, 4),                               // 15
  };
  return test::Randomize(m, seed);
}

nn::Model QuantizedGraph(uint64_t seed) {
  nn::Model m = GraphModel(seed);
  nn::Quantize(&m, nn::SyntheticInputs(m, 16, seed), 16);
  return m;
}

// Runs `images` synthetic inputs in batches of `batch` on the chip and expects every output
// equal to the CPU int8 reference (RunModelOnTpu counts the ones that differ).
TpuRunResult RunExact(const nn::Model& m, const config::TpuConfig& c, engine::EngineKind kind,
                      int images, int batch) {
  const auto chip = test::TestEngine(kind, c, {});
  const nn::InputSet in = nn::SyntheticInputs(m, images, 9);
  const TpuRunResult r = RunModelOnTpu(m, *chip, in, images, batch);
  EXPECT_EQ(r.plan.rfind("whole network", 0), 0u) << r.plan;
  EXPECT_EQ(r.mismatches, 0) << c.name << ": " << r.plan;
  const bool bf16 = c.dtype == hw::Dtype::kBf16;
  EXPECT_EQ(static_cast<int64_t>(bf16 ? r.logits_bf16.size() : r.logits.size()), images);
  return r;
}

// RunExact on the fast engine on int8 chips of four array sizes, 5 inputs at batch 2.
void RunExactOnInt8Presets(const nn::Model& m) {
  for (const char* preset : {"teach-4", "lab-8", "small-16", "tpu-v1"})
    RunExact(m, config::LoadConfig(preset), engine::EngineKind::kFast, 5, 2);
}

// Runs m on tpu-v3 (bf16), which must refuse it with an error containing `why`.
void ExpectRefusedOnBf16(const nn::Model& m, const char* what, const char* why) {
  const auto chip = test::TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"), {});
  try {
    RunModelOnTpu(m, *chip, nn::SyntheticInputs(m, 1, 2), 1, 1);
    ADD_FAILURE() << what;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(GraphCompilerTest, TheBatchedInt8NetworkEqualsTheScalarReference) {
  const nn::Model m = QuantizedGraph(1);
  const nn::InputSet in = nn::SyntheticInputs(m, 4, 2);
  const nn::MatrixI8 x = nn::Int8Inputs(m, in, 0, 4);
  const std::vector<nn::MatrixI8> batched = nn::Int8Net(m).Forward(x);
  for (int i = 0; i < 4; ++i) {
    const auto scalar = nn::ReferenceInt8(m, x.row(i).data());
    for (size_t l = 0; l < m.layers.size(); ++l) {
      const auto& b = batched[l];
      EXPECT_TRUE(std::equal(scalar[l].begin(), scalar[l].end(), b.row(i).data()))
          << "layer " << m.layers[l].name;
    }
  }
}

class GraphPresetTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphPresetTest, EveryJoinAndLayerKindIsBitExact) {
  const nn::Model m = QuantizedGraph(1);
  RunExact(m, config::LoadConfig(GetParam()), engine::EngineKind::kFast, 7, 3);
}

INSTANTIATE_TEST_SUITE_P(Presets, GraphPresetTest,
                         ::testing::Values("teach-4", "lab-8", "small-16", "edge-32", "tpu-v1"));

// The RTL runs the same program with the same result (one SystemC chip per test process).
TEST(GraphCompilerTest, EveryJoinAndLayerKindIsBitExactOnTheRtl) {
  const nn::Model m = QuantizedGraph(1);
  RunExact(m, config::LoadConfig("lab-8"), engine::EngineKind::kRtl, 3, 3);
}

// Elementwise products (the vector unit's residual product, docs/quantization.md
// "Products"): a signed map times a non-negative one, that times the signed one again with
// ReLU, a map of 20 channels times itself before a dense layer; bit-exact on int8 chips of
// every array size. A bf16 chip refuses them by name.
nn::Model MulModel(uint64_t seed) {
  nn::Model m = NewModel("mul", {6, 6, 3});
  m.layers = {
      L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),  // 0: >= 0
      L(LayerType::kConv2d, {0}, 8, 3, 1, 1),                                   // 1: signed
      L(LayerType::kMul, {1, 0}),                                               // 2
      L(LayerType::kMul, {2, 1}, 0, 0, 1, 0, Activation::kRelu),                // 3: ReLU
      L(LayerType::kConv2d, {3}, 20, 1),                                        // 4: 2 tiles
      L(LayerType::kMul, {4, 4}),                                               // 5: squared
      L(LayerType::kFlatten, {5}),                                              // 6
      L(LayerType::kDense, {6}, 4),                                             // 7
  };
  m = test::Randomize(m, seed);
  nn::Quantize(&m, nn::SyntheticInputs(m, 16, seed), 16);
  return m;
}

TEST(GraphCompilerTest, ProductsAreBitExactOnInt8ChipsAndRefusedOnBf16) {
  const nn::Model m = MulModel(5);
  RunExactOnInt8Presets(m);
  ExpectRefusedOnBf16(m, "a product ran on a bf16 chip", "mul 'l2'");
}

TEST(GraphCompilerTest, ProductsAreBitExactOnTheRtl) {
  RunExact(MulModel(6), config::LoadConfig("lab-8"), engine::EngineKind::kRtl, 3, 3);
}

// The vector unit's tables (docs/vpu.md) as operations: a sigmoid and a tanh of signed maps,
// their product (an LSTM cell's i g), a tanh of 20 channels before a dense layer; bit-exact
// on int8 chips of every array size. A bf16 chip, which has no tables, refuses them by name.
nn::Model TableModel(uint64_t seed) {
  nn::Model m = NewModel("tables", {6, 6, 3});
  m.layers = {
      L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1),  // 0: signed
      L(LayerType::kSigmoid, {0}),                           // 1
      L(LayerType::kConv2d, {0}, 8, 1),                      // 2
      L(LayerType::kTanh, {2}),                              // 3
      L(LayerType::kMul, {1, 3}),                            // 4
      L(LayerType::kConv2d, {4}, 20, 1),                     // 5: 2 tiles
      L(LayerType::kTanh, {5}),                              // 6
      L(LayerType::kFlatten, {6}),                           // 7
      L(LayerType::kDense, {7}, 4),                          // 8
  };
  m = test::Randomize(m, seed);
  nn::Quantize(&m, nn::SyntheticInputs(m, 16, seed), 16);
  return m;
}

TEST(GraphCompilerTest, SigmoidAndTanhAreBitExactOnInt8ChipsAndRefusedOnBf16) {
  const nn::Model m = TableModel(7);
  RunExactOnInt8Presets(m);
  ExpectRefusedOnBf16(m, "a table ran on a bf16 chip", "sigmoid 'l1' runs on int8 chips only");
}

TEST(GraphCompilerTest, SigmoidAndTanhAreBitExactOnTheRtl) {
  RunExact(TableModel(8), config::LoadConfig("lab-8"), engine::EngineKind::kRtl, 3, 3);
}

// LSTM layers (PyTorch's nn.LSTM, one layer, from a zero state) as the operations a cell is
// made of: over the model's packed input (unpacked first) and over a map an operation wrote,
// hidden sizes of one tile and of several, followed by a dense layer; bit-exact against the
// int8 reference (nn::Int8LstmStep, step by step) on int8 chips of every array size.
nn::Model LstmModel(uint64_t seed) {
  nn::Model m = NewModel("lstm", {1, 6, 5});  // 6 steps of 5 inputs
  m.layers = {
      L(LayerType::kLstm, {nn::kModelInput}, 7),       // 0: 2 tiles of h on teach-4
      L(LayerType::kDense, {0}, 3),                    // 1
      L(LayerType::kConv2d, {nn::kModelInput}, 9, 1),  // 2: a map of 9 channels per step
      L(LayerType::kLstm, {2}, 3),                     // 3
      L(LayerType::kConcat, {1, 3}),                   // 4
  };
  m = test::Randomize(m, seed);
  nn::Quantize(&m, nn::SyntheticInputs(m, 16, seed), 16);
  return m;
}

TEST(GraphCompilerTest, LstmLayersAreBitExactOnInt8ChipsAndRefusedOnBf16) {
  const nn::Model m = LstmModel(11);
  RunExactOnInt8Presets(m);
  ExpectRefusedOnBf16(m, "an lstm ran on a bf16 chip", "lstm 'l0' runs on int8 chips only");
}

TEST(GraphCompilerTest, LstmLayersAreBitExactOnTheRtl) {
  RunExact(LstmModel(12), config::LoadConfig("lab-8"), engine::EngineKind::kRtl, 3, 3);
}

// The plan adapts to a small unified buffer: groups smaller than the batch, tensors kept in
// host memory (and said so), operations in bands of rows; every output still exact.
TEST(GraphCompilerTest, SmallUnifiedBuffersGroupSpillAndBand) {
  const nn::Model m = QuantizedGraph(3);
  config::TpuConfig c = config::LoadConfig("lab-8");

  for (int rows : {16384, 700, 400, 160}) {
    c.ub_depth_rows = rows;
    const TpuRunResult r = RunExact(m, c, engine::EngineKind::kFast, 6, 6);
    if (rows == 16384) {
      EXPECT_NE(r.plan.find("groups of 6"), std::string::npos) << r.plan;
    }
    if (rows == 700) {  // a segment runs groups smaller than the batch
      EXPECT_TRUE(std::regex_search(r.plan, std::regex("in groups of [1-5][;)]"))) << r.plan;
    }
    if (rows <= 400) {
      EXPECT_FALSE(r.spilled.empty()) << r.plan;
    }
    if (rows == 160) {
      EXPECT_NE(r.plan.find("in bands of"), std::string::npos) << r.plan;
    }
  }
  // Not even a band of one row of the first convolution (with its whole packed input).
  c.ub_depth_rows = 100;
  const NetworkCompiler nc(m, c, 1);
  EXPECT_FALSE(nc.Fits());
  EXPECT_NE(nc.WhyNot().find("not even one output row of 'l0' fits the unified buffer"),
            std::string::npos)
      << nc.WhyNot();
}

// Fewer parameter sets than the network has: they stream in as the passes need them.
TEST(GraphCompilerTest, ParameterSetsStreamWhenTheyDoNotFit) {
  const nn::Model m = QuantizedGraph(4);
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.param_sets = 2;
  RunExact(m, c, engine::EngineKind::kFast, 4, 2);
  c.acc_depth_rows = 16;  // passes of at most 8 rows: images in chunks
  RunExact(m, c, engine::EngineKind::kFast, 2, 2);
}

// A depthwise layer or an average pooling lowers with each tap's channels on a K-tile of
// their own (one diagonal tile per tap and channel tile; equal taps share it, and it stays
// in the array) where that loads fewer tiles than packing the receptive field densely, and
// densely where not: 10 channels on lab-8 pool through 2 tiles (dense: 32 K-tiles, most
// straddling two taps), while a 3-channel depthwise 3 x 3 fits 27 rows into 4 dense K-tiles
// (9 diagonal tiles tap by tap). Both run bit-exact.
TEST(GraphCompilerTest, DepthwiseAndPoolingLayTheirTapsOutTheCheaperWay) {
  nn::Model m = NewModel("taps", {5, 5, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 3, 1, 1, 0, Activation::kRelu),  // 0
              Depthwise(0, 1),                                                          // 1
              L(LayerType::kConv2d, {1}, 10, 1, 1, 0, Activation::kRelu),               // 2
              GlobalPool(2),                                                            // 3
              L(LayerType::kDense, {3}, 4)};
  m = test::Randomize(m, 6);
  nn::Quantize(&m, nn::SyntheticInputs(m, 8, 1), 8);
  const LoweredGraph g = LowerGraph(m, 8);
  ASSERT_TRUE(g.why_not.empty()) << g.why_not;
  ASSERT_EQ(g.ops.size(), 5u);
  const GraphOp& depthwise = g.ops[1];
  EXPECT_EQ(depthwise.window.channels, 3u);  // dense: the 27-byte receptive field
  ASSERT_EQ(depthwise.terms.size(), 1u);
  EXPECT_EQ(depthwise.terms[0].size(), 4u);
  const GraphOp& pool = g.ops[3];
  EXPECT_EQ(pool.window.channels, 16u);  // tap by tap: the whole 2-tile pixel
  ASSERT_EQ(pool.terms.size(), 2u);
  for (const auto& column : pool.terms) {
    ASSERT_EQ(column.size(), 25u);
    for (const OpTerm& t : column) EXPECT_EQ(t.tile, column.front().tile);
  }
  RunExact(m, config::LoadConfig("lab-8"), engine::EngineKind::kFast, 5, 5);
}

// m with seeded random weights, quantized on 8 synthetic inputs, and its program for `batch`.
EmittedProgram QuantizeAndEmit(nn::Model* m, uint64_t seed, const config::TpuConfig& c, int batch) {
  *m = test::Randomize(*m, seed);
  nn::Quantize(m, nn::SyntheticInputs(*m, 8, seed), 8);
  const LoweredGraph g = LowerGraph(*m, c.array_dim);
  if (!g.why_not.empty()) {
    ADD_FAILURE() << g.why_not;
    return {};
  }
  return EmitGraph(g, PlanGraph(g, c, batch), c, batch);
}

// Every instruction of the program in order, as assembly.
std::vector<std::string> Lines(const EmittedProgram& e) {
  std::vector<std::string> all;
  std::istringstream text(isa::Disassemble(e.program));
  for (std::string line; std::getline(text, line);)
    if (!line.empty() && line[0] != '#') all.push_back(line);
  EXPECT_EQ(all.size(), e.op_of.size());
  return all;
}
// The instructions of operation `op` in program order, as assembly.
std::vector<std::string> OpLines(const EmittedProgram& e, int op) {
  std::vector<std::string> lines;
  const std::vector<std::string> all = Lines(e);
  for (size_t i = 0; i < all.size() && i < e.op_of.size(); ++i)
    if (e.op_of[i] == op) lines.push_back(all[i]);
  return lines;
}
// The number after `key=` in an instruction's line (`none` where it has no such field).
int64_t Operand(const std::string& line, const std::string& key, int64_t none = -1) {
  const size_t at = line.find(" " + key + "=");
  return at == std::string::npos ? none : std::stoll(line.substr(at + key.size() + 2));
}
bool Is(const std::string& line, const char* mnemonic) { return line.rfind(mnemonic, 0) == 0; }

// A 3 x 3 convolution to `filters` channels, a 1 x 1 one of the same width and `stride`, a
// global pooling and a dense layer, quantized.
nn::Model ThenOneByOne(const std::string& name, const decltype(nn::Model::input)& input,
                       int filters, int stride, uint64_t seed) {
  nn::Model m = NewModel(name, input);
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, filters, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, filters, 1, stride, 0, Activation::kRelu), GlobalPool(1),
              L(LayerType::kDense, {2}, 4)};
  m = test::Randomize(m, seed);
  nn::Quantize(&m, nn::SyntheticInputs(m, 8, seed), 8);
  return m;
}

// Convolutions whose 2 x 2 max pooling follows, four output pixels a row (docs/compiler.md,
// "Four pixels a row"): on lab-8 the first (3 to 2 channels, values of both signs, an odd
// map whose pooling drops its last row and column) and the second (ReLU, an odd map again)
// stream a quarter of the rows through 4 x 4 kernels of stride 2 and pool over lanes; the
// third (3 channels: 12 columns do not fit 8) pools over rows as before.
nn::Model FourPixelsModel() {
  nn::Model m = NewModel("four-pixels", {11, 11, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 2, 3, 1, 1),       // 0: 11 x 11 x 2
              L(LayerType::kMaxPool2d, {0}, 0, 2, 2),                     // 1: 5 x 5
              L(LayerType::kConv2d, {1}, 2, 3, 1, 1, Activation::kRelu),  // 2: 5 x 5 x 2
              L(LayerType::kMaxPool2d, {2}, 0, 2, 2),                     // 3: 2 x 2
              L(LayerType::kConv2d, {3}, 3, 3, 1, 1),                     // 4: 2 x 2 x 3
              L(LayerType::kMaxPool2d, {4}, 0, 2, 2),                     // 5: 1 x 1
              L(LayerType::kDense, {5}, 3)};
  return m;
}

TEST(GraphCompilerTest, ConvolutionsBeforeMaxPoolingTakeFourPixelsARow) {
  nn::Model m = FourPixelsModel();
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const EmittedProgram e = QuantizeAndEmit(&m, 5, c, 2);
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  ASSERT_GE(g.ops.size(), 3u);
  for (int op = 0; op < 3; ++op) {
    const GraphOp& o = g.ops[static_cast<size_t>(op)];
    const bool four = op < 2;  // conv1+pool1, conv2+pool2; not conv4+pool5
    EXPECT_EQ(o.pool, four ? isa::Pool::kLanes : isa::Pool::kMax) << o.name;
    EXPECT_EQ(o.window.pooled, !four) << o.name;
    EXPECT_EQ(o.rows, op == 0 ? 25 : 4) << o.name;  // output pixels (x 4 pooled over rows)
    EXPECT_EQ(o.window.stride_y, four ? 2u : 1u) << o.name;
    bool lanes = false;
    for (const std::string& line : OpLines(e, op))
      if (Is(line, "activate")) lanes = lanes || line.find("pool=lanes") != std::string::npos;
    EXPECT_EQ(lanes, four) << o.name;
  }
  // The useful MACs and the rows of the GEMM stay the layer's: 3 x 3 x 3 x 2 for each of
  // the 100 pixels pooled.
  EXPECT_EQ(g.ops[0].macs, 100 * 27 * 2);
  const TpuRunResult r = RunExact(m, c, engine::EngineKind::kFast, 5, 2);
  ASSERT_FALSE(r.layers.empty());
  EXPECT_EQ(r.layers[0].m, 5 * 100);
  RunExact(m, config::LoadConfig("teach-4"), engine::EngineKind::kFast, 3, 3);
}

TEST(GraphCompilerTest, FourPixelsARowIsBitExactOnTheRtl) {
  nn::Model m = FourPixelsModel();
  m = test::Randomize(m, 5);
  nn::Quantize(&m, nn::SyntheticInputs(m, 8, 5), 8);
  RunExact(m, config::LoadConfig("lab-8"), engine::EngineKind::kRtl, 3, 3);
}

// Two ways of keeping the array streaming (docs/compiler.md, "The program"): a pointwise
// convolution reads its pixels in place, so one matmul streams a pass's eight images where
// window matmuls would go image by image (and their 2N-cycle drains chain while an image has
// fewer than 2N pixels); and a column of several K-tiles reads the next column's tiles right
// after the matmul that switches in its own last tile, while that tile's images stream.
TEST(GraphCompilerTest, PointwiseConvolutionsStreamInPlaceAndTilesAreReadAhead) {
  const nn::Model m = ThenOneByOne("pointwise", {3, 3, 3}, 16, 1, 4);  // op 1: pointwise
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  ASSERT_TRUE(g.why_not.empty()) << g.why_not;
  for (const auto& column : g.ops[1].terms)
    for (const OpTerm& t : column) EXPECT_FALSE(t.window);
  for (const auto& column : g.ops[0].terms) {
    ASSERT_EQ(column.size(), 4u);  // K = 27 of the packed input: 4 tiles of 8 rows
    for (const OpTerm& t : column) EXPECT_TRUE(t.window);
  }
  const EmittedProgram e = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  // The pointwise convolution: two columns of two K-tiles, one matmul of 72 rows each.
  const std::vector<std::string> pointwise = OpLines(e, 1);
  int matmuls = 0;
  for (const std::string& line : pointwise) {
    if (line.rfind("matmul", 0) != 0) continue;
    ++matmuls;
    EXPECT_NE(line.find("rows=72"), std::string::npos) << line;
    EXPECT_EQ(line.find("window"), std::string::npos) << line;
  }
  EXPECT_EQ(matmuls, 4);
  // The first convolution: column 1's four tiles are read while the last K-tile of column 0
  // streams its 8 images (7 window matmuls after the read), not after them; and so are the
  // pointwise convolution's first two tiles while column 1's last K-tile streams.
  const std::vector<std::string> first = OpLines(e, 0);
  std::vector<size_t> reads;
  for (size_t i = 0; i < first.size(); ++i)
    if (first[i].rfind("read_weights", 0) == 0) reads.push_back(i);
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_NE(first[reads[1]].find("tiles=4"), std::string::npos) << first[reads[1]];
  EXPECT_NE(first[reads[2]].find("tiles=2"), std::string::npos) << first[reads[2]];
  for (size_t r = 1; r < 3; ++r) {
    int behind = 0;
    for (size_t i = reads[r] + 1; i < first.size() && first[i].find("switch") == std::string::npos;
         ++i)
      behind += first[i].rfind("matmul", 0) == 0;
    EXPECT_EQ(behind, batch - 1) << "read " << r;
  }
  EXPECT_EQ(pointwise.front().rfind("matmul", 0), 0u) << pointwise.front();  // nothing to read
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// A strided 1 x 1 convolution without padding over maps of a height its stride divides (a
// ResNet downsample) streams a pass's images as one tall map: one window matmul, bit-exact.
TEST(GraphCompilerTest, StridedPointwiseConvolutionsStackTheirImages) {
  const nn::Model m = ThenOneByOne("downsample", {4, 4, 3}, 8, 2, 5);  // op 1: 2 x 2 x 8
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  ASSERT_TRUE(g.why_not.empty()) << g.why_not;
  EXPECT_TRUE(g.ops[1].tall);
  EXPECT_FALSE(g.ops[0].tall);
  const EmittedProgram e = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  std::vector<std::string> matmuls, windows;
  for (const std::string& line : OpLines(e, 1)) {
    if (line.rfind("matmul", 0) == 0) matmuls.push_back(line);
    if (line.rfind("set_window", 0) == 0) windows.push_back(line);
  }
  ASSERT_EQ(matmuls.size(), 1u);  // 8 images x 4 output pixels, K and N one tile each
  EXPECT_NE(matmuls[0].find("rows=32"), std::string::npos) << matmuls[0];
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_NE(windows[0].find("in_h=32"), std::string::npos) << windows[0];
  EXPECT_NE(windows[0].find("out_h=16"), std::string::npos) << windows[0];
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  RunExact(m, c, engine::EngineKind::kFast, 5, 3);  // passes of 3 and 2 images
}

// A pass's accumulator rows never overlap those of the pass before, whose activate waits for
// this pass's first matmul: the region is the next in turn that is free. Here a 3 x 3
// convolution of 4 K-tiles (two regions of 512 rows) fills the first with its one pass, and
// the pointwise one after it (one tile: three regions of 341) would have taken rows 341 to
// 597 in turn, and waited for that activate.
TEST(GraphCompilerTest, APassTakesAccumulatorRowsThePassBeforeLeftAlone) {
  const nn::Model m = ThenOneByOne("regions", {8, 8, 3}, 8, 1, 6);
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  ASSERT_TRUE(g.why_not.empty()) << g.why_not;
  const EmittedProgram e = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  std::istringstream text(isa::Disassemble(e.program));
  const std::regex act(R"(^activate acc=(\d+) ub=\d+ rows=(\d+))");
  int64_t lo = -1, hi = -1, activates = 0;
  for (std::string line; std::getline(text, line);) {
    std::smatch mt;
    if (!std::regex_search(line, mt, act)) continue;
    const int64_t acc = std::stoll(mt[1]), rows = std::stoll(mt[2]);
    EXPECT_TRUE(acc >= hi || acc + rows <= lo) << line << " after [" << lo << ", " << hi << ")";
    lo = acc;
    hi = acc + rows;
    ++activates;
  }
  EXPECT_GE(activates, 3);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// An operation's last pass activates image by image, and the next operation's window
// matmuls (one image each) go between those activates: each waits for its own image's rows,
// not for the whole batch's (in-order issue: a matmul behind all the activates would wait for
// all of them).
TEST(GraphCompilerTest, TheLastPassActivatesImageByImageBetweenTheNextMatmuls) {
  nn::Model m = NewModel("layers", {4, 4, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),  // 0
              L(LayerType::kConv2d, {0}, 8, 3, 1, 1, Activation::kRelu),                // 1
              GlobalPool(1), L(LayerType::kDense, {2}, 4)};
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const EmittedProgram e = QuantizeAndEmit(&m, 7, c, batch);
  std::vector<std::string> all;
  std::istringstream text(isa::Disassemble(e.program));
  for (std::string line; std::getline(text, line);)
    if (!line.empty() && line[0] != '#') all.push_back(line);
  ASSERT_EQ(all.size(), e.op_of.size());
  // After operation 1's first matmul: operation 0's activates, one per image but the first.
  size_t first = all.size();
  for (size_t i = 0; i < all.size() && first == all.size(); ++i)
    if (e.op_of[i] == 1 && all[i].rfind("matmul", 0) == 0) first = i;
  int after = 0;
  for (size_t i = first; i < all.size(); ++i)
    if (e.op_of[i] == 0 && all[i].rfind("activate", 0) == 0) {
      ++after;
      EXPECT_NE(all[i].find("rows=16"), std::string::npos) << all[i];  // one image: 4 x 4
    }
  EXPECT_EQ(after, batch - 1);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// A 3 x 3 convolution to 16 channels, a pointwise one to 8 (two K-tiles on lab-8) and two
// more, each reading the one before in place, a global pooling and a dense layer, quantized;
// and its program.
struct PointwisePair {
  nn::Model m;
  std::vector<std::string> lines;
  std::vector<int32_t> op_of;
};
PointwisePair PointwisePairOn(int side, const config::TpuConfig& c, int batch) {
  PointwisePair p;
  p.m = NewModel("pair", {side, side, 3});
  p.m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 16, 3, 1, 1, Activation::kRelu),
                L(LayerType::kConv2d, {0}, 8, 1, 1, 0, Activation::kRelu),
                L(LayerType::kConv2d, {1}, 8, 1, 1, 0, Activation::kRelu),
                L(LayerType::kConv2d, {2}, 8, 1, 1, 0, Activation::kRelu),
                GlobalPool(3),
                L(LayerType::kDense, {4}, 4)};
  p.m = test::Randomize(p.m, 9);
  nn::Quantize(&p.m, nn::SyntheticInputs(p.m, 8, 9), 8);
  const LoweredGraph g = LowerGraph(p.m, c.array_dim);
  EXPECT_TRUE(g.why_not.empty()) << g.why_not;
  EXPECT_EQ(g.ops[1].terms.front().size(), 2u);
  EXPECT_FALSE(g.ops[2].terms.front().front().window);
  const EmittedProgram e = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  std::istringstream text(isa::Disassemble(e.program));
  for (std::string line; std::getline(text, line);)
    if (!line.empty() && line[0] != '#') p.lines.push_back(line);
  EXPECT_EQ(p.lines.size(), e.op_of.size());
  p.op_of = e.op_of;
  return p;
}

// A pointwise convolution whose output the next reads in place hands its last pass on in
// runs: its last K-tile streams the first image alone, then runs of at least 2N rows (a
// shorter rest joined to the run before), each activated on its own, so the first runs'
// activates go while the later runs stream. (In one matmul and one activate, all eight
// images' activate waited for the last row's drain.) And the next convolution's first pass
// takes accumulator rows none of those activates read, also where no region is clear of the
// last two passes (8 x 8 maps: the two before fill both halves): then one clear of the last.
// A pass of one K-tile (operation 2) has no lone first image: right behind the pass before's
// last matmul, its drain would extend that one's and hold back its activate.
TEST(GraphCompilerTest, APointwiseConvolutionHandsItsLastPassOnInRuns) {
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const std::regex rows(R"(acc=(\d+) .*rows=(\d+))");
  auto field = [&](const std::string& line, int k) {
    std::smatch mt;
    EXPECT_TRUE(std::regex_search(line, mt, rows)) << line;
    return mt.size() > 2 ? std::stoll(mt[k]) : -1;
  };
  for (const int side : {3, 8}) {  // 9 pixels an image (2N = 16 rows take 2), and 64
    const PointwisePair p = PointwisePairOn(side, c, batch);
    std::vector<int64_t> matmuls, activates, one_tile;
    size_t next = p.lines.size();  // operation 2's first matmul
    for (size_t i = 0; i < p.lines.size() && i < p.op_of.size(); ++i) {
      const bool matmul = p.lines[i].rfind("matmul", 0) == 0;
      if (p.op_of[i] == 1 && matmul) matmuls.push_back(field(p.lines[i], 2));
      if (p.op_of[i] == 2 && matmul) one_tile.push_back(field(p.lines[i], 2));
      if (p.op_of[i] == 1 && p.lines[i].rfind("activate", 0) == 0)
        activates.push_back(field(p.lines[i], 2));
      if (p.op_of[i] == 2 && matmul && next == p.lines.size()) next = i;
    }
    const int64_t px = side * side;
    const std::vector<int64_t> runs =
        side == 3 ? std::vector<int64_t>{1, 2, 2, 3} : std::vector<int64_t>(batch, 1);
    std::vector<int64_t> want{batch * px};
    for (const int64_t r : runs) want.push_back(r * px);
    EXPECT_EQ(matmuls, want) << side;
    EXPECT_EQ(activates, std::vector<int64_t>(want.begin() + 1, want.end())) << side;
    const std::vector<int64_t> one_pass{18, 18, 18, 18}, two{256, 64, 64, 64, 64};  // 2s; 4 + 1s
    EXPECT_EQ(one_tile, side == 3 ? one_pass : two) << side;
    ASSERT_LT(next, p.lines.size());
    const int64_t lo = field(p.lines[next], 1), hi = lo + field(p.lines[next], 2);
    for (size_t i = 0; i < next; ++i)
      if (p.op_of[i] == 1 && p.lines[i].rfind("activate", 0) == 0) {
        const int64_t acc = field(p.lines[i], 1);
        EXPECT_TRUE(acc >= hi || acc + field(p.lines[i], 2) <= lo)
            << p.lines[i] << " vs " << p.lines[next];
      }
    RunExact(p.m, c, engine::EngineKind::kFast, batch, batch);
    RunExact(p.m, c, engine::EngineKind::kFast, 5, 5);
  }
}

// A pass of fewer rows than 2N (a global average pooling's: one row per image, 8 images)
// takes the rows right after the pass before's, and the activates of such passes wait until
// the operation's matmuls are done: after the next pass's first matmul, an activate would
// wait for the drain of rows that pass's matmuls keep extending (timing.md) and hold back the
// rest of them.
TEST(GraphCompilerTest, ShortPassesLineUpAndTheirActivatesWait) {
  nn::Model m = NewModel("short", {3, 3, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              GlobalPool(0), L(LayerType::kDense, {1}, 4)};
  const config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 8;
  const EmittedProgram e = QuantizeAndEmit(&m, 11, c, batch);
  const std::regex acc(R"(^matmul .*acc=(\d+) rows=8)");
  std::vector<int64_t> firsts;  // each pass's first matmul (it overwrites: no `accumulate`)
  size_t last_matmul = 0, first_activate = SIZE_MAX;
  const std::vector<std::string> lines = OpLines(e, 1);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch mt;
    if (std::regex_search(lines[i], mt, acc)) {
      last_matmul = i;
      if (lines[i].find("accumulate") == std::string::npos) firsts.push_back(std::stoll(mt[1]));
    }
    if (lines[i].rfind("activate", 0) == 0) first_activate = std::min(first_activate, i);
  }
  ASSERT_EQ(firsts.size(), 4u);  // 32 channels: four output tiles of 8
  for (size_t k = 1; k < firsts.size(); ++k) EXPECT_EQ(firsts[k], firsts[k - 1] + batch) << k;
  EXPECT_GT(first_activate, last_matmul);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// On a core of two matrix units (docs/compiler.md, "Several matrix units") a convolution of
// four output tiles gives each unit two columns, term by term in turn: matmuls and activates
// on both units, bit-exact, in fewer cycles than on one. A 1 x 1 convolution of one output
// tile (and four K-tiles: the array binds it with two units) gives each unit its own images.
TEST(GraphCompilerTest, ConvolutionsSpreadOverTheMatrixUnits) {
  nn::Model m = NewModel("units", {8, 8, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, 8, 1, 1, 0, Activation::kRelu), GlobalPool(1),
              L(LayerType::kDense, {2}, 4)};
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.mxus_per_core = 2;
  const int batch = 4;
  const EmittedProgram e = QuantizeAndEmit(&m, 13, c, batch);
  for (int op = 0; op < 2; ++op) {
    int on_one[2] = {0, 0};  // the operation's matmuls, activates on unit 1
    for (const std::string& line : OpLines(e, op)) {
      if (line.find("mxu=1") == std::string::npos) continue;
      on_one[0] += line.rfind("matmul", 0) == 0;
      on_one[1] += line.rfind("activate", 0) == 0;
    }
    EXPECT_GT(on_one[0], 0) << op;
    EXPECT_GT(on_one[1], 0) << op;
  }
  const TpuRunResult two = RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  c.mxus_per_core = 1;
  const TpuRunResult one = RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  for (size_t op = 0; op < 2; ++op)
    EXPECT_LT(two.layers[op].counters.cycles * 10, one.layers[op].counters.cycles * 8)
        << op << ": " << two.layers[op].counters.cycles << " vs " << one.layers[op].counters.cycles;
}

// A unit's weight DMA takes one read at a time and the chip issues in order, so a unit's
// tile reads emitted one right after the other hold back every matmul behind the second
// until the first is done. A spread convolution's reads go paced between its matmuls instead, the
// next group's first tiles among them as this group's switches make room (docs/compiler.md,
// "Several matrix units"), so slower reads cost only where no matmul can hide them: the
// reads the operation starts with, the FIFO's 4 tiles for each of the two units. Reads 90
// cycles slower (a latency of 100 instead of 10: a tile's read 108 cycles against 64-row
// matmuls) may then cost at most 8 reads x 90 cycles.
// A 3 x 3 convolution of 16 -> 32 channels on 8 x 8 maps (4 output tiles on lab-8), then a
// global pooling and a dense layer; and lab-8 with two matrix units.
nn::Model FourTileConvolution(const std::string& name) {
  nn::Model m = NewModel(name, {8, 8, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              GlobalPool(0), L(LayerType::kDense, {1}, 4)};
  return m;
}
config::TpuConfig TwoUnits() {
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.mxus_per_core = 2;
  return c;
}

TEST(GraphCompilerTest, TheUnitsTileReadsGoPacedBetweenTheirMatmuls) {
  nn::Model m = FourTileConvolution("paced");
  config::TpuConfig c = TwoUnits();
  const int batch = 4;
  QuantizeAndEmit(&m, 13, c, batch);  // 4 output tiles: each unit two groups of passes
  const int64_t fast =
      RunExact(m, c, engine::EngineKind::kFast, batch, batch).layers[0].counters.cycles;
  c.weight_mem_latency_cycles = 100;
  const int64_t slow =
      RunExact(m, c, engine::EngineKind::kFast, batch, batch).layers[0].counters.cycles;
  EXPECT_LE(slow - fast, 8 * 90) << slow << " against " << fast;
}

// A spread unit's tile reads go two at a time where its tiles follow each other in weight
// memory, the first ones that fill its FIFO and those that wait between the matmuls: one
// read_weights of two tiles pays the memory's latency once (docs/compiler.md, "Reads paced
// between the matmuls"). The four-tile convolution at a read latency of 100 cycles (a tile's
// read 108 cycles, two tiles' 116) and 128-row matmuls: two units would take a tile each
// per 128 rows, more than single reads give.
TEST(GraphCompilerTest, ASpreadUnitReadsItsTilesTwoAtATime) {
  config::TpuConfig c = TwoUnits();
  c.weight_mem_latency_cycles = 100;
  nn::Model m = FourTileConvolution("runs");
  const EmittedProgram e = QuantizeAndEmit(&m, 13, c, 2);  // two images
  int pairs = 0, spread = 0, matmuls = 0, first = 0;       // first: single reads before a matmul
  for (const std::string& line : OpLines(e, 0)) {
    if (Is(line, "matmul")) ++matmuls, spread += Operand(line, "mxu", 0) == 1;
    if (!Is(line, "read_weights")) continue;
    if (Operand(line, "mxu", 0) == 1 && Operand(line, "tiles") == 2) ++pairs;
    if (matmuls == 0 && Operand(line, "tiles") == 1) ++first;
  }
  EXPECT_GT(spread, 0);
  EXPECT_GT(pairs, 8) << "unit 1 reads its tiles one at a time";
  EXPECT_EQ(first, 0) << "the units' first tiles are read one at a time";
  RunExact(m, c, engine::EngineKind::kFast, 2, 2);  // bit-exact
}

// Between a spread group's matmuls the activates of the group before go one at a time, each
// once the matmuls since the one before have streamed (per unit) that one's rows: the vector
// unit takes one at a time, and an activate emitted while it is busy holds back every matmul
// behind it (until stop 56 one after every matmul; docs/compiler.md, "Emitting a group").
// The convolution of four output tiles in two passes a column on two units: each activate
// among its matmuls comes at least the rows of the one before after it.
TEST(GraphCompilerTest, ActivatesBetweenTheMatmulsWaitForTheOneBefore) {
  nn::Model m = FourTileConvolution("vpu-paced");
  const config::TpuConfig c = TwoUnits();
  const int batch = 4;
  const EmittedProgram e = QuantizeAndEmit(&m, 13, c, batch);
  const std::vector<std::string> lines = OpLines(e, 0);
  size_t last = 0;  // the operation's last matmul
  for (size_t i = 0; i < lines.size(); ++i)
    if (Is(lines[i], "matmul")) last = i;
  int64_t before = -1, streamed = 0, checked = 0;  // the activate before's rows; rows since
  for (size_t i = 0; i < last; ++i) {
    if (Is(lines[i], "matmul")) streamed += Operand(lines[i], "rows");
    if (!Is(lines[i], "activate")) continue;
    if (before >= 0 && streamed > 0) {
      EXPECT_GE(streamed / 2, before) << i << ": " << lines[i];
      ++checked;
    }
    before = Operand(lines[i], "rows");
    streamed = 0;
  }
  EXPECT_GT(checked, 0);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// An image of more rows than half the accumulators runs in chunks; spread over the units, in
// twice as many where each unit's chunk still hides its group's tile reads (the units' reads
// side by side, each on its own weight DMA, at most a chunk's rows: docs/compiler.md,
// "Several matrix units"), so that an image's last activates, one per unit on the one vector
// unit, hold the next operation back half as long. A 3 x 3 convolution of one output tile on
// 24 x 24 maps (576 rows an image, 512 the most a pass takes on lab-8) on two units, each
// reading its K-tiles two at a time: four chunks an image where a tile takes 13, 58 or 108
// cycles of a read of two (latency 10, 100, 200: at most 144 rows; the channel moves the two
// units' tiles in 16), two where it takes 158 (latency 300).
TEST(GraphCompilerTest, SpreadImagesRunInFinerChunksWhereTheReadsHide) {
  auto passes = [](int latency) {
    nn::Model m = NewModel("chunks", {24, 24, 8});
    m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),
                L(LayerType::kMaxPool2d, {0}, 0, 2, 2), GlobalPool(1),
                L(LayerType::kDense, {2}, 4)};
    config::TpuConfig c = TwoUnits();
    c.weight_mem_latency_cycles = latency;
    const int batch = 2;
    const EmittedProgram e = QuantizeAndEmit(&m, 19, c, batch);
    int first_terms = 0;  // each pass's first matmul overwrites its rows
    for (const std::string& line : OpLines(e, 0))
      first_terms += line.rfind("matmul", 0) == 0 && line.find("accumulate") == std::string::npos;
    RunExact(m, c, engine::EngineKind::kFast, batch, batch);
    return first_terms;
  };
  EXPECT_EQ(passes(10), 2 * 4);
  EXPECT_EQ(passes(100), 2 * 4);
  EXPECT_EQ(passes(200), 2 * 4);
  EXPECT_EQ(passes(300), 2 * 2);
}

// Each read_host pays the host link's latency and holds back every instruction behind it
// while the host DMA is busy, so a spread operation loads the parameter sets of a group of
// passes (one per unit) with one read, the next group's while this group's matmuls stream
// (docs/compiler.md, "Several matrix units"): with 4 slots, too few for the network's sets,
// the convolution's 4 output tiles on two units take two reads of two sets each.
TEST(GraphCompilerTest, ASpreadGroupsParameterSetsComeInOneRead) {
  nn::Model m = FourTileConvolution("sets");
  config::TpuConfig c = TwoUnits();
  c.param_sets = 4;
  const int batch = 4;
  const EmittedProgram e = QuantizeAndEmit(&m, 13, c, batch);
  std::vector<std::string> reads;
  for (const std::string& line : OpLines(e, 0))
    if (line.rfind("read_host", 0) == 0 && line.find("params=") != std::string::npos)
      reads.push_back(line);
  ASSERT_EQ(reads.size(), 2u) << ::testing::PrintToString(reads);
  for (const std::string& r : reads) EXPECT_NE(r.find("rows=2"), std::string::npos) << r;
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// Two convolutions on 40 x 40 x 3 inputs, a pooling, a global pooling and a dense layer; on
// two units of lab-8 with a slow link (a byte a cycle) and a unified buffer of 8,000 rows.
nn::Model StagedModel(const std::string& name) {
  nn::Model m = NewModel(name, {40, 40, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, 8, 3, 2, 1, Activation::kRelu),
              L(LayerType::kMaxPool2d, {1}, 0, 2, 2), GlobalPool(2), L(LayerType::kDense, {3}, 4)};
  return m;
}
config::TpuConfig StagedChip() {
  config::TpuConfig c = TwoUnits();
  c.ub_depth_rows = 8000;
  c.host_mem_bytes_per_cycle = 1;
  return c;
}

// The host-link term of an operation's bound counts the model's input it reads, but where
// its segment runs in several groups every group's input but the first is read while the
// group before computes (staged between its matmuls), so only the first group's is in the
// operation's term (the rest in the network's, `staged_host`) and keeps the operation from
// spreading over the units (docs/compiler.md, "Several matrix units"). On a
// slow link (a byte a cycle) and a unified buffer of 8,000 rows the first convolution runs
// in groups of 2 of the batch of 12: its whole input alone would bind it to one unit, the
// first group's does not.
TEST(GraphCompilerTest, AnInputReadBehindTheGroupBeforeLeavesItsOperationToSpread) {
  nn::Model m = StagedModel("staged");
  const config::TpuConfig c = StagedChip();
  const int batch = 12;
  const EmittedProgram e = QuantizeAndEmit(&m, 23, c, batch);
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  const Plan plan = PlanGraph(g, c, batch);
  ASSERT_EQ(plan.segments.front().group, 2);
  const std::vector<Bound> bounds = BoundGraph(g, plan, c, batch);
  const Bound& b = bounds[0];
  // Its array term over two units (the bound's, for the core) against the others: the whole
  // input binds it, the first group's (its own host term: the others' are the network's,
  // staged_host) does not.
  EXPECT_LT(b.array, b.host + b.staged_host);
  EXPECT_GT(b.array, std::max({b.weights, b.activation, b.host}));
  const double input = static_cast<double>(batch * g.tensors[0].rows) * c.HostRowCycles();
  EXPECT_DOUBLE_EQ(b.staged_host, input * (batch - 2) / batch);
  Bound net;
  net.network = true;
  for (const Bound& o : bounds) net += o;
  EXPECT_DOUBLE_EQ(net.Host(), net.host + b.staged_host);
  int on_one = 0;
  for (const std::string& line : OpLines(e, 0))
    on_one += line.rfind("matmul", 0) == 0 && line.find("mxu=1") != std::string::npos;
  EXPECT_GT(on_one, 0);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// The next group's input goes over the host link between this group's matmuls, each transfer
// once the matmuls since the one before have streamed as many rows as it takes cycles (the
// host DMA takes one at a time, and a read_host emitted while it is busy holds back every
// instruction behind it). Units streaming side by side take their rows at once: until stop 56
// their rows were summed, so on two units each transfer went twice as early and held the
// matmuls back (resnet50's conv1 on tpu-v3's core: 4,100 cycles an image). The model of the
// test above: each transfer paced between the first convolution's matmuls comes after at
// least its cycles of rows on a unit.
TEST(GraphCompilerTest, TheNextGroupsInputIsPacedByTheUnitsTime) {
  nn::Model m = StagedModel("paced-input");
  const config::TpuConfig c = StagedChip();
  const int batch = 12;
  const EmittedProgram e = QuantizeAndEmit(&m, 23, c, batch);
  const std::vector<std::string> lines = Lines(e);
  // The first group's input (two images), read in pieces as its matmuls need them
  // (TheFirstInputArrivesInPiecesAsTheWindowsNeedIt), not paced: the reads into its rows
  // before the first read elsewhere.
  const int64_t group_rows = 2 * LowerGraph(m, c.array_dim).tensors[0].rows;
  int64_t first_ub = -1;
  bool pieces = true;
  int64_t due = -1, checked = 0;         // the cycles of the transfer before
  std::array<int64_t, 2> rows = {0, 0};  // each unit's matmul rows since it
  bool other = false;  // an instruction of another operation since it (not the activates of
                       // the group before's last operation, which its first matmuls let go)
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (e.op_of[i] != 0 && !Is(l, "activate")) other = true;
    if (Is(l, "matmul")) rows[static_cast<size_t>(Operand(l, "mxu", 0))] += Operand(l, "rows");
    if (!Is(l, "read_host") || Operand(l, "params") >= 0 || e.op_of[i] != 0) continue;
    if (first_ub < 0) first_ub = Operand(l, "ub");
    const int64_t ub = Operand(l, "ub");
    pieces = pieces && ub >= first_ub && ub < first_ub + group_rows;
    if (pieces) continue;
    // Paced: not the group's last ones, nor the first of a group's input (it goes with the
    // group's first matmul).
    const bool starts = (ub - first_ub) % group_rows == 0;
    if (due >= 0 && !other && !starts && rows[0] + rows[1] > 0) {
      EXPECT_GE(std::max(rows[0], rows[1]), due) << i << ": " << l;
      ++checked;
    }
    due = c.host_mem_latency_cycles +
          static_cast<int64_t>(
              std::ceil(static_cast<double>(Operand(l, "rows")) * c.HostRowCycles()));
    rows = {0, 0};
    other = false;
  }
  EXPECT_GT(checked, 0);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// The first group's input, which no group's matmuls hide, arrives in pieces where the first
// operation reads it through a window (docs/compiler.md, "The first input in pieces"): each
// matmul's window cut to the lines its output pixels read (the same values, a footprint that
// ends where those lines do), the pieces it reads emitted before it and one more behind
// them, so that the first matmuls stream while the rest arrives (until stop 58 the whole
// input went first: resnet50's conv1 on tpu-v3's core waited 20,000 cycles for image 0). The
// staged model on a slow link: the pieces in order, every matmul before the last one within
// the rows read before it, with a window of fewer lines than the map; bit-exact.
TEST(GraphCompilerTest, TheFirstInputArrivesInPiecesAsTheWindowsNeedIt) {
  nn::Model m = StagedModel("pieces");
  const config::TpuConfig c = StagedChip();
  const int batch = 12;
  const EmittedProgram e = QuantizeAndEmit(&m, 23, c, batch);
  const GraphTensor& in = LowerGraph(m, c.array_dim).tensors[0];
  const int64_t group_rows = 2 * in.rows;  // in groups of two images
  const std::vector<std::string> lines = Lines(e);
  int64_t first_ub = -1, arrived = -1;  // the staging rows, and the end of the pieces so far
  int64_t pieces = 0, before_last = 0, cut = 0, span = 0;
  for (size_t i = 0; i < lines.size() && e.op_of[i] <= 0; ++i) {
    const std::string& l = lines[i];
    if (Is(l, "set_window")) {  // the rows a window matmul reads (docs/isa.md)
      cut += Operand(l, "in_h") < in.h;
      span = ((Operand(l, "in_h") * Operand(l, "in_w") - 1) * Operand(l, "pixel_bytes") +
              Operand(l, "channels") + c.array_dim - 1) /
             c.array_dim;
    }
    if (Is(l, "read_host") && Operand(l, "params") < 0) {
      const int64_t ub = Operand(l, "ub");
      if (first_ub < 0) first_ub = ub;
      if (ub < first_ub || ub >= first_ub + group_rows) break;  // the next group's
      EXPECT_EQ(ub, arrived < 0 ? first_ub : arrived) << i << ": " << l;
      arrived = ub + Operand(l, "rows");
      ++pieces;
    }
    if (Is(l, "matmul") && arrived < first_ub + group_rows) {
      EXPECT_LE(Operand(l, "ub") + span, arrived) << i << ": " << l;
      ++before_last;
    }
  }
  EXPECT_GT(pieces, 2);
  EXPECT_GT(before_last, 0);
  EXPECT_GT(cut, 0);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}
// ... and on the RTL (lab-8's one unit), the windows cut and the pieces in flight beside the
// matmuls.
TEST(GraphCompilerTest, TheFirstInputInPiecesIsBitExactOnTheRtl) {
  nn::Model m = StagedModel("pieces-rtl");
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.host_mem_bytes_per_cycle = 1;
  const EmittedProgram e = QuantizeAndEmit(&m, 23, c, 4);
  int64_t pieces = 0;
  for (const std::string& l : OpLines(e, 0)) pieces += Is(l, "read_host") && Operand(l, "ub") >= 0;
  EXPECT_GT(pieces, 4);  // the four images' input, each in pieces
  RunExact(m, c, engine::EngineKind::kRtl, 4, 4);
}

// The 3 x 3 convolution of four output tiles, then one of `second` filters reading it, a
// global pooling and a dense layer.
nn::Model TwoConvolutions(const std::string& name, int second) {
  nn::Model m = NewModel(name, {8, 8, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, second, 3, 1, 1, Activation::kRelu), GlobalPool(1),
              L(LayerType::kDense, {2}, 4)};
  return m;
}

// An operation whose first matmuls read rows the operation before still has to activate
// lets those activates go between its first tile reads, each after reads that take about as
// long as the activate before it, so that the weight DMA and the vector unit work side by
// side (until stop 56 the reads, up to the FIFO's depth for each unit, went first, and the
// vector unit waited for all of them: resnet50's conv6 -> conv7, 600 cycles an image). Two
// spread 3 x 3 convolutions of four output tiles, the second reading the first, on one image
// (the second's first matmul reads all of the first's output).
TEST(GraphCompilerTest, TheActivatesAnOperationWaitsForGoBetweenItsTileReads) {
  nn::Model m = TwoConvolutions("between", 32);
  const config::TpuConfig c = TwoUnits();
  const int batch = 1;
  const EmittedProgram e = QuantizeAndEmit(&m, 31, c, batch);
  const std::vector<std::string> lines = Lines(e);
  // op 1's first read; op 0's activates since it; those followed by another read of op 1
  size_t first_read = SIZE_MAX, since = 0, between = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (e.op_of[i] == 1 && Is(lines[i], "matmul")) break;
    if (e.op_of[i] == 1 && Is(lines[i], "read_weights")) {
      if (first_read == SIZE_MAX) first_read = i;
      between = since;
    }
    since += first_read != SIZE_MAX && e.op_of[i] == 0 && Is(lines[i], "activate");
  }
  EXPECT_NE(first_read, SIZE_MAX);
  EXPECT_GT(between, 0u);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// A spread operation's last group hands its images on as one unit's last pass does when the
// next operation reads its output image by image (through the window) or in place: an
// activate per image (or run), in the order of the images, so that the next operation starts
// on the first while the vector unit works through the rest (until stop 56 each unit's pass
// in one activate: resnet50's conv29 -> conv30, 3,142 cycles of two activates before conv30
// could start). The 3 x 3 convolution of four output tiles then another: each of op 0's
// activates after its last matmul one image's 64 rows, the images in order.
TEST(GraphCompilerTest, ASpreadOperationHandsItsImagesOnOneByOne) {
  nn::Model m = TwoConvolutions("hand-on", 8);
  const config::TpuConfig c = TwoUnits();
  const int batch = 4;
  const EmittedProgram e = QuantizeAndEmit(&m, 37, c, batch);
  const std::vector<std::string> lines = OpLines(e, 0);
  size_t last = 0;
  for (size_t i = 0; i < lines.size(); ++i)
    if (Is(lines[i], "matmul")) last = i;
  std::vector<int64_t> rows;
  for (size_t i = last; i < lines.size(); ++i)
    if (Is(lines[i], "activate")) rows.push_back(Operand(lines[i], "rows"));
  EXPECT_GE(rows.size(), 4u);
  EXPECT_EQ(rows, std::vector<int64_t>(rows.size(), 64)) << ::testing::PrintToString(rows);
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}

// A spread operation whose images all fit one pass a column runs in two where each still
// hides its tile reads (the units' reads of a tile, one after another, at most half the
// group's rows: docs/compiler.md, "Several matrix units"), so that the vector unit
// activates the first pass while the second streams (until stop 56 all of each column's
// activates came after its last matmul: resnet50's stage 3, 1.27 x its bound). A 1 x 1
// convolution of four output tiles on two units, 4 images of 64 rows, each unit reading its
// K-tiles two at a time: two passes a column where a tile takes 13 cycles of a read of two
// (latency 10: 2 x 13 <= 128 rows) or 58 (latency 100; a read of one alone, 108, would not
// hide), one where it takes 158 (latency 300).
TEST(GraphCompilerTest, ASpreadColumnRunsInTwoPassesWhereTheReadsHide) {
  auto passes = [](int latency) {
    nn::Model m = NewModel("two-passes", {8, 8, 16});
    m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 1, 1, 0, Activation::kRelu),
                GlobalPool(0), L(LayerType::kDense, {1}, 4)};
    config::TpuConfig c = TwoUnits();
    c.weight_mem_latency_cycles = latency;
    const int batch = 4;
    const EmittedProgram e = QuantizeAndEmit(&m, 41, c, batch);
    int first = 0;  // the first column's activates (parameter set 0): one a pass
    for (const std::string& line : OpLines(e, 0))
      first += Is(line, "activate") && Operand(line, "params") == 0;
    RunExact(m, c, engine::EngineKind::kFast, batch, batch);
    return first;
  };
  EXPECT_EQ(passes(10), 2);
  EXPECT_EQ(passes(100), 2);
  EXPECT_EQ(passes(300), 1);
}

// Output tiles whose terms do not line up (as many, of the same kind) cannot go to the units
// side by side, term by term; their passes are spread instead, each column's images over the
// units (docs/compiler.md, "Several matrix units"). Until stop 55 such an operation ran on
// one unit (mobilenet_v2's depthwise convolutions on 128 x 128 arrays lower with 10 and 9
// terms in their two columns, 13 and 9 in others). The convolution of four output tiles,
// lowered, with one term fewer in two of its columns: both units stream its matmuls.
TEST(GraphCompilerTest, ColumnsThatDoNotLineUpSpreadTheirPasses) {
  nn::Model m = FourTileConvolution("uneven");
  const config::TpuConfig c = TwoUnits();
  const int batch = 4;
  m = test::Randomize(m, 29);
  nn::Quantize(&m, nn::SyntheticInputs(m, 8, 29), 8);
  LoweredGraph g = LowerGraph(m, c.array_dim);
  ASSERT_TRUE(g.why_not.empty()) << g.why_not;
  ASSERT_EQ(g.ops[0].terms.size(), 4u);
  g.ops[0].terms[1].pop_back();
  g.ops[0].terms[3].pop_back();
  const EmittedProgram e = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  int on[2] = {0, 0};  // op 0's matmuls on each unit
  for (const std::string& line : OpLines(e, 0))
    if (line.rfind("matmul", 0) == 0) ++on[line.find("mxu=1") != std::string::npos];
  EXPECT_GT(on[1], 0);
  EXPECT_EQ(on[0], on[1]);
}

// On a core of four units each operation spreads over the units that make its estimate
// least (docs/compiler.md, "Several matrix units"): a 1 x 1 convolution whose rows through
// the one vector unit allow two units, not four, goes to units 0 and 1 (with the rule of all
// units or one it ran on one). Bit-exact, and each convolution faster than on one unit.
TEST(GraphCompilerTest, OperationsSpreadOverTheUnitsTheirEstimateFavours) {
  nn::Model m = NewModel("four", {8, 8, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 16, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, 32, 1, 1, 0, Activation::kRelu), GlobalPool(1),
              L(LayerType::kDense, {2}, 4)};
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.mxus_per_core = 4;
  const int batch = 4;
  const EmittedProgram e = QuantizeAndEmit(&m, 17, c, batch);
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  const std::vector<Bound> bounds = BoundGraph(g, PlanGraph(g, c, batch), c, batch);
  std::vector<int> units, wants;  // per operation: the units its matmuls name, the rule's
  for (int op = 0; op < 2; ++op) {
    int most = 0;
    for (const std::string& line : OpLines(e, op)) {
      if (line.rfind("matmul", 0) != 0) continue;
      const size_t at = line.find("mxu=");
      most = std::max(most, at == std::string::npos ? 0 : std::stoi(line.substr(at + 4)));
    }
    units.push_back(most + 1);
    // The u <= 4 whose estimate is least (docs/compiler.md): on one unit the array term
    // over one (4 times the bound's, which is over four) or another term; on u, the reads
    // that fill the units' FIFOs (4 tiles each) before the array term over u, the other
    // tiles' reads, the vector unit's or the host's rows; the reads two tiles at a time,
    // 10 + 16 cycles, 13 a tile, the u units' side by side (the channel moves a tile of 8
    // rows of 8 bytes in 8 cycles at 8 B a cycle).
    const Bound& b = bounds[static_cast<size_t>(op)];
    const double tiles = b.weights / 8;
    int want = 1;
    double least = std::max({b.array * 4, b.weights, b.activation, b.host});
    for (int u = 2; u <= 4; ++u) {
      const double fill = std::min(tiles, 4.0 * u);
      const double share = std::max(13.0, 8.0 * u) / u;
      const double t =
          fill * share + std::max({b.array * 4 / u, (tiles - fill) * share, b.activation, b.host});
      if (t < least) want = u, least = t;
    }
    wants.push_back(want);
  }
  // The 3 x 3 convolution binds the array with four units: its two output tiles (fewer than
  // the units) are cut into passes of their images, one per unit (docs/compiler.md: as many
  // as the units' weight DMAs can feed, four here); the 1 x 1 one's four output tiles make four
  // passes, of which it takes two at a time, the two units its vector-unit rows allow.
  EXPECT_EQ(wants, (std::vector<int>{4, 2}));
  EXPECT_EQ(units, (std::vector<int>{4, 2}));
  const TpuRunResult four = RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  c.mxus_per_core = 1;
  const TpuRunResult one = RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  for (size_t op = 0; op < 2; ++op)
    EXPECT_LT(four.layers[op].counters.cycles, one.layers[op].counters.cycles) << op;
}

// Where the weights bind on two units but not on one (the bound's weights term between the
// array term over two units and over one), two units still pay: each unit's weight DMA reads its
// tiles two at a time. But an operation whose tiles the units' FIFOs all take reads them
// before its first matmuls, where one unit would have read them during the operation before
// (docs/compiler.md, "Which operations, over how many units"). 8 x 12 maps on lab-8 with two
// units and a weight memory of 1 B a cycle (a tile's 64 rows take 64 cycles, 96 rows stream
// through it): the 3 x 3 convolution (72 tiles) spreads and is faster than on one unit; the
// 1 x 1 one (8 tiles, the two FIFOs' depth) stays on one.
TEST(GraphCompilerTest, AnOperationWhoseWeightsBindOnTwoUnitsStillSpreads) {
  nn::Model m = NewModel("slow-weights", {8, 12, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, 16, 1, 1, 0, Activation::kRelu), GlobalPool(1),
              L(LayerType::kDense, {2}, 4)};
  config::TpuConfig c = TwoUnits();
  c.weight_mem_bytes_per_cycle = 1;
  const int batch = 1;
  const EmittedProgram e = QuantizeAndEmit(&m, 19, c, batch);
  int spread[2] = {0, 0};  // each operation's matmuls on unit 1
  for (int op = 0; op < 2; ++op)
    for (const std::string& line : OpLines(e, op))
      if (Is(line, "matmul") && Operand(line, "mxu", 0) == 1) ++spread[op];
  EXPECT_GT(spread[0], 0);
  EXPECT_EQ(spread[1], 0);
  const int64_t two =
      RunExact(m, c, engine::EngineKind::kFast, batch, batch).layers[0].counters.cycles;
  c.mxus_per_core = 1;
  const int64_t one =
      RunExact(m, c, engine::EngineKind::kFast, batch, batch).layers[0].counters.cycles;
  EXPECT_LT(two, one);
}

// A read_host emitted while the host DMA is busy holds back every instruction behind it, so
// the parameter sets of the next operation's first pass are read before each transfer of the
// next group's input (docs/compiler.md, "Reads paced between the matmuls"), and the first
// operation's before the first group's input: none waits behind a transfer. The model of
// the tests above with 2 parameter slots, too few for its sets: between a transfer among an
// operation's matmuls and the next operation's first matmul, no parameter read of it.
TEST(GraphCompilerTest, TheNextOperationsParametersGoBeforeTheInputTransfers) {
  config::TpuConfig c = StagedChip();
  c.param_sets = 2;  // too few: the sets stream
  nn::Model m = StagedModel("sets-first");
  const EmittedProgram e = QuantizeAndEmit(&m, 23, c, 12);  // in groups of two images
  const std::vector<std::string> lines = Lines(e);
  int after = -1;  // the operation a transfer went among, until the next one's first matmul
  int transfers = 0, reads = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int op = e.op_of[i];
    if (Is(lines[i], "matmul") && op == after + 1) after = -1;
    if (!Is(lines[i], "read_host")) continue;
    if (Operand(lines[i], "params") >= 0) {
      ++reads;
      EXPECT_FALSE(after >= 0 && op == after + 1) << i << ": " << lines[i];
    } else if (i > 1 && op >= 0) {
      after = op;
      ++transfers;
    }
  }
  EXPECT_GT(transfers, 4);
  EXPECT_GT(reads, 1);
  EXPECT_TRUE(Is(lines[0], "read_host") && Operand(lines[0], "params") >= 0) << lines[0];
  RunExact(m, c, engine::EngineKind::kFast, 12, 12);
}

// Two dense layers, the second to 19 outputs: on lab-8 (N = 8) an output of three tiles of
// one pixel.
nn::Model WideOutput(const std::string& name) {
  nn::Model m = NewModel(name, {1, 1, 20});
  m.layers = {L(LayerType::kDense, {nn::kModelInput}, 24, 1, 1, 0, Activation::kRelu),
              L(LayerType::kDense, {0}, 19)};
  return m;
}
// The write_host instructions of a program: (ub, its index in the program, rows) each; the
// index of its last matmul in *last_matmul.
std::vector<std::array<int64_t, 3>> OutputWrites(const EmittedProgram& e, size_t* last_matmul) {
  std::vector<std::array<int64_t, 3>> writes;
  const std::vector<std::string> lines = Lines(e);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (Is(lines[i], "matmul")) *last_matmul = i;
    if (Is(lines[i], "write_host"))
      writes.push_back(
          {Operand(lines[i], "ub"), static_cast<int64_t>(i), Operand(lines[i], "rows")});
  }
  return writes;
}

// The model's output, three tiles of one pixel, goes tile by tile where a tile's rows take
// the host link at least its latency (Plan::output_by_tile; 24 images x 1 cycle a row on
// lab-8, latency 20): every image's tile 0, then tile 1, ..., in host memory and in its
// unified-buffer area, the first tiles sent while the matrix unit computes the last, which
// alone is left to send after it; bit-exact on both engines (NetworkCompiler::Decode reads
// the layout). With a latency of 25 cycles, more than a tile's 24, the output goes whole,
// image by image, after the last matmul.
TEST(GraphCompilerTest, TheOutputGoesTileByTileWhileTheLastTilesCompute) {
  config::TpuConfig c = config::LoadConfig("lab-8");
  const int batch = 24;
  nn::Model m = WideOutput("by-tile");
  const EmittedProgram e = QuantizeAndEmit(&m, 5, c, batch);
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  const Plan plan = PlanGraph(g, c, batch);
  ASSERT_TRUE(plan.output_by_tile) << plan.why_not;
  ASSERT_EQ(g.tensors[static_cast<size_t>(g.output)].T(c.array_dim), 3);
  size_t last_matmul = 0;
  const auto writes = OutputWrites(e, &last_matmul);
  ASSERT_EQ(writes.size(), 3u);
  const int64_t area = plan.places[static_cast<size_t>(g.output)].ub;
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(writes[t][0], area + static_cast<int64_t>(t) * batch) << "tile " << t;
    EXPECT_EQ(writes[t][2], batch) << "tile " << t;
  }
  EXPECT_LT(writes[1][1], static_cast<int64_t>(last_matmul));  // tiles 0 and 1 before it
  EXPECT_GT(writes[2][1], static_cast<int64_t>(last_matmul));
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);

  c.host_mem_latency_cycles = 25;
  ASSERT_FALSE(PlanGraph(g, c, batch).output_by_tile);
  const EmittedProgram whole = EmitGraph(g, PlanGraph(g, c, batch), c, batch);
  const auto one = OutputWrites(whole, &last_matmul);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0][2], 3 * batch);
  EXPECT_GT(one[0][1], static_cast<int64_t>(last_matmul));
  RunExact(m, c, engine::EngineKind::kFast, batch, batch);
}
// ... and on the RTL, with the same counters as the fast engine's.
TEST(GraphCompilerTest, TheOutputTileByTileIsBitExactOnTheRtl) {
  const config::TpuConfig c = config::LoadConfig("lab-8");
  nn::Model m = WideOutput("by-tile-rtl");
  QuantizeAndEmit(&m, 5, c, 24);
  const TpuRunResult rtl = RunExact(m, c, engine::EngineKind::kRtl, 24, 24);
  const TpuRunResult fast = RunExact(m, c, engine::EngineKind::kFast, 24, 24);
  ASSERT_EQ(rtl.layers.size(), fast.layers.size());
  for (size_t l = 0; l < rtl.layers.size(); ++l)
    EXPECT_EQ(rtl.layers[l].counters, fast.layers[l].counters) << rtl.layers[l].name;
  EXPECT_EQ(rtl.chip_cycles, fast.chip_cycles);
}

// A global pooling stacks its images (one row each, the batch's maps on top of each other)
// and streams short matmuls, one per tap and output tile; its output tiles spread over the
// units like any operation's where the estimate says so (until stop 57 a stacked operation
// stayed on one unit: resnet50's gap1 on one core of tpu-v3, 1,217 cycles per image, 800 on
// two). The four-tile convolution's pooling on two units at batch 4: both units stream, and
// bit-exact.
TEST(GraphCompilerTest, AStackedOperationSpreadsItsColumns) {
  nn::Model m = FourTileConvolution("stacked");
  const EmittedProgram e = QuantizeAndEmit(&m, 13, TwoUnits(), 4);
  int on[2] = {0, 0};  // the pooling's matmuls on each unit
  for (const std::string& line : OpLines(e, 1))
    if (Is(line, "matmul")) ++on[Operand(line, "mxu", 0)];
  EXPECT_GT(on[1], 0);
  EXPECT_EQ(on[0], on[1]);
  RunExact(m, TwoUnits(), engine::EngineKind::kFast, 4, 4);
}

// On two cores, each core's share streams the next group's input over a host link the two
// share: the programs pace those transfers at half the link (EmitGraph's `sharers`), and a
// run on two cores builds them so. Paced for the whole link instead, a transfer is still
// running when the next is issued and holds back the matmuls queued behind it.
TEST(GraphCompilerTest, SharesPaceTheirTransfersAtTheirPartOfTheHostLink) {
  // Maps of 1,600 rows an image: a group's input takes several transfers.
  nn::Model m = NewModel("wide", {40, 40, 3});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 8, 3, 1, 1, Activation::kRelu),
              L(LayerType::kConv2d, {0}, 8, 3, 2, 1, Activation::kRelu),
              L(LayerType::kMaxPool2d, {1}, 0, 2, 2), GlobalPool(2), L(LayerType::kDense, {3}, 4)};
  m = test::Randomize(m, 3);
  nn::Quantize(&m, nn::SyntheticInputs(m, 16, 3), 16);
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.cores = 2;
  c.ub_depth_rows = 8000;
  c.host_mem_bytes_per_cycle = 2;
  const int batch = 12, share = batch / 2;
  const nn::InputSet in = nn::SyntheticInputs(m, batch, 5);
  const nn::MatrixI8 x = nn::Int8Inputs(m, in, 0, batch);
  const NetworkCompiler nc(m, c, share);
  ASSERT_NE(nc.PlanText(share).find("in groups of 2"), std::string::npos) << nc.PlanText(share);
  auto run = [&](int sharers) {
    std::vector<engine::ExecJob> jobs;
    for (int core = 0; core < 2; ++core) {
      const int8_t* first = x.data() + static_cast<std::ptrdiff_t>(core * share * x.cols());
      jobs.push_back(
          nc.Build(std::vector<int8_t>(first, first + share * x.cols()), share, sharers).exec);
    }
    const auto chip = test::TestEngine(engine::EngineKind::kFast, c, {});
    const engine::ExecResult e = chip->Run(CombineCoreJobs(std::move(jobs)).job);
    EXPECT_TRUE(e.ok) << e.message;
    return e.cycles;
  };
  const uint64_t whole = run(1), half = run(2);
  EXPECT_LT(half, whole);
  const TpuRunResult r = RunExact(m, c, engine::EngineKind::kFast, batch, batch);
  EXPECT_EQ(r.chip_cycles, half);
}

// The array and the weights as a pipeline through the FIFO (graph_bound.h), by hand:
// S_i = max(D_i, S_{i-1} + max(R_{i-1}, N)), D_i = max(D_{i-1} + load, S_{i-fifo-1}).
TEST(GraphBoundTest, TheWeightPipelineFollowsItsRecurrence) {
  // Array-bound: D = 100, 200, 300; S = 100, 1100, 2100; the end 3100, split by operation.
  EXPECT_EQ(WeightPipeline({{1000, 0}, {1000, 1}, {1000, 2}}, 3, 100, 10, 4),
            (std::vector<double>{1100, 1000, 1000}));
  // Weight-bound: every tile waits for the memory; the end is 4 loads and the last run.
  EXPECT_EQ(WeightPipeline({{10, 0}, {10, 0}, {10, 0}, {10, 0}}, 1, 100, 10, 1),
            (std::vector<double>{410}));
  // A long run, then six short ones: with room for 2 tiles the memory stops at tile 4 until
  // S_1 = 1100 (D_4 = 1100, D_5 = 1200, D_6 = 1300): the end is 1301, where a deeper FIFO
  // would have every tile by 700 and end at 1106.
  std::vector<TileRun> runs = {{1000, 0}};
  for (int i = 0; i < 6; ++i) runs.push_back({1, 1});
  EXPECT_EQ(WeightPipeline(runs, 2, 100, 1, 2), (std::vector<double>{1100, 201}));
  EXPECT_EQ(WeightPipeline(runs, 2, 100, 1, 8), (std::vector<double>{1100, 6}));
}

// A core's weight DMAs, one per matrix unit, read side by side, together up to the weight
// memory's bytes a cycle (docs/timing.md, "Why a port per matrix unit"): the bound's weights
// term on two units of lab-8 (8-byte rows) is half one unit's where the channel moves two
// rows a cycle (16 B), and one unit's where it moves one (8 B).
// The first operation's bound of a convolution, pooling and dense layer on lab-8 with
// `units` matrix units a core and weight memory of `bytes_per_cycle`, batch 2.
Bound DmasBound(int units, int bytes_per_cycle, WeightPath path = WeightPath::kFifo) {
  nn::Model m = NewModel("dmas", {8, 8, 16});
  m.layers = {L(LayerType::kConv2d, {nn::kModelInput}, 32, 3, 1, 1, Activation::kRelu),
              GlobalPool(0), L(LayerType::kDense, {1}, 4)};
  config::TpuConfig c = config::LoadConfig("lab-8");
  c.mxus_per_core = units;
  c.weight_mem_bytes_per_cycle = bytes_per_cycle;
  QuantizeAndEmit(&m, 17, c, 2);
  const LoweredGraph g = LowerGraph(m, c.array_dim);
  return BoundGraph(g, PlanGraph(g, c, 2, {}, path), c, 2)[0];
}

TEST(GraphBoundTest, TheWeightsTermCountsEveryUnitsDma) {
  auto weights = [](int units, int bytes_per_cycle) {
    return DmasBound(units, bytes_per_cycle).weights;
  };
  EXPECT_GT(weights(1, 16), 0);
  EXPECT_DOUBLE_EQ(weights(2, 16) * 2, weights(1, 16));
  EXPECT_DOUBLE_EQ(weights(2, 8), weights(1, 8));
  EXPECT_DOUBLE_EQ(weights(1, 8), weights(1, 16));
}

// With the weights through vector memory, the core's one host DMA brings every tile too, a
// row a cycle at most (docs/performance.md): on lab-8 (8-byte rows) at 16 B/cycle, two
// units' DMAs take a tile in 4 cycles, the host DMA in 8; one unit's DMA in 8 as well.
TEST(GraphBoundTest, WeightsThroughVectorMemoryAreTheHostDmasToo) {
  for (const int units : {1, 2}) {
    SCOPED_TRACE(units);
    const Bound fifo = DmasBound(units, 16);
    const Bound vmem = DmasBound(units, 16, WeightPath::kVectorMemory);
    EXPECT_EQ(fifo.hbm_dma, 0);
    EXPECT_DOUBLE_EQ(vmem.hbm_dma, vmem.weights * units);
    EXPECT_DOUBLE_EQ(vmem.weights, fifo.weights);
    EXPECT_DOUBLE_EQ(vmem.Host(), fifo.Host() + vmem.hbm_dma);
  }
}

// A side x side map of `channels`, then a window over the whole map larger than the
// registers hold: a global average pooling, and a dense layer over the map (after a 1 x 1
// convolution to `narrow` channels), joined.
nn::Model WholeMapModel(int side, int channels, int narrow, uint64_t seed) {
  nn::Model m = NewModel("whole-map", {side, side, 2});
  m.layers = {
      L(LayerType::kConv2d, {nn::kModelInput}, channels, 3, 1, 1, Activation::kRelu),  // 0
      GlobalPool(0),                                                                   // 1
      L(LayerType::kConv2d, {0}, narrow, 1),                                           // 2
      L(LayerType::kFlatten, {2}),                                                     // 3
      L(LayerType::kDense, {3}, 5, 1, 1, 0, Activation::kRelu),  // 4: over the map
      L(LayerType::kFlatten, {1}),                               // 5
      L(LayerType::kConcat, {5, 4}),                             // 6
      L(LayerType::kDense, {6}, 4),                              // 7
  };
  return test::Randomize(m, seed);
}

// The whole-map model (quantized for an int8 chip) and the 4 x 4 chip of the dtype.
std::pair<nn::Model, config::TpuConfig> WholeMapOn(bool bf16) {
  nn::Model m = WholeMapModel(16, bf16 ? 8 : 6, bf16 ? 4 : 3, 4);
  config::TpuConfig c = config::LoadConfig("small-16");
  c.array_dim = 4;
  if (bf16) {
    c.dtype = hw::Dtype::kBf16;
  } else {
    nn::Quantize(&m, nn::SyntheticInputs(m, 8, 1), 8);
  }
  return {m, c};
}

// A window over a whole map that the registers cannot hold (16 x 16, kernels up to 15) reads
// each image's rows in place instead (issue 70: a CNN with a 16 x 16 global average pooling
// was refused): the network is one program, bit-exact, int8 (channels in part of a pixel's
// rows) and bf16 (whole rows), with a term for each of the image's rows.
TEST(GraphCompilerTest, AWindowLargerThanTheRegistersReadsEachImagesRows) {
  for (const bool bf16 : {false, true}) {
    const auto [m, c] = WholeMapOn(bf16);
    const LoweredGraph g = LowerGraph(m, c.array_dim, c.dtype);
    ASSERT_EQ(g.why_not, "");
    const GraphOp& gap = g.ops[1];
    EXPECT_EQ(gap.layers, std::vector<int>{1});
    EXPECT_TRUE(gap.image_rows && gap.stacked);
    EXPECT_EQ(static_cast<int64_t>(gap.terms[0].size()), 16 * 16);  // tile column 0's rows
    EXPECT_TRUE(std::none_of(gap.terms[0].begin(), gap.terms[0].end(),
                             [](const OpTerm& t) { return t.window; }));
    RunExact(m, c, engine::EngineKind::kFast, 5, 3);
  }
}
// ... and on the RTL, with the fast engine's counters (one chip a test: one SystemC system
// per process).
void WholeMapOnBothEngines(bool bf16) {
  const auto [m, c] = WholeMapOn(bf16);
  const TpuRunResult rtl = RunExact(m, c, engine::EngineKind::kRtl, 5, 3);
  const TpuRunResult fast = RunExact(m, c, engine::EngineKind::kFast, 5, 3);
  EXPECT_EQ(rtl.Total(), fast.Total());
  EXPECT_EQ(rtl.chip_cycles, fast.chip_cycles);
}
TEST(GraphCompilerTest, AWindowLargerThanTheRegistersIsBitExactOnTheRtl) {
  WholeMapOnBothEngines(false);
}
TEST(GraphCompilerTest, AWindowLargerThanTheRegistersIsBitExactInBf16OnTheRtl) {
  WholeMapOnBothEngines(true);
}

// What the window registers cannot hold is said, and a chain then runs as layer jobs.
TEST(GraphCompilerTest, WhatDoesNotFitSaysWhy) {
  nn::Model m = NewModel("big-kernel", {20, 20, 2});
  m.layers = {L(LayerType::kConv2d, {}, 3, 16, 1, 0, Activation::kRelu), L(LayerType::kFlatten, {}),
              L(LayerType::kDense, {}, 4)};
  m = test::Randomize(m, 5);
  nn::Quantize(&m, nn::SyntheticInputs(m, 4, 1), 4);
  const NetworkCompiler nc(m, config::LoadConfig("small-16"), 2);
  EXPECT_FALSE(nc.Fits());
  EXPECT_NE(nc.WhyNot().find("window registers"), std::string::npos) << nc.WhyNot();
  const auto chip = test::TestEngine(engine::EngineKind::kFast, config::LoadConfig("small-16"), {});
  const TpuRunResult r = RunModelOnTpu(m, *chip, nn::SyntheticInputs(m, 2, 2), 2, 2);
  EXPECT_EQ(r.plan.rfind("layer jobs (layer", 0), 0u) << r.plan;
  EXPECT_EQ(r.mismatches, 0);
  // A graph that does not fit is an error that names why.
  nn::Model g = GraphModel(2);
  g.layers[0].kernel_h = g.layers[0].kernel_w = 17;
  g.layers[0].pad_top = g.layers[0].pad_left = g.layers[0].pad_bottom = g.layers[0].pad_right = 8;
  g = test::Randomize(g, 2);
  nn::Quantize(&g, nn::SyntheticInputs(g, 4, 1), 4);
  try {
    RunModelOnTpu(g, *chip, nn::SyntheticInputs(g, 1, 2), 1, 1);
    ADD_FAILURE() << "a graph that does not fit ran";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("window registers"), std::string::npos) << e.what();
  }
}

// Adds that no convolution's activate can take (both inputs read elsewhere too), one
// without and one with ReLU, over maps of 6 channels (two tiles of 4 lanes, the second half
// padding), on the 4 x 4 chip of `dtype` (quantized for int8).
std::pair<nn::Model, config::TpuConfig> StandaloneAddsOn(hw::Dtype dtype) {
  nn::Model m = NewModel("adds", {6, 6, 5});
  m.layers = {
      L(LayerType::kConv2d, {nn::kModelInput}, 6, 3, 1, 1),       // 0: negatives
      L(LayerType::kConv2d, {0}, 6, 1),                           // 1
      L(LayerType::kConv2d, {0}, 6, 1, 1, 0, Activation::kRelu),  // 2
      L(LayerType::kAdd, {1, 2}),                                 // 3: standalone
      L(LayerType::kAdd, {2, 1}, 0, 0, 1, 0, Activation::kRelu),  // 4: standalone
      L(LayerType::kConcat, {3, 4}),                              // 5: 12 channels
      L(LayerType::kFlatten, {5}),                                // 6
      L(LayerType::kDense, {6}, 4),                               // 7
  };
  m = test::Randomize(m, 3);
  config::TpuConfig c = config::LoadConfig("small-16");
  c.array_dim = 4;
  c.dtype = dtype;
  if (dtype == hw::Dtype::kInt8) nn::Quantize(&m, nn::SyntheticInputs(m, 8, 1), 8);
  return {m, c};
}

// On a bf16 chip such an add is two steps of the vector unit, no pass through the identity
// tile (the plan keeps a row of zeros for them); bit-exact against nn::Bf16Net. An int8 chip
// keeps the identity pass (its residual add requantizes).
TEST(GraphCompilerTest, Bf16StandaloneAddsRunOnTheVectorUnit) {
  for (const hw::Dtype dtype : {hw::Dtype::kInt8, hw::Dtype::kBf16}) {
    const auto [m, c] = StandaloneAddsOn(dtype);
    const LoweredGraph g = LowerGraph(m, c.array_dim, c.dtype);
    ASSERT_EQ(g.why_not, "");
    const OpKind want = dtype == hw::Dtype::kBf16 ? OpKind::kVector : OpKind::kResidual;
    int adds = 0;
    for (const GraphOp& op : g.ops) {
      if (op.layers != std::vector<int>{3} && op.layers != std::vector<int>{4}) continue;
      ++adds;
      EXPECT_EQ(op.kind, want) << op.name;
      if (want == OpKind::kVector) {
        EXPECT_EQ(op.steps.size(), 2u) << op.name;
        EXPECT_TRUE(op.terms.empty()) << op.name;
      }
    }
    EXPECT_EQ(adds, 2);
    EXPECT_EQ(PlanGraph(g, c, 3).zero_row >= 0, dtype == hw::Dtype::kBf16);
    RunExact(m, c, engine::EngineKind::kFast, 5, 3);
  }
}

// ... and on the RTL with every counter the fast engine's (one SystemC chip per test).
TEST(GraphCompilerTest, Bf16StandaloneAddsAreBitExactOnTheRtl) {
  const auto [m, c] = StandaloneAddsOn(hw::Dtype::kBf16);
  const TpuRunResult rtl = RunExact(m, c, engine::EngineKind::kRtl, 5, 3);
  const TpuRunResult fast = RunExact(m, c, engine::EngineKind::kFast, 5, 3);
  EXPECT_EQ(rtl.Total(), fast.Total());
  EXPECT_EQ(rtl.chip_cycles, fast.chip_cycles);
}

// The steps the compiler gives a bf16 add compute arith::Bf16ResidualAdd (what nn::Bf16Net
// and the activation unit's fused add compute) for every pair of special values: zeros of
// both signs, subnormals (zeros of their sign), sums that cancel or fall below the smallest
// normal, infinities, NaNs; with and without ReLU. Run by the vector unit's CPU reference
// (arith::VectorRun, which the engines equal: VectorUnitTest, co-simulation).
TEST(GraphCompilerTest, TheVectorAddStepsEqualTheResidualAddOnSpecialValues) {
  const std::vector<uint16_t> v = {0x0000, 0x8000, 0x0001, 0x8001, 0x0080, 0x8080, 0x0081, 0x8081,
                                   0x3f80, 0xbf80, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1};
  const auto n = static_cast<int64_t>(v.size());  // lanes; y in rows 0.., r from n, out 2n
  for (const bool relu : {false, true}) {
    nn::Model m = StandaloneAddsOn(hw::Dtype::kBf16).first;
    const LoweredGraph g = LowerGraph(m, 4, hw::Dtype::kBf16);
    const int layer = relu ? 4 : 3;
    const auto op = std::find_if(g.ops.begin(), g.ops.end(), [&](const GraphOp& o) {
      return o.layers == std::vector<int>{layer};
    });
    ASSERT_NE(op, g.ops.end());
    std::vector<uint16_t> buf(static_cast<size_t>((3 * n + 1) * n), 0x7fc0);  // zero row: 3n
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        buf[static_cast<size_t>(i * n + j)] = v[static_cast<size_t>(i)];
        buf[static_cast<size_t>((n + i) * n + j)] = v[static_cast<size_t>(j)];
      }
    }
    const auto y = op->inputs[static_cast<size_t>(relu ? 1 : 0)];  // layer 4 adds 2 + 1
    const auto row = [&](int t) -> uint64_t {
      if (t == VectorStep::kZeros) return static_cast<uint64_t>(3 * n);
      if (t == VectorStep::kOutput) return static_cast<uint64_t>(2 * n);
      return t == y ? 0 : static_cast<uint64_t>(n);
    };
    arith::VectorRun({hw::VectorOp::kLess, row(VectorStep::kZeros), row(VectorStep::kZeros),
                      row(VectorStep::kZeros), 1},
                     buf.data(), n);  // the program's zero row
    for (const VectorStep& st : op->steps) {
      arith::VectorInstr in{st.op, row(st.a), row(st.b), row(VectorStep::kOutput),
                            static_cast<uint32_t>(n)};
      in.bcast = st.b == VectorStep::kZeros;
      arith::VectorRun(in, buf.data(), n);
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const uint16_t a = v[static_cast<size_t>(i)], b = v[static_cast<size_t>(j)];
        const uint16_t want = relu ? arith::Bf16ResidualAdd(b, a, true)  // 2 + 1: y = r's
                                   : arith::Bf16ResidualAdd(a, b, false);
        EXPECT_EQ(buf[static_cast<size_t>((2 * n + i) * n + j)], want)
            << std::hex << a << " + " << b << (relu ? " relu" : "");
      }
    }
  }
}

}  // namespace
}  // namespace tpu::compiler
