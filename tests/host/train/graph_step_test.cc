// A graph's training steps on the chip (host/train/graph_step.h) against the CPU reference
// of the same arithmetic (host/train/graph_reference.h's ReferenceGraphStep): after every
// step each image's loss, the mean, the logits, every gradient and every weight and
// optimizer value equal the reference's bit for bit, on both engines, with every counter of
// the two engines equal. The graphs cover what the layout must get right: the residual CNN
// (convolutions with "same" padding, receptive fields of two K-tiles, 2 x 2 and global
// average pooling, residual adds whose input is also a convolution's), and a branchy graph
// (images of two channels, a stride-2 convolution whose input gradient reads its gradient
// dilated, a tensor read by three layers, an add without ReLU, a flatten of a 5 x 5 map into
// a dense layer, a dense layer reading a dense layer), concatenations (of two layers, and of
// one with itself) with a depthwise convolution, max poolings (nn_test_util.h's
// MaxPoolGraph), and windows that leave their input's last row and column out, whose
// gradient there is +0 (DownsampleGraph, a valid stride-2 convolution); a batch of one image
// and of several,
// SGD and Adam, one core and two; batch normalization in training mode (BatchNormGraph);
// maps of more channels than the array's lanes, in channel blocks (BlockGraph).
#include "host/train/graph_step.h"

#include <gtest/gtest.h>

#include <random>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"
#include "host/train/dense_model.h"
#include "host/train/graph_reference.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/host/train/step_test_util.h"
#include "tests/test_engines.h"

namespace tpu::test {
namespace {

using nn::LayerType;
using train::Optimizer;

// 10 x 10 x 2: conv 4 same (l0), conv 4 of stride 2 same (l1, 5 x 5; or valid, 4 x 4),
// conv 4 same without ReLU (l2) added to l1 (l3, ReLU), a 1 x 1 conv (l4) added to l3
// without ReLU (l5; l1 and l3 read twice each), flattened (l6) into a dense layer of 12 (l7)
// and the 5 outputs (l8).
nn::Model BranchyGraph(uint64_t seed, const char* l1_padding = "same") {
  nn::Model m;
  m.name = "branchy";
  m.input = {10, 10, 2};
  nn::Layer add1 = MakeLayer(LayerType::kAdd), add2 = MakeLayer(LayerType::kAdd);
  add1.inputs = {1, 2};
  add1.activation = nn::Activation::kRelu;
  add2.inputs = {3, 4};
  m.layers = {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"),
              MakeLayer(LayerType::kConv2d, 4, 3, 2, l1_padding),
              MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone),
              add1,
              MakeLayer(LayerType::kConv2d, 4, 1),
              add2,
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 12),
              MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  nn::Model r = Randomize(m, seed);
  for (nn::Layer& l : r.layers)  // weights of the size Glorot's would give: a trainable net
    for (float& v : l.weights.data) v *= 0.5f;
  return r;
}

// 8 x 8 x 1: conv 4 same (l0), a depthwise conv same (l1) concatenated after l0 (l2: 8
// channels), conv 6 of stride 2 (l3, 4 x 4) concatenated with itself (l4: 12 channels),
// pooled globally (l5), the 5 outputs (l6).
nn::Model ConcatGraph(uint64_t seed) {
  nn::Model m;
  m.name = "concat";
  m.input = {8, 8, 1};
  nn::Layer dw = MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"),
            cat1 = MakeLayer(LayerType::kConcat), cat2 = MakeLayer(LayerType::kConcat),
            gap = MakeLayer(LayerType::kAvgPool2d);
  dw.depthwise = true;
  cat1.inputs = {0, 1};
  cat2.inputs = {3, 3};
  gap.global_pool = true;
  m.layers = {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"),
              dw,
              cat1,
              MakeLayer(LayerType::kConv2d, 6, 3, 2, "same"),
              cat2,
              gap,
              MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  return Randomize(m, seed);
}

// 8 x 8 x 2: conv 4 same without activation (l0), batch normalization with ReLU (l1), conv 4
// same (l2), batch normalization without activation (l3) added to l1 (l4, ReLU: l1 read
// twice), max pooled (l5, 4 x 4), flattened (l6) into a dense layer of 6 (l7), a batch
// normalization of its 6 values with ReLU6 (l8), the 5 outputs (l9). Gamma and beta start
// away from 1 and 0, the running statistics anywhere.
// 31 x 31 x 3 images (a map of 961 pixels, padded to 976 rows on 16 lanes), conv 8 same
// reading them (l0), max pooling 3 x 3 of stride 2 padded 1 (l1, 16 x 16), conv 8 same (l2),
// pooled globally (l3), into the 5 outputs. On a 16-lane chip with a buffer of 8,192 rows and
// the maps in HBM, each convolution's F in pieces (FPieces: l0's of 256 rows, the last one's
// padding zeroed; l2's of 96) and l1's gradient in bands of 8 input rows (MaxBands).
nn::Model PiecesGraph(uint64_t seed, int side = 31, int channels = 3) {
  nn::Layer gap = MakeLayer(LayerType::kAvgPool2d);
  gap.global_pool = true;
  return Chain("pieces", {side, side, channels},
               {MakeLayer(LayerType::kConv2d, 8, 3, 1, "same"), MaxPool(3, 2, 1),
                MakeLayer(LayerType::kConv2d, 8, 3, 1, "same", nn::Activation::kNone), gap},
               seed);
}

nn::Model BatchNormGraph(uint64_t seed) {
  nn::Model m;
  m.name = "batchnorm";
  m.input = {8, 8, 2};
  nn::Layer add = MakeLayer(LayerType::kAdd), bn = MakeLayer(LayerType::kBatchNorm);
  add.inputs = {1, 3};
  add.activation = nn::Activation::kRelu;
  m.layers = {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone),
              bn,
              MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone),
              bn,
              add,
              MaxPool(2, 2, 0),
              MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, 6, 1, 1, "valid", nn::Activation::kNone),
              bn,
              MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  m.layers[1].activation = nn::Activation::kRelu;
  m.layers[8].activation = nn::Activation::kRelu6;
  nn::Model r = Randomize(m, seed);
  for (size_t i : {1, 3, 8})
    for (float& g : r.layers[i].weights.data) g += 1.0f;
  r.layers[3].momentum = 0.25f;
  return r;
}

