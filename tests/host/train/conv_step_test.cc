// The CNN's training steps on the chip (host/train/conv_step.h) against the CPU reference of
// the same arithmetic (host/train/convnet_reference.h's ReferenceGraphStep): after every step
// each image's loss, the mean, the logits, every gradient and every weight and optimizer
// value equal the reference's bit for bit, on both engines, with every counter of the two
// engines equal. The shapes cover what the layout must get right: LeNet (one K-tile a
// receptive field, the dense layers' bias lanes inside a block, an odd map whose pooling
// leaves a row and a column out) and the wide CNN (conv2's receptive field of 145 lanes in
// two K-tiles, a pooling of 32 channels that fills the array's 128 rows), a batch of one
// image and of several (the weight gradients' sums over chunks of N pixels that cross
// images), SGD and Adam, and one chip for them all (rows a program reads as zeros are its
// own, whatever ran before).
#include "host/train/conv_step.h"

#include <gtest/gtest.h>

#include <random>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"
#include "host/train/convnet_reference.h"
#include "host/train/dense_model.h"
#include "host/train/dense_reference.h"
#include "host/train/graph_reference.h"
#include "tests/host/train/step_test_util.h"
#include "tests/test_engines.h"

namespace tpu::test {
namespace {

using train::Batch;
using train::Optimizer;

// `steps` steps of `m` at `batch` of the CNN's step against the reference.
engine::ExecResult StepsEqualReference(engine::ChipEngine* chip, const nn::Model& m, int batch,
                                       Optimizer::Kind kind, int steps, int cores = 1) {
  return test::StepsEqualReference(train::CompileConvStep, 75, chip, m, batch, kind, steps, cores);
}

// On the fast engine (the RTL's run is ConvStepRtlTest's).
TEST(ConvStepTest, EveryStepEqualsTheReference) {
  const auto chip = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v2"));
  StepsEqualReference(chip.get(), nn::MakeLenet5(3), 2, Optimizer::Kind::kAdam, 3);
  StepsEqualReference(chip.get(), nn::MakeLenet5(4), 1, Optimizer::Kind::kSgd, 2);
  StepsEqualReference(chip.get(), nn::MakeWideCnn(5), 3, Optimizer::Kind::kAdam, 2);
}

// A step split across tpu-v3's two cores, each half of the batch, the weight gradients
// summed through HBM: every step equal to the reference's arithmetic of two cores, which
// differs from one core's (each core's gradient is rounded to bfloat16 before the sum).
TEST(ConvStepTest, TwoCoresEqualTheReferenceOfTwoCores) {
  const auto chip = TestEngine(engine::EngineKind::kFast, config::LoadConfig("tpu-v3"));
  StepsEqualReference(chip.get(), nn::MakeLenet5(3), 4, Optimizer::Kind::kAdam, 3, 2);
  StepsEqualReference(chip.get(), nn::MakeWideCnn(5), 2, Optimizer::Kind::kSgd, 2, 2);
  const nn::Model m = nn::MakeLenet5(3);
  std::mt19937_64 rng(76);
  const Batch b = RandomBatch(m, 8, rng);
  const train::ConvNetGradients one = train::CoreGradients(m, b, 8, 128, 1),
                                two = train::CoreGradients(m, b, 8, 128, 2);
  EXPECT_EQ(one.loss, two.loss);  // the forward pass is each image's own
  EXPECT_NE(one.w, two.w);
}

// The RTL equals the reference too, with every counter equal to the fast engine's.
TEST(ConvStepRtlTest, TheEnginesAgreeOnEveryCounter) {
  const config::TpuConfig c = config::LoadConfig("tpu-v2");
  const auto fast = TestEngine(engine::EngineKind::kFast, c);
  const auto rtl = TestEngine(engine::EngineKind::kRtl, c);
  const nn::Model wide = nn::MakeWideCnn(5);
  const engine::ExecResult f = StepsEqualReference(fast.get(), wide, 1, Optimizer::Kind::kSgd, 1);
  const engine::ExecResult r = StepsEqualReference(rtl.get(), wide, 1, Optimizer::Kind::kSgd, 1);
  EXPECT_EQ(f.cycles, r.cycles);
  EXPECT_TRUE(f.counters == r.counters);
}

TEST(ConvStepCompileTest, RefusesWhatDoesNotFit) {
  const config::TpuConfig v2 = config::LoadConfig("tpu-v2");
  const nn::Model lenet = nn::MakeLenet5(3);
  const Optimizer adam;
  EXPECT_THROW(train::CompileConvStep(lenet, 2, adam, config::LoadConfig("tpu-v1")),
               UsageError);  // an int8 chip
  EXPECT_THROW(train::CompileConvStep(nn::MakeMlp(3), 2, adam, v2), UsageError);
  EXPECT_THROW(train::CompileConvStep(lenet, 0, adam, v2), UsageError);
  EXPECT_THROW(train::CompileConvStep(lenet, 2, adam, v2, 2), UsageError);  // one core
  const config::TpuConfig v3 = config::LoadConfig("tpu-v3");
  EXPECT_THROW(train::CompileConvStep(lenet, 3, adam, v3, 2), UsageError);  // halves
  EXPECT_THROW(train::CompileConvStep(lenet, 4, adam, v3, 3), UsageError);  // two cores
  EXPECT_NO_THROW(train::CompileConvStep(lenet, 4, adam, v3, 2));
  config::TpuConfig narrow = config::LoadConfig("small-16");
  narrow.dtype = hw::Dtype::kBf16;  // 16 lanes: a pooling of 6 channels needs 24 rows
  EXPECT_THROW(train::CompileConvStep(lenet, 2, adam, narrow), UsageError);
  ExpectTheLargestBatchNamed(train::CompileConvStep, lenet, v2);
}

// A chain of LeNet's layer kinds that the CNN's step does not compute (a padded convolution,
// one without ReLU, a 3 x 3 average pooling) goes to the graph's step, which computes it:
// before, the CNN's step took it and stopped at a bad window, or trained another network.
TEST(ConvStepCompileTest, OnlyTheCourseMaterialsShapeTakesTheCnnStep) {
  EXPECT_EQ(train::TrainNetOf(nn::MakeLenet5(3)).kind, train::TrainNet::Kind::kCnn);
  std::vector<nn::Model> others(4, nn::MakeLenet5(3));
  others[0].layers[0].padding = "same";
  others[1].layers[2].activation = nn::Activation::kNone;
  others[2].layers[1].pool_h = others[2].layers[1].pool_w = 3;
  others[3].layers[5].activation = nn::Activation::kNone;  // a hidden dense layer
  for (nn::Model& m : others) {
    nn::InferShapes(&m);
    EXPECT_THROW(train::CheckConvNetShape(m), UsageError);
    EXPECT_EQ(train::TrainNetOf(m).kind, train::TrainNet::Kind::kGraph);
  }
}

}  // namespace
}  // namespace tpu::test
