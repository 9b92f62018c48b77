// A perceptron's training steps on the chip (host/train/dense_step.h) against the CPU
// reference of the same arithmetic (host/train/dense_reference.h): after every step the
// losses, the logits and every weight and optimizer value equal the reference's bit for bit,
// on both engines, with every counter of the two engines equal. The shapes cover what the
// layout must get right: K tiles past the weight FIFO's depth, several output blocks, a
// bias lane that opens a block of its own, N classes, a batch below N (zero rows under a
// transposed load), equal to it, and above it (the weight gradients' sums in chunks of N
// images added in the accumulators; a last chunk part zeros).
#include "host/train/dense_step.h"

#include <gtest/gtest.h>

#include <random>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/train/dense_reference.h"
#include "tests/test_engines.h"

namespace tpu::test {
namespace {

using train::Batch;
using train::DenseNet;
using train::DenseState;
using train::Optimizer;

struct Case {
  const char* name;
  std::vector<int> widths;
  int batch;
  Optimizer::Kind kind;
  double lr;
};

// teach-4 as a bf16 chip (its RTL is in every build).
config::TpuConfig Bf16Chip() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.dtype = hw::Dtype::kBf16;
  return c;
}

float Bf16Value(float x) {
  return arith::FloatOfBits(arith::Fp32OfBf16(arith::Bf16OfFp32(arith::BitsOfFloat(x))));
}

DenseState InitialState(const DenseNet& net, const Optimizer& opt, std::mt19937_64& rng) {
  std::vector<std::vector<float>> w;
  for (int l = 0; l < net.Layers(); ++l) {
    std::normal_distribution<float> d(0.0f, 1.0f / std::sqrt(static_cast<float>(net.In(l))));
    std::vector<float> t(static_cast<size_t>(net.Params(l)));
    for (float& v : t) v = d(rng);
    w.push_back(t);
  }
  return DenseState::Fresh(w, opt);
}

Batch RandomBatch(const DenseNet& net, int batch, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Batch b;
  for (int i = 0; i < batch * net.In(0); ++i) b.x.push_back(Bf16Value(u(rng)));
  for (int i = 0; i < batch; ++i)
    b.labels.push_back(static_cast<uint8_t>(rng() % static_cast<uint64_t>(net.Classes())));
  return b;
}

class DenseStepTest : public ::testing::TestWithParam<engine::EngineKind> {};

// Three steps of `c` on the engine: each step's results and the state after it equal the
// reference's (one chip for every case: one RTL chip a process); returns the engine's last step's
// result for the caller's counters. With `timeline`, step 2 is recorded in it.
engine::ExecResult StepsEqualReference(engine::ChipEngine* chip, const Case& c, int steps,
                                       engine::Timeline* timeline = nullptr, int cores = 1) {
  const DenseNet net{c.widths};
  Optimizer opt;
  opt.kind = c.kind;
  opt.lr = c.lr;
  const config::TpuConfig& config = chip->Config();
  std::mt19937_64 rng(74);
  DenseState ref = InitialState(net, opt, rng);
  train::ChipTrainer trainer(chip, train::CompileDenseStep(net, c.batch, opt, config, cores), opt);
  trainer.Start(ref);
  if (timeline) trainer.TraceStep(2, timeline, trainer.Programs().pass_names);
  // Two batches in turn, each step's next one given but the last's (the infeed's two buffers
  // both used); every other step the same batch, on which the loss falls.
  const Batch batches[2] = {RandomBatch(net, c.batch, rng), RandomBatch(net, c.batch, rng)};
  std::vector<float> losses;
  for (int t = 1; t <= steps; ++t) {
    const Batch& b = batches[(t - 1) % 2];
    std::vector<std::vector<float>> grads;
    const train::StepOut want =
        train::ReferenceStep(net, config.array_dim, opt, b, c.batch, &ref, &grads, cores);
    const train::StepOut got = trainer.Step(b, t < steps ? &batches[t % 2] : nullptr);
    EXPECT_EQ(trainer.Gradients(), grads) << c.name << ": the gradients of step " << t;
    EXPECT_TRUE(got == want) << c.name << " step " << t << ": loss " << got.mean << " against "
                             << want.mean;
    EXPECT_TRUE(trainer.State() == ref) << c.name << ": the state after step " << t;
    losses.push_back(want.mean);
  }
  EXPECT_LT(losses[2], losses[0]) << c.name << ": the loss on one batch falls";
  return trainer.LastStep();
}

const Case kCases[] = {
    {"sgd-6x3x3", {6, 3, 3}, 3, Optimizer::Kind::kSgd, 0.0625},
    {"adam-blocks-of-bias", {4, 4, 4}, 4, Optimizer::Kind::kAdam, 0.01},
    {"adam-deep", {17, 6, 5, 3}, 3, Optimizer::Kind::kAdam, 0.01},
    {"sgd-batch-of-3-chunks", {6, 5, 3}, 11, Optimizer::Kind::kSgd, 0.0625},
    {"adam-batch-of-2-chunks", {13, 4, 4}, 8, Optimizer::Kind::kAdam, 0.01},
};

TEST_P(DenseStepTest, EveryStepEqualsTheReference) {
  // Accumulators for the 3-chunk case's 12 rows and no more: each product must keep to its
  // region (a weight gradient's group of blocks, N rows each, to the C N rows its chunks
  // share: the 2-chunk case's first layer has 4 blocks), or it runs past them. (The RTL
  // model's accumulators are built with teach-4's depth.)
  config::TpuConfig c = Bf16Chip();
  if (GetParam() == engine::EngineKind::kFast) c.acc_depth_rows = 12;
  const auto chip = TestEngine(GetParam(), c);
  for (const Case& c : kCases) StepsEqualReference(chip.get(), c, 4);
}

// A step split across tpu-v3's two cores (each half of the batch, the weight gradients
// summed through HBM, layer by layer) equals the reference of two cores, which is not one
// core's (each core's gradient is rounded to bfloat16 before the sum). tpu-v3's RTL runs it
// in the slow suite (DenseStepSlowTest): about 40 s a step of these.
TEST(DenseStepCoresTest, TwoCoresEqualTheReferenceOfTwoCores) {
  const config::TpuConfig c = config::LoadConfig("tpu-v3");
  const auto chip = TestEngine(engine::EngineKind::kFast, c);
  const engine::ExecResult last = StepsEqualReference(chip.get(), kCases[1], 3, nullptr, 2);
  EXPECT_GT(last.CountersOf(1).macs, 0u) << "core 1 runs its share";
  StepsEqualReference(chip.get(), kCases[4], 3, nullptr, 2);
  const Case& k = kCases[4];
  const DenseNet net{k.widths};
  std::mt19937_64 rng(75);
  const DenseState s = InitialState(net, Optimizer(), rng);
  const Batch b = RandomBatch(net, k.batch, rng);
  DenseState one = s, two = s;
  std::vector<std::vector<float>> g1, g2;
  train::ReferenceStep(net, c.array_dim, Optimizer(), b, k.batch, &one, &g1, 1);
  train::ReferenceStep(net, c.array_dim, Optimizer(), b, k.batch, &two, &g2, 2);
  EXPECT_NE(g1, g2);
}

// The two engines run the same step with every counter equal, and the same timeline of a
// step (tpusim train --timeline): every instruction's slices, and its passes'.
TEST(DenseStepRtlTest, TheEnginesAgreeOnEveryCounter) {
  const config::TpuConfig c = Bf16Chip();
  engine::Timeline fast_steps(c.clock_mhz, c.mxus_per_core, true),
      rtl_steps(c.clock_mhz, c.mxus_per_core, true);
  const auto fast_chip = TestEngine(engine::EngineKind::kFast, c);
  const auto rtl_chip = TestEngine(engine::EngineKind::kRtl, c);
  const engine::ExecResult fast = StepsEqualReference(fast_chip.get(), kCases[2], 3, &fast_steps);
  const engine::ExecResult rtl = StepsEqualReference(rtl_chip.get(), kCases[2], 3, &rtl_steps);
  EXPECT_EQ(fast.cycles, rtl.cycles);
  EXPECT_TRUE(fast.counters == rtl.counters);
  // A batch of 3 chunks of N: the weight gradients' sums over the chunks.
  const engine::ExecResult fast3 = StepsEqualReference(fast_chip.get(), kCases[3], 3);
  const engine::ExecResult rtl3 = StepsEqualReference(rtl_chip.get(), kCases[3], 3);
  EXPECT_EQ(fast3.cycles, rtl3.cycles);
  EXPECT_TRUE(fast3.counters == rtl3.counters);
  EXPECT_GT(fast_steps.Events().size(), 100u);
  EXPECT_EQ(fast_steps.Events(), rtl_steps.Events());
  int passes = 0;  // step 2's passes, each at least one slice of the passes track
  for (const auto& e : fast_steps.Events())
    passes += e.value("name", "") == "layer 1 weight gradient";
  EXPECT_GE(passes, 1);
}

TEST(DenseStepCompileTest, RefusesWhatDoesNotFit) {
  const config::TpuConfig bf16 = Bf16Chip();
  const Optimizer adam;
  EXPECT_THROW(train::CompileDense({{8, 5}}, 4, adam, bf16), UsageError);  // 5 classes > N
  EXPECT_THROW(train::CompileDense({{8, 4}}, 0, adam, bf16), UsageError);  // no image
  config::TpuConfig shallow = bf16;  // a batch's product needs its rows of accumulators
  shallow.acc_depth_rows = 8;
  EXPECT_NO_THROW(train::CompileDense({{8, 4}}, 8, adam, shallow));
  EXPECT_THROW(train::CompileDense({{8, 4}}, 9, adam, shallow), UsageError);
  EXPECT_THROW(train::CompileDense({{8}}, 4, adam, bf16), UsageError);  // no layer
  EXPECT_THROW(train::CompileDense({{8, 4}}, 4, adam, config::LoadConfig("teach-4")),
               UsageError);                                                   // an int8 chip
  EXPECT_THROW(train::CompileDense({{8, 4}}, 4, adam, bf16, 2), UsageError);  // one core
  const config::TpuConfig v3 = config::LoadConfig("tpu-v3");
  EXPECT_THROW(train::CompileDense({{8, 4}}, 5, adam, v3, 2), UsageError);  // halves
  EXPECT_NO_THROW(train::CompileDense({{8, 4}}, 4, adam, v3, 2));
  config::TpuConfig small = bf16;
  small.ub_depth_rows = 16;
  EXPECT_THROW(train::CompileDense({{8, 4}}, 4, adam, small), UsageError);
  // A buffer that holds the step at batch 4 and no more: the refusal of batch 9 says so.
  small.ub_depth_rows = static_cast<int>(train::CompileDense({{8, 4}}, 4, adam, bf16).ub_rows);
  try {
    train::CompileDense({{8, 4}}, 9, adam, small);
    ADD_FAILURE() << "batch 9 fits a buffer made for batch 4";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a --batch of at most 4,"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, DenseStepTest, ::testing::ValuesIn(TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

}  // namespace
}  // namespace tpu::test