// Maps of more channels than the array's n lanes, in channel blocks (with n = 16): 6 x 6 x 2,
// conv 32 same without activation (l0: one block in, two out), batch normalization with
// ReLU (l1), conv 32 same without activation (l2: two in, two out), batch normalization
// (l3) added to l1 (l4, ReLU), max pooled (l5, 3 x 3), a 1 x 1 conv of 16 (l6: two in, one
// out), conv 48 of stride 2 same (l7: one in, three out, 2 x 2), a 2 x 2 average pooling
// (l8), flattened (l9) into a dense layer of 32 (l10: three K-tiles and the bias's, two
// blocks out), the 5 outputs (l11: two blocks in; at most n).
nn::Model BlockGraph(uint64_t seed, int n = 16) {
  nn::Model m;
  m.name = "blocks";
  m.input = {6, 6, 2};
  nn::Layer add = MakeLayer(LayerType::kAdd), bn = MakeLayer(LayerType::kBatchNorm);
  add.inputs = {1, 3};
  add.activation = nn::Activation::kRelu;
  m.layers = {
      MakeLayer(LayerType::kConv2d, 2 * n, 3, 1, "same", nn::Activation::kNone),
      bn,
      MakeLayer(LayerType::kConv2d, 2 * n, 3, 1, "same", nn::Activation::kNone),
      bn,
      add,
      MaxPool(2, 2, 0),
      MakeLayer(LayerType::kConv2d, n, 1),
      MakeLayer(LayerType::kConv2d, 3 * n, 3, 2, "same"),
      AvgPool(2, 2, 0),
      MakeLayer(LayerType::kFlatten),
      MakeLayer(LayerType::kDense, 2 * n),
      MakeLayer(LayerType::kDense, std::min(5, n), 1, 1, "valid", nn::Activation::kSoftmax)};
  m.layers[1].activation = nn::Activation::kRelu;
  nn::Model r = Randomize(m, seed);
  for (size_t i : {1, 3})
    for (float& g : r.layers[i].weights.data) g += 1.0f;
  r.layers[3].momentum = 0.25f;
  return r;
}

// 6 x 6 x 1, conv 32 same (two blocks of n = 16), conv 32 of stride 2 same (3 x 3), then
// either flattened into the 5 outputs (a dense layer reading a map of two blocks, its input
// gradient into them) or pooled globally into them (its gradient copied to every pixel:
// PoolGradientIsCopied).
nn::Model BlockMapGraph(uint64_t seed, bool global, int n = 16) {
  nn::Layer gap = MakeLayer(LayerType::kAvgPool2d);
  gap.global_pool = true;
  nn::Model m;
  m.name = global ? "blocks-gap" : "blocks-flatten";
  m.input = {6, 6, 1};
  m.layers = {
      MakeLayer(LayerType::kConv2d, 2 * n, 3, 1, "same"),
      MakeLayer(LayerType::kConv2d, 2 * n, 3, 2, "same"),
      global ? gap : MakeLayer(LayerType::kFlatten),
      MakeLayer(LayerType::kDense, std::min(5, n), 1, 1, "valid", nn::Activation::kSoftmax)};
  return Randomize(m, seed);
}

// small-16 as a bfloat16 chip: 16 lanes, and tpu-v2's unified buffer (a 3 x 3 convolution of
// 32 channels to 32 takes 38 tiles of weights, each with its float32 copy and Adam's).
config::TpuConfig Bf16Small() {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.dtype = hw::Dtype::kBf16;
  c.ub_depth_rows = config::LoadConfig("tpu-v2").ub_depth_rows;
  return c;
}

// teach-4 as a bfloat16 chip: 4 lanes (its RTL is in every build).
config::TpuConfig Bf16Tiny() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.dtype = hw::Dtype::kBf16;
  return c;
}

// `steps` steps of `m` at `batch` of a graph's step against the reference, its state where
// `at` says.
engine::ExecResult StepsEqualReference(engine::ChipEngine* chip, const nn::Model& m, int batch,
                                       Optimizer::Kind kind, int steps, int cores = 1,
                                       train::StateAt at = train::StateAt::kAny,
                                       size_t program_words = 0) {
  const test::CompileStepFn compile = [at, program_words](const nn::Model& mm, int b,
                                                          const Optimizer& opt,
                                                          const config::TpuConfig& c, int k) {
    return train::CompileGraphStep(mm, b, opt, c, k, at, program_words);
  };
  return test::StepsEqualReference(compile, 91, chip, m, batch, kind, steps, cores);
}

// Two steps of m at `batch` on `c` cut one row short of holding the batch in one pass with
// the state in the buffer: in `passes` passes (more than one where 0), with Adam, bit for bit
// the reference.
void InPassesEqualsTheReference(const nn::Model& m, int batch, config::TpuConfig c, int passes) {
  const auto buffer = train::StateAt::kBuffer;
  c.ub_depth_rows = static_cast<int>(
      train::CompileGraphStep(m, batch, Optimizer(), c, 1, buffer).programs.ub_rows - 1);
  const int got = train::CompileGraphStep(m, batch, Optimizer(), c, 1, buffer).programs.passes;
  if (passes > 0) EXPECT_EQ(got, passes) << m.name;
  EXPECT_GT(got, 1) << m.name;
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, batch,
                      Optimizer::Kind::kAdam, 2, 1, buffer);
}

// On a core of two matrix units the transposes whose activates are held back run on unit 1
// (StepEmitter::SideUnit); the RTL's run is GraphStepRtlTest's.
TEST(GraphStepTest, TwoMatrixUnitsEqualTheReference) {
  config::TpuConfig two = Bf16Tiny();
  two.mxus_per_core = 2;
  const auto chip = TestEngine(engine::EngineKind::kFast, two);
  for (const nn::Model& m : {BlockGraph(31, 4), BlockMapGraph(36, true, 4)})
    StepsEqualReference(chip.get(), m, 2, Optimizer::Kind::kAdam, 2);
}

// On the fast engine (the RTL's run is GraphStepRtlTest's).
TEST(GraphStepTest, EveryStepEqualsTheReference) {
  const auto chip = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v2"));
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(3), 2, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(4), 1, Optimizer::Kind::kSgd, 2);
  StepsEqualReference(chip.get(), BranchyGraph(5), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), BranchyGraph(6), 1, Optimizer::Kind::kSgd, 2);
  StepsEqualReference(chip.get(), ConcatGraph(7), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), MaxPoolGraph(8), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), DownsampleGraph(10), 3, Optimizer::Kind::kAdam, 2);
  StepsEqualReference(chip.get(), Relu6Graph(11), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), AvgPoolGraph(14), 3, Optimizer::Kind::kAdam, 3);
  // A dense layer reads a map of more than 15 x 15 pixels, in windows of 12 x 12 and 14 x 8
  // (16 x 16 x 8, its bias lane a K-tile of its own), of 12 x 8 and 1 (17 x 17 x 4), of 8 x 2
  // and 1 (17 x 1 x 8).
  StepsEqualReference(chip.get(), WideMapGraph(15, 16, 16, 8), 2, Optimizer::Kind::kAdam, 2);
  StepsEqualReference(chip.get(), WideMapGraph(16, 17, 17, 4), 2, Optimizer::Kind::kSgd, 2);
  StepsEqualReference(chip.get(), WideMapGraph(17, 17, 1, 8), 2, Optimizer::Kind::kAdam, 2);
  // A global pooling of such maps, its chunks' K-tiles added in the accumulators.
  StepsEqualReference(chip.get(), WideGapGraph(18, 16, 16, 8), 2, Optimizer::Kind::kAdam, 2);
  StepsEqualReference(chip.get(), WideGapGraph(19, 17, 17, 4), 2, Optimizer::Kind::kSgd, 2);
  // A dense layer reads the images: the bias lane in the images' last row, or past them.
  StepsEqualReference(chip.get(), MlpGraph(12, 6, 6, 2), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), MlpGraph(13, 16, 16, 1), 3, Optimizer::Kind::kSgd, 3);
  // l1 a 3 x 3 valid convolution of stride 2 of 10 x 10, which reads no pixel of the last
  // row and column
  StepsEqualReference(chip.get(), BranchyGraph(5, "valid"), 2, Optimizer::Kind::kSgd, 2);
  // Batch normalization in training mode: its statistics, x^, the running statistics (in the
  // state, compared after every step) and its gradients on the vector unit.
  StepsEqualReference(chip.get(), BatchNormGraph(21), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), BatchNormGraph(22), 2, Optimizer::Kind::kSgd, 2);
}

// A batch normalization of more values a channel than a row_sum takes (65,535 rows): 257
// images of 16 x 16 pixels, summed in two pieces whose sums are added (chip::RowSum), on a
// unified buffer made large enough.
// Maps of more channels than the array's N, in channel blocks (docs/training.md, "Channel
// blocks"), with Adam and SGD, one core and two.
TEST(GraphStepTest, MapsOfSeveralChannelBlocksEqualTheReference) {
  const auto chip = TestEngine(engine::EngineKind::kFast, Bf16Small());
  StepsEqualReference(chip.get(), BlockGraph(31), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), BlockGraph(32), 2, Optimizer::Kind::kSgd, 2);
  StepsEqualReference(chip.get(), BlockMapGraph(33, false), 2, Optimizer::Kind::kAdam, 2);
  StepsEqualReference(chip.get(), BlockMapGraph(34, true), 2, Optimizer::Kind::kSgd, 2);
  config::TpuConfig two = Bf16Small();
  two.cores = 2;
  const auto chip2 = TestEngine(engine::EngineKind::kFast, two);
  StepsEqualReference(chip2.get(), BlockGraph(35), 4, Optimizer::Kind::kAdam, 2, 2);
  // A batch beyond the buffer in passes: the second convolution's W'' of two input blocks
  // made in the first pass and read by the second (fails where the first does not make it).
  InPassesEqualsTheReference(BlockMapGraph(36, false), 8, Bf16Small(), 2);
}

TEST(GraphStepTest, ABatchNormalizationSumsMoreRowsThanOneInstructionTakes) {
  nn::Model m;
  m.name = "tall";
  m.input = {16, 16, 1};
  nn::Layer gap = MakeLayer(LayerType::kAvgPool2d);
  gap.global_pool = true;
  m.layers = {MakeLayer(LayerType::kConv2d, 4, 1, 1, "valid", nn::Activation::kNone),
              MakeLayer(LayerType::kBatchNorm), gap,
              MakeLayer(LayerType::kDense, 3, 1, 1, "valid", nn::Activation::kSoftmax)};
  m.layers[1].activation = nn::Activation::kRelu;
  config::TpuConfig c = config::LoadConfig("tpu-v2");
  c.ub_depth_rows = 1 << 20;
  const auto chip = TestEngine(engine::EngineKind::kFast, c);
  // A sum of squares of 65,792 rows rounds at each add: pieces cut 200 rows earlier in the
  // reference give other statistics (its failure checked by hand).
  StepsEqualReference(chip.get(), Randomize(m, 24), 257, Optimizer::Kind::kAdam, 2);
}

// Split across tpu-v3's two cores, the weight gradients summed through HBM.
TEST(GraphStepTest, TwoCoresEqualTheReferenceOfTwoCores) {
  const auto chip = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"));
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(3), 4, Optimizer::Kind::kAdam, 2, 2);
  StepsEqualReference(chip.get(), BranchyGraph(5), 2, Optimizer::Kind::kSgd, 2, 2);
  StepsEqualReference(chip.get(), ConcatGraph(8), 2, Optimizer::Kind::kSgd, 2, 2);
  StepsEqualReference(chip.get(), MaxPoolGraph(9), 2, Optimizer::Kind::kSgd, 2, 2);
  // Each core normalizes its own share (no cross-core statistics); core 0's running
  // statistics are the state's.
  StepsEqualReference(chip.get(), BatchNormGraph(23), 4, Optimizer::Kind::kAdam, 2, 2);
}

// The RTL equals the reference too, with every counter equal to the fast engine's (a step of
// the branchy graph, one of the max poolings', one of the downsampling's, one of ReLU6's, one
// of an MLP's, one of the average poolings' and one each of a dense layer and a global pooling
// reading a 17 x 1 map).
TEST(GraphStepRtlTest, TheEnginesAgreeOnEveryCounter) {
  const config::TpuConfig c = config::LoadConfig("tpu-v2");
  const auto fast = TestEngine(engine::EngineKind::kFast, c);
  const auto rtl = TestEngine(engine::EngineKind::kRtl, c);
  for (const nn::Model& m : {BranchyGraph(5), MaxPoolGraph(8), DownsampleGraph(10), Relu6Graph(11),
                             MlpGraph(13, 16, 16, 1), AvgPoolGraph(14), WideMapGraph(17, 17, 1, 8),
                             WideGapGraph(20, 17, 1, 8)}) {
    const engine::ExecResult f = StepsEqualReference(fast.get(), m, 1, Optimizer::Kind::kAdam, 1);
    const engine::ExecResult r = StepsEqualReference(rtl.get(), m, 1, Optimizer::Kind::kAdam, 1);
    EXPECT_EQ(f.cycles, r.cycles) << m.name;
    EXPECT_TRUE(f.counters == r.counters) << m.name;
  }
  // Batch normalization (its vector instructions: row sums, broadcasts, rsqrt, float32 rows)
  // in a small graph, at two images: 6 x 6 x 1, conv 4 same without activation, batch
  // normalization with ReLU, flattened into the 5 outputs.
  nn::Model small;
  small.name = "small-batchnorm";
  small.input = {6, 6, 1};
  small.layers = {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same", nn::Activation::kNone),
                  MakeLayer(LayerType::kBatchNorm), MakeLayer(LayerType::kFlatten),
                  MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  small.layers[1].activation = nn::Activation::kRelu;
  const nn::Model bn = Randomize(small, 21);
  const engine::ExecResult f = StepsEqualReference(fast.get(), bn, 2, Optimizer::Kind::kAdam, 1);
  const engine::ExecResult r = StepsEqualReference(rtl.get(), bn, 2, Optimizer::Kind::kAdam, 1);
  EXPECT_EQ(f.cycles, r.cycles);
  EXPECT_TRUE(f.counters == r.counters);
}

// 16 x 16 x 2 images, conv 8 same (l0), 2 x 2 average pooling (l1), flattened (l2) into a
// dense layer of `wide` (l3) and the 5 outputs (l4): a state (l3's 513 x wide weights and
// their slots) far larger than an image's maps.
nn::Model WideDenseGraph(uint64_t seed, int wide) {
  return Chain("widedense", {16, 16, 2},
               {MakeLayer(LayerType::kConv2d, 8, 3, 1, "same"), MakeLayer(LayerType::kAvgPool2d),
                MakeLayer(LayerType::kFlatten), MakeLayer(LayerType::kDense, wide)},
               seed);
}

// WideDenseGraph with a batch normalization (ReLU) after its convolution, gamma away from 1.
nn::Model WideBatchNormGraph(uint64_t seed, int wide) {
  nn::Layer bn = MakeLayer(LayerType::kBatchNorm);
  bn.activation = nn::Activation::kRelu;
  nn::Model m = Chain("widebatchnorm", {16, 16, 2},
                      {MakeLayer(LayerType::kConv2d, 8, 3, 1, "same", nn::Activation::kNone), bn,
                       MakeLayer(LayerType::kAvgPool2d), MakeLayer(LayerType::kFlatten),
                       MakeLayer(LayerType::kDense, wide)},
                      seed);
  for (float& g : m.layers[1].weights.data) g += 1.0f;
  return m;
}

// Whether a compiled step's state is in HBM: its init's "state" region is in weight memory.
bool StateInHbm(const train::CompiledStep& s) {
  for (const engine::Region& r : s.programs.init.regions)
    if (r.name == "state") return r.memory == engine::Memory::kWeight;
  return false;
}

// 6 x 6 x 2 images, conv 8 same (l0), flattened (l1) into the `classes` outputs (l2); with
// `pooled` 16 x 16 x 2 images and a 2 x 2 average pooling after the convolution (maps larger
// than the gradients, so that passes take fewer rows).
nn::Model ManyClasses(uint64_t seed, int classes, bool pooled = false) {
  nn::Model m;
  m.name = "classes-" + std::to_string(classes);
  m.input = pooled ? nn::Shape3{16, 16, 2} : nn::Shape3{6, 6, 2};
  m.layers = {MakeLayer(LayerType::kConv2d, 8, 3, 1, "same"), MakeLayer(LayerType::kFlatten),
              MakeLayer(LayerType::kDense, classes, 1, 1, "valid", nn::Activation::kSoftmax)};
  if (pooled) m.layers.insert(m.layers.begin() + 1, MakeLayer(LayerType::kAvgPool2d));
  return Randomize(m, seed);
}

// Channel blocks on the RTL: a step of BlockGraph, one of a global pooling of two blocks and
// one of 6 classes (two blocks) on a 4-lane bfloat16 chip (maps of 8 and 12 channels), every
// counter equal to the fast engine's; and a graph whose state is in HBM.
// The state in HBM: 6 x 6 x 2 images, conv 4 same, flattened into a dense layer of 8 and the
// 3 outputs.
nn::Model HbmChain() {
  nn::Model chain;
  chain.name = "hbm-state";
  chain.input = {6, 6, 2};
  chain.layers = {MakeLayer(LayerType::kConv2d, 4, 3, 1, "same"), MakeLayer(LayerType::kFlatten),
                  MakeLayer(LayerType::kDense, 8),
                  MakeLayer(LayerType::kDense, 3, 1, 1, "valid", nn::Activation::kSoftmax)};
  return Randomize(chain, 42);
}

// With the state in HBM and two passes, the first pass writes each layer's tile and the
// convolution's W'' to HBM and the second reads them back (docs/training.md, "The state in
// HBM"): compiled for a buffer one row short of a pass of both images, both engines equal the
// reference and each other on every counter.
TEST(GraphStepRtlTest, WhatTheFirstPassMakesAgreesOnEveryCounter) {
  const nn::Model m = HbmChain();
  const auto hbm = train::StateAt::kHbm;
  config::TpuConfig cut = Bf16Tiny();
  cut.ub_depth_rows =
      static_cast<int>(train::CompileGraphStep(m, 2, Optimizer(), cut, 1, hbm).programs.ub_rows) -
      1;
  const test::CompileStepFn compile = [cut, hbm](const nn::Model& mm, int b, const Optimizer& opt,
                                                 const config::TpuConfig&, int k) {
    return train::CompileGraphStep(mm, b, opt, cut, k, hbm);
  };
  ASSERT_EQ(compile(m, 2, Optimizer(), cut, 1).programs.passes, 2);
  const auto fast = TestEngine(engine::EngineKind::kFast, Bf16Tiny());
  const auto rtl = TestEngine(engine::EngineKind::kRtl, Bf16Tiny());
  const engine::ExecResult f =
      test::StepsEqualReference(compile, 91, fast.get(), m, 2, Optimizer::Kind::kAdam, 2);
  const engine::ExecResult r =
      test::StepsEqualReference(compile, 91, rtl.get(), m, 2, Optimizer::Kind::kAdam, 2);
  EXPECT_EQ(f.cycles, r.cycles);
  EXPECT_TRUE(f.counters == r.counters);
}

// On a core of two matrix units the transposes whose activates are held back (a weight
// gradient's dZ and dWᵀ, W'') run on unit 1 (StepEmitter::SideUnit): both engines equal the
// reference and each other on every counter.
TEST(GraphStepRtlTest, TwoMatrixUnitsAgreeOnEveryCounter) {
  config::TpuConfig two = Bf16Tiny();
  two.mxus_per_core = 2;
  const auto fast = TestEngine(engine::EngineKind::kFast, two);
  const auto rtl = TestEngine(engine::EngineKind::kRtl, two);
  for (const nn::Model& m : {BlockGraph(31, 4), BlockMapGraph(36, true, 4)}) {
    const engine::ExecResult f = StepsEqualReference(fast.get(), m, 2, Optimizer::Kind::kAdam, 2);
    const engine::ExecResult r = StepsEqualReference(rtl.get(), m, 2, Optimizer::Kind::kAdam, 2);
    EXPECT_EQ(f.cycles, r.cycles) << m.name;
    EXPECT_TRUE(f.counters == r.counters) << m.name;
  }
}

TEST(GraphStepRtlTest, ChannelBlocksAgreeOnEveryCounter) {
  const auto fast = TestEngine(engine::EngineKind::kFast, Bf16Tiny());
  const auto rtl = TestEngine(engine::EngineKind::kRtl, Bf16Tiny());
  for (const nn::Model& m : {BlockGraph(31, 4), BlockMapGraph(36, true, 4), ManyClasses(55, 6)}) {
    const engine::ExecResult f = StepsEqualReference(fast.get(), m, 2, Optimizer::Kind::kAdam, 1);
    const engine::ExecResult r = StepsEqualReference(rtl.get(), m, 2, Optimizer::Kind::kAdam, 1);
    EXPECT_EQ(f.cycles, r.cycles) << m.name;
    EXPECT_TRUE(f.counters == r.counters) << m.name;
  }
  const nn::Model wide = HbmChain();
  const auto hbm = train::StateAt::kHbm;
  EXPECT_TRUE(StateInHbm(train::CompileGraphStep(wide, 2, Optimizer(), Bf16Tiny(), 1, hbm)));
  // ... and each layer's F, and every layer's maps (a batch normalization's too: BlockGraph).
  for (const auto at : {hbm, train::StateAt::kHbmWithF, train::StateAt::kHbmWithMaps}) {
    const engine::ExecResult f =
        StepsEqualReference(fast.get(), wide, 2, Optimizer::Kind::kAdam, 2, 1, at);
    const engine::ExecResult r =
        StepsEqualReference(rtl.get(), wide, 2, Optimizer::Kind::kAdam, 2, 1, at);
    EXPECT_EQ(f.cycles, r.cycles);
    EXPECT_TRUE(f.counters == r.counters);
  }
  // With the maps in HBM: channel blocks with a batch normalization; F in pieces and a max
  // pooling's gradient in bands (28 x 28 x 2 images: l0's F in 8 pieces of 204 rows, l2's in
  // 8 of 52, l1's gradient in bands of 25 input rows).
  for (const nn::Model& m : {BlockGraph(31, 4), PiecesGraph(41, 28, 2)}) {
    const auto maps = train::StateAt::kHbmWithMaps;
    const engine::ExecResult f =
        StepsEqualReference(fast.get(), m, 2, Optimizer::Kind::kAdam, 1, 1, maps);
    const engine::ExecResult r =
        StepsEqualReference(rtl.get(), m, 2, Optimizer::Kind::kAdam, 1, 1, maps);
    EXPECT_EQ(f.cycles, r.cycles) << m.name;
    EXPECT_TRUE(f.counters == r.counters) << m.name;
  }
}

// A weight gradient of more K-tiles than dWᵀ's accumulators (half of them) hold goes in
// groups, dZ transposed again for each: l3 of WideDenseGraph reads 513 values (5 K-tiles)
// and an accumulator of 1,024 rows gives dWᵀ 4.
TEST(GraphStepTest, AWeightGradientBeyondItsAccumulatorsGoesInGroups) {
  config::TpuConfig c = config::LoadConfig("tpu-v2");
  c.acc_depth_rows = 1024;
  const auto chip = TestEngine(engine::EngineKind::kFast, c);
  StepsEqualReference(chip.get(), WideDenseGraph(43, 64), 3, Optimizer::Kind::kAdam, 2);
  StepsEqualReference(chip.get(), WideDenseGraph(44, 256), 2, Optimizer::Kind::kSgd, 2);
}

// More classes than the array's N: the logits, the labels and dL/dlogits in blocks of N
// lanes, the loss's maximum and sum taken block after block (chip::SoftmaxRow); on a 16-lane
// chip 37 classes (three blocks, the last of 5) and 32 (two whole ones), with Adam and SGD,
// in passes and on two cores.
TEST(GraphStepTest, MoreClassesThanNEqualTheReference) {
  const auto chip = TestEngine(engine::EngineKind::kFast, Bf16Small());
  StepsEqualReference(chip.get(), ManyClasses(51, 37), 3, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), ManyClasses(52, 32), 2, Optimizer::Kind::kSgd, 2);
  config::TpuConfig two = Bf16Small();
  two.cores = 2;
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, two).get(), ManyClasses(53, 37), 4,
                      Optimizer::Kind::kAdam, 2, 2);
  InPassesEqualsTheReference(ManyClasses(54, 37, /*pooled=*/true), 4, Bf16Small(), 0);
}

// Layers whose bias lanes are alike share the parameter set that adds the lane's 1: the
// branchy graph's six convolution and dense layers put it in 3 lanes of 16 (2, 4 and 12), so
// 4 sets (with set 0) take its step, bit for bit the reference; 3 do not, the refusal naming
// the lanes.
TEST(GraphStepTest, LayersOfOneBiasLaneShareAParameterSet) {
  config::TpuConfig c = Bf16Small();
  c.param_sets = 4;
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), BranchyGraph(5), 3,
                      Optimizer::Kind::kAdam, 2);
  c.param_sets = 3;
  try {
    train::CompileGraphStep(BranchyGraph(5), 3, Optimizer(), c);
    ADD_FAILURE() << "3 parameter sets took the step";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("(in 3 lanes) take 4 of the activation unit's "
                                         "parameter sets; config 'small-16' has param_sets = 3"),
              std::string::npos)
        << e.what();
  }
}

// The state in HBM (docs/training.md, "The state in HBM"): each layer's tile made and its
// update done through staging rows a piece at a time; bit for bit the reference, with Adam
// and SGD, in passes, on one core and on two (each its own copy); chosen where the state
// does not fit the unified buffer beside the pass, but not for batch normalization.
TEST(GraphStepTest, TheStateInHbmEqualsTheReference) {
  const nn::Model m = WideDenseGraph(41, 512);
  const auto hbm = train::StateAt::kHbm;
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  const auto chip = TestEngine(engine::EngineKind::kFast, v2);
  StepsEqualReference(chip.get(), m, 3, Optimizer::Kind::kAdam, 3, 1, hbm);
  StepsEqualReference(chip.get(), m, 2, Optimizer::Kind::kSgd, 2, 1, hbm);
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(3), 2, Optimizer::Kind::kAdam, 2, 1, hbm);
  // Chosen where the state does not fit beside even one image's maps.
  config::TpuConfig c = v2;
  c.ub_depth_rows = static_cast<int>(
      train::CompileGraphStep(m, 1, Optimizer(), v2, 1, train::StateAt::kBuffer).programs.ub_rows -
      1);
  const train::CompiledStep s = train::CompileGraphStep(m, 3, Optimizer(), c, 1);
  EXPECT_TRUE(StateInHbm(s));
  EXPECT_EQ(s.programs.passes, 1);
  // In passes (their gradients summed in HBM): room for two images a pass and 256 rows more
  // (the whole batch's buffers), so that 8 images take 4 passes.
  c.ub_depth_rows =
      static_cast<int>(train::CompileGraphStep(m, 2, Optimizer(), v2, 1, hbm).programs.ub_rows) +
      256;
  const train::CompiledStep passes = train::CompileGraphStep(m, 8, Optimizer(), c, 1, hbm);
  EXPECT_TRUE(StateInHbm(passes));
  EXPECT_EQ(passes.programs.passes, 4);
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, 8, Optimizer::Kind::kAdam,
                      2, 1, hbm);
  // Two cores, each updating its own copy.
  const auto v3 = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"));
  StepsEqualReference(v3.get(), m, 4, Optimizer::Kind::kAdam, 2, 2, hbm);
  // Each layer's F in HBM too, between its forward pass and its weight gradient: convolutions,
  // dense layers reading a dense layer, a flatten and the images, max pooling, passes, two
  // cores.
  const auto with_f = train::StateAt::kHbmWithF;
  StepsEqualReference(chip.get(), m, 3, Optimizer::Kind::kAdam, 2, 1, with_f);
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(4), 2, Optimizer::Kind::kSgd, 2, 1, with_f);
  StepsEqualReference(chip.get(), BranchyGraph(5), 3, Optimizer::Kind::kAdam, 2, 1, with_f);
  StepsEqualReference(chip.get(), MaxPoolGraph(8), 2, Optimizer::Kind::kAdam, 2, 1, with_f);
  StepsEqualReference(chip.get(), MlpGraph(12, 6, 6, 2), 2, Optimizer::Kind::kAdam, 2, 1, with_f);
  StepsEqualReference(v3.get(), nn::MakeResidualCnn(5), 4, Optimizer::Kind::kAdam, 2, 2, with_f);
  c.ub_depth_rows = static_cast<int>(
      train::CompileGraphStep(m, 2, Optimizer(), v2, 1, with_f).programs.ub_rows + 256);
  EXPECT_EQ(train::CompileGraphStep(m, 8, Optimizer(), c, 1, with_f).programs.passes, 4);
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, 8, Optimizer::Kind::kAdam,
                      2, 1, with_f);
}

// A batch normalization's gamma, beta and running statistics come from the state in HBM
// for its forward pass (the running statistics back after it), gamma again for its input
// gradient; its gradient goes out as a weighted layer's does.
TEST(GraphStepTest, BatchNormalizationsWithTheStateInHbmEqualTheReference) {
  const auto hbm = train::StateAt::kHbm, with_f = train::StateAt::kHbmWithF;
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  const auto chip = TestEngine(engine::EngineKind::kFast, v2);
  StepsEqualReference(chip.get(), BatchNormGraph(21), 3, Optimizer::Kind::kAdam, 3, 1, hbm);
  StepsEqualReference(chip.get(), BatchNormGraph(22), 2, Optimizer::Kind::kSgd, 2, 1, with_f);
  // Channel blocks (two of 16 lanes) on the small chip; two cores, each with its own copy.
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, Bf16Small()).get(), BlockGraph(31), 2,
                      Optimizer::Kind::kAdam, 2, 1, hbm);
  const auto v3 = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"));
  StepsEqualReference(v3.get(), BatchNormGraph(23), 4, Optimizer::Kind::kAdam, 2, 2, with_f);
  // Chosen where the state does not fit beside the batch's maps, in one pass.
  const nn::Model m = WideBatchNormGraph(41, 512);
  EXPECT_FALSE(StateInHbm(train::CompileGraphStep(m, 3, Optimizer(), v2)));
  config::TpuConfig c = v2;
  c.ub_depth_rows = static_cast<int>(
      train::CompileGraphStep(m, 3, Optimizer(), v2, 1, train::StateAt::kBuffer).programs.ub_rows -
      1);
  const train::CompiledStep s = train::CompileGraphStep(m, 3, Optimizer(), c, 1);
  EXPECT_TRUE(StateInHbm(s));
  EXPECT_EQ(s.programs.passes, 1);
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, 3, Optimizer::Kind::kAdam,
                      2);
}

// Every layer's output, gradient and F in HBM between its steps, the buffer holding one
// layer's and its inputs' at a time: residual adds, branches, concatenation, max and average
// pooling, strides, ReLU6, batch normalization, dense layers reading maps and the images,
// channel blocks, passes, two cores.
TEST(GraphStepTest, TheMapsInHbmEqualTheReference) {
  const auto maps = train::StateAt::kHbmWithMaps;
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  const auto chip = TestEngine(engine::EngineKind::kFast, v2);
  StepsEqualReference(chip.get(), nn::MakeResidualCnn(3), 3, Optimizer::Kind::kAdam, 3, 1, maps);
  StepsEqualReference(chip.get(), BranchyGraph(5), 3, Optimizer::Kind::kSgd, 2, 1, maps);
  StepsEqualReference(chip.get(), ConcatGraph(7), 3, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), MaxPoolGraph(8), 3, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), DownsampleGraph(10), 3, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), Relu6Graph(11), 3, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), AvgPoolGraph(14), 3, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), MlpGraph(12, 6, 6, 2), 2, Optimizer::Kind::kAdam, 2, 1, maps);
  StepsEqualReference(chip.get(), WideMapGraph(16, 17, 17, 4), 2, Optimizer::Kind::kSgd, 2, 1,
                      maps);
  StepsEqualReference(chip.get(), BatchNormGraph(21), 3, Optimizer::Kind::kAdam, 3, 1, maps);
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, Bf16Small()).get(), BlockGraph(31), 3,
                      Optimizer::Kind::kAdam, 2, 1, maps);
  const auto v3 = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"));
  StepsEqualReference(v3.get(), BatchNormGraph(23), 4, Optimizer::Kind::kAdam, 2, 2, maps);
  StepsEqualReference(v3.get(), nn::MakeResidualCnn(5), 4, Optimizer::Kind::kAdam, 2, 2, maps);
  config::TpuConfig small = Bf16Small();
  small.ub_depth_rows = 8192;
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, small).get(), PiecesGraph(9), 4,
                      Optimizer::Kind::kAdam, 3, 1, maps);
  // In passes: room for two images a pass, so that 8 take 4.
  const nn::Model m = nn::MakeResidualCnn(4);
  config::TpuConfig c = v2;
  c.ub_depth_rows =
      static_cast<int>(train::CompileGraphStep(m, 2, Optimizer(), v2, 1, maps).programs.ub_rows) +
      256;
  EXPECT_EQ(train::CompileGraphStep(m, 8, Optimizer(), c, 1, maps).programs.passes, 4);
  StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, 8, Optimizer::Kind::kAdam,
                      2, 1, maps);
}

// A step longer than a core's program region holds runs in parts of whole passes, one
// after another: the residual CNN's 4 passes of 2 (with the maps in HBM) cut to parts of at
// most a third of its step's instructions, on one core and on two, bit for bit the
// reference.
TEST(GraphStepTest, AStepInPartsEqualsTheReference) {
  const auto maps = train::StateAt::kHbmWithMaps;
  const nn::Model m = nn::MakeResidualCnn(4);
  for (const int cores : {1, 2}) {
    config::TpuConfig c = config::LoadConfig("tpu-v3");
    c.ub_depth_rows = static_cast<int>(
        train::CompileGraphStep(m, 2 * cores, Optimizer(), c, cores, maps).programs.ub_rows + 256);
    const train::DensePrograms whole =
        train::CompileGraphStep(m, 8 * cores, Optimizer(), c, cores, maps).programs;
    ASSERT_EQ(whole.passes, 4);
    EXPECT_TRUE(whole.parts[0][1].empty());
    const size_t words = whole.step.programs[0].words.size() / 3;
    const train::DensePrograms cut =
        train::CompileGraphStep(m, 8 * cores, Optimizer(), c, cores, maps, words).programs;
    EXPECT_GE(cut.parts[0][1].size(), 2u);
    for (const engine::Executable& part : cut.parts[0][1])
      EXPECT_LE(part.programs[0].words.size(), words);
    EXPECT_EQ(cut.WholePassOf().size(), cut.WholeStep()[0].words.size());
    EXPECT_EQ(cut.pass_names, whole.pass_names);
    StepsEqualReference(TestEngine(engine::EngineKind::kFast, c).get(), m, 8 * cores,
                        Optimizer::Kind::kAdam, 3, cores, maps, words);
  }
}

// The counters of `steps` steps of m at `batch` on `config`'s fast engine with values (on
// random batches) equal those of its timing-only run (on batches of zeros, values not
// computed: tpusim train --timing-only), step by step and pass by pass.
void TimingOnlyCountsAsAValueRun(const nn::Model& m, int batch, const config::TpuConfig& config,
                                 int cores = 1) {
  const Optimizer adam;
  engine::EngineOptions timing;
  timing.timing_only = true;
  const auto values = TestEngine(engine::EngineKind::kFast, config);
  const auto counts = TestEngine(engine::EngineKind::kFast, config, timing);
  train::ChipTrainer t1(values.get(), train::CompileGraphStep(m, batch, adam, config, cores), adam);
  train::ChipTrainer t2(counts.get(), train::CompileGraphStep(m, batch, adam, config, cores), adam);
  t1.Start(train::FreshState(m, adam));
  t2.Start(train::FreshState(m, adam));
  std::mt19937_64 rng(7);
  const train::Batch b[2] = {RandomBatch(m, batch, rng), RandomBatch(m, batch, rng)};
  train::Batch zeros = b[0];
  std::fill(zeros.x.begin(), zeros.x.end(), 0.0f);
  std::fill(zeros.labels.begin(), zeros.labels.end(), 0);
  for (int step = 0; step < 3; ++step) {
    const bool next = step < 2;
    t1.Step(b[step % 2], next ? &b[(step + 1) % 2] : nullptr);
    t2.Step(zeros, next ? &zeros : nullptr);
    EXPECT_EQ(t1.LastStep().cycles, t2.LastStep().cycles) << m.name << " step " << step + 1;
    EXPECT_TRUE(t1.LastStep().counters == t2.LastStep().counters) << m.name << " step " << step + 1;
  }
  ASSERT_EQ(t1.PassCounters().size(), t2.PassCounters().size());
  for (size_t p = 0; p < t1.PassCounters().size(); ++p)
    EXPECT_TRUE(t1.PassCounters()[p] == t2.PassCounters()[p])
        << m.name << ": pass " << t1.Programs().pass_names[p];
  EXPECT_TRUE(values->ComputesValues());
  EXPECT_FALSE(counts->ComputesValues());
}

// A step timed without values counts what the step with values counts: the residual CNN, the
// branchy graph, max pooling, batch normalization, channel blocks, two cores, passes.
TEST(GraphStepTest, TimingOnlyCountsWhatARunWithValuesCounts) {
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  TimingOnlyCountsAsAValueRun(nn::MakeResidualCnn(3), 4, v2);
  TimingOnlyCountsAsAValueRun(BranchyGraph(5), 3, v2);
  TimingOnlyCountsAsAValueRun(MaxPoolGraph(8), 2, v2);
  TimingOnlyCountsAsAValueRun(BatchNormGraph(21), 3, v2);
  TimingOnlyCountsAsAValueRun(BlockGraph(31), 2, Bf16Small());
  TimingOnlyCountsAsAValueRun(nn::MakeResidualCnn(4), 4, config::LoadConfig("tpu-v3"), 2);
  config::TpuConfig small = Bf16Small();
  const nn::Model m = BlockMapGraph(36, false);
  small.ub_depth_rows =
      static_cast<int>(train::CompileGraphStep(m, 8, Optimizer(), small).programs.ub_rows) - 1;
  TimingOnlyCountsAsAValueRun(m, 8, small);
}

// What the step does not take, each refused naming the layer.
TEST(GraphStepCompileTest, RefusesWhatItDoesNotTake) {
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  const Optimizer adam;
  const nn::Model res = nn::MakeResidualCnn(3);
  EXPECT_THROW(train::CompileGraphStep(res, 2, adam, config::LoadConfig("tpu-v1")), UsageError);
  auto refused = [&](const nn::Model& m, const std::string& layer) {
    try {
      train::CompileGraphStep(m, 2, adam, v2);
      ADD_FAILURE() << m.name << ": layer " << layer << " was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("layer '" + layer + "'"), std::string::npos) << e.what();
    }
  };
  nn::Model wide = BranchyGraph(5);  // a map of more channels than the array's 128 lanes
  wide.layers[0].out.c = 130;
  nn::InferShapes(&wide);
  refused(wide, "l0");
  nn::Model strided = AvgPoolGraph(3);  // an average pooling of stride 3
  strided.layers[4].pool_stride = 3;
  nn::InferShapes(&strided);
  refused(strided, "l4");
  nn::Model pooled;  // a max pooling reads the images
  pooled.input = {8, 8, 1};
  pooled.layers = {MaxPool(2, 2, 0), MakeLayer(LayerType::kFlatten),
                   MakeLayer(LayerType::kDense, 5, 1, 1, "valid", nn::Activation::kSoftmax)};
  refused(Randomize(pooled, 3), "l0");
  config::TpuConfig tiny = v2;  // not even one image a pass
  tiny.ub_depth_rows = 4096;
  EXPECT_THROW(train::CompileGraphStep(res, 1, adam, tiny), UsageError);
  // The state and the maps in HBM beyond its bytes.
  config::TpuConfig little = v2;
  little.weight_mem_bytes = 1 << 20;
  try {
    train::CompileGraphStep(WideDenseGraph(41, 512), 2, adam, little, 1,
                            train::StateAt::kHbmWithMaps);
    ADD_FAILURE() << "1 MiB of HBM took the state";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("keeps its state and gradients and every layer's maps "
                                         "in HBM"),
              std::string::npos)
        << e.what();
  }
  // Batch normalization over a share in passes (ghost batch normalization), or over one
  // value a channel (the 1-D one of l8 at one image a core).
  const nn::Model bn = BatchNormGraph(3);
  config::TpuConfig small = v2;
  small.ub_depth_rows = static_cast<int>(
      train::CompileGraphStep(bn, 2, adam, v2, 1, train::StateAt::kHbmWithMaps).programs.ub_rows);
  EXPECT_EQ(train::CompileGraphStep(bn, 2, adam, small).programs.passes, 1);
  auto refused_bn = [&](int batch, const config::TpuConfig& c, const std::string& what) {
    try {
      train::CompileGraphStep(bn, batch, adam, c);
      ADD_FAILURE() << "batch " << batch << " was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused_bn(4, small,
             "batch_norm 'l1' of model 'batchnorm' normalizes over a core's whole share of the "
             "batch, but the unified buffer holds 2 of its 4 images at once even with the state "
             "and the maps in HBM: a smaller --batch (at most 2 a core)");
  refused_bn(1, v2, "batch_norm 'l8' of model 'batchnorm' normalizes each channel");
}

// Channel blocks: what they do not take, on a 16-lane chip, each refused naming the layer
// and why.
TEST(GraphStepCompileTest, RefusesWhatChannelBlocksDoNotTake) {
  const Optimizer adam;
  auto refused = [&](const nn::Model& m, const std::string& what) {
    try {
      train::CompileGraphStep(m, 2, adam, Bf16Small());
      ADD_FAILURE() << m.name << " was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const nn::Layer conv32 = MakeLayer(LayerType::kConv2d, 32, 3, 1, "same");
  nn::Layer dw = conv32, cat = MakeLayer(LayerType::kConcat);
  dw.depthwise = true;
  cat.inputs = {0, 0};
  const nn::Layer flat = MakeLayer(LayerType::kFlatten);
  refused(Chain("odd", {6, 6, 1}, {MakeLayer(LayerType::kConv2d, 24, 3, 1, "same"), flat}, 3),
          "layer 'l0' (conv2d) of model 'odd' on config 'small-16': a map of more than N = 16 "
          "channels goes in blocks of N, and 24 channels are not a multiple of N");
  refused(Chain("dw", {6, 6, 1}, {conv32, dw, flat}, 3),
          "layer 'l1' (depthwise_conv2d) of model 'dw' on config 'small-16': a concatenation or a "
          "depthwise convolution of maps of at most N = 16 channels");
  refused(Chain("cat", {6, 6, 1}, {MakeLayer(LayerType::kConv2d, 16, 3, 1, "same"), cat, flat}, 3),
          "layer 'l1' (concat)");
  nn::Model images = Chain("images", {6, 6, 32}, {conv32, flat}, 3);
  refused(images,
          "layer 'l0' (conv2d) of model 'images' on config 'small-16': images of at "
          "most N = 16 channels");
  refused(Chain("wide", {16, 16, 1}, {conv32, flat}, 3),
          "the 16 x 16 x 32 map it reads is more than 15 x 15 pixels and more than N = 16 "
          "channels");
}

// A batch beyond the unified buffer runs in passes: each core's share in as few passes of
// equal parts as fit, their gradients summed as they come; bit for bit the reference of as
// many passes, on one core and two. The buffer holds batch 2 and 512 rows more: room for
// the passes' own rows (a pass's gradients, the batch's images and results), not for a
// third image's maps (a whole chunk of N rows more for each of them), so batch 4 runs in 2
// passes of 2 and batch 3 in 3 passes of 1.
TEST(GraphStepTest, ABatchBeyondTheBufferRunsInPassesEqualToTheReference) {
  const Optimizer adam;
  const auto buffer = train::StateAt::kBuffer;  // the state's rows stay (none in HBM)
  for (const char* name : {"tpu-v2", "tpu-v3"}) {
    config::TpuConfig c = config::LoadConfig(name);
    const nn::Model m = MaxPoolGraph(8);
    c.ub_depth_rows =
        static_cast<int>(train::CompileGraphStep(m, 2, adam, c, 1, buffer).programs.ub_rows) + 512;
    EXPECT_EQ(train::CompileGraphStep(m, 2, adam, c, 1, buffer).programs.passes, 1);
    EXPECT_EQ(train::CompileGraphStep(m, 4, adam, c, 1, buffer).programs.passes, 2);
    EXPECT_EQ(train::CompileGraphStep(m, 3, adam, c, 1, buffer).programs.passes, 3);
    const auto chip = TestEngine(engine::EngineKind::kFast, c);
    StepsEqualReference(chip.get(), m, 4, Optimizer::Kind::kAdam, 2, 1, buffer);
    StepsEqualReference(chip.get(), m, 3, Optimizer::Kind::kSgd, 2, 1, buffer);
    if (c.cores < 2) continue;
    EXPECT_GT(train::CompileGraphStep(m, 8, adam, c, 2, buffer).programs.passes, 1);  // and a sum
    StepsEqualReference(chip.get(), m, 8, Optimizer::Kind::kAdam, 2, 2, buffer);
  }
}

}  // namespace
}  // namespace tpu::test
