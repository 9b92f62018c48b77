// The MNIST perceptron's training steps (tpusim train --config tpu-v2 --arch mlp: 1024
// inputs, 256 ReLU units, 10 classes, Adam, batch 64) and LeNet's (--arch lenet5, batch 8)
// on tpu-v2's RTL and on the fast engine: both bit for bit the CPU reference after every
// step, every counter of the two equal; and steps split across tpu-v3's two cores. The slow
// suite's: tpu-v2's RTL takes about 20 s a step of the perceptron.
#include <gtest/gtest.h>

#include <random>

#include "host/config/tpu_config.h"
#include "host/engine/engine_factory.h"
#include "host/nn/model.h"
#include "host/train/conv_step.h"
#include "host/train/convnet_reference.h"
#include "host/train/dense_model.h"
#include "host/train/graph_reference.h"

namespace tpu::test {
namespace {

TEST(DenseStepSlowTest, MnistPerceptronOnTpuV2BothEnginesEqualTheReference) {
  const config::TpuConfig config = config::LoadConfig("tpu-v2");
  const nn::Model model = nn::MakeMlp(1);
  const train::DenseNet net = train::DenseNetOf(model);
  const train::Optimizer adam;
  std::mt19937_64 rng(74);
  train::Batch b;
  for (int i = 0; i < 64 * net.In(0); ++i) b.x.push_back(static_cast<float>(rng() % 256) / 256.0f);
  for (int i = 0; i < 64; ++i) b.labels.push_back(static_cast<uint8_t>(rng() % 10));
  std::vector<engine::ExecResult> last;
  for (const engine::EngineKind kind : {engine::EngineKind::kRtl, engine::EngineKind::kFast}) {
    const auto chip = engine::MakeChipEngine(kind, config, {});
    train::DenseState ref = train::DenseState::Fresh(train::DenseWeightsOf(model), adam);
    train::ChipTrainer trainer(chip.get(), net, 64, adam);
    trainer.Start(ref);
    for (int t = 1; t <= 2; ++t) {
      const train::StepOut want = train::ReferenceStep(net, config.array_dim, adam, b, 64, &ref);
      EXPECT_TRUE(trainer.Step(b) == want) << chip->Name() << " step " << t;
      EXPECT_TRUE(trainer.State() == ref) << chip->Name() << " state after step " << t;
    }
    last.push_back(trainer.LastStep());
  }
  EXPECT_EQ(last[0].cycles, last[1].cycles);
  EXPECT_TRUE(last[0].counters == last[1].counters);
}

// LeNet's steps at `batch` on `config`'s RTL and fast engine, split across `cores` cores:
// both equal the reference after every step, every counter of the two equal.
void LenetBothEnginesEqualTheReference(const config::TpuConfig& config, int batch, int cores,
                                       int steps) {
  const nn::Model model = nn::MakeLenet5(1);
  const train::Optimizer adam;
  std::mt19937_64 rng(75);
  train::Batch b;
  for (int i = 0; i < batch * 1024; ++i) b.x.push_back(static_cast<float>(rng() % 256) / 256.0f);
  for (int i = 0; i < batch; ++i) b.labels.push_back(static_cast<uint8_t>(rng() % 10));
  std::vector<engine::ExecResult> last;
  for (const engine::EngineKind kind : {engine::EngineKind::kRtl, engine::EngineKind::kFast}) {
    const auto chip = engine::MakeChipEngine(kind, config, {});
    train::DenseState ref = train::DenseState::Fresh(train::DenseWeightsOf(model), adam);
    train::ChipTrainer trainer(chip.get(),
                               train::CompileConvStep(model, batch, adam, config, cores), adam);
    trainer.Start(ref);
    for (int t = 1; t <= steps; ++t) {
      const train::StepOut want =
          train::ReferenceGraphStep(model, config.array_dim, adam, b, batch, &ref, nullptr, cores);
      EXPECT_TRUE(trainer.Step(b) == want) << chip->Name() << " step " << t;
      EXPECT_TRUE(trainer.State() == ref) << chip->Name() << " state after step " << t;
    }
    last.push_back(trainer.LastStep());
  }
  EXPECT_EQ(last[0].cycles, last[1].cycles);
  EXPECT_TRUE(last[0].counters == last[1].counters);
}

TEST(DenseStepSlowTest, LenetOnTpuV2BothEnginesEqualTheReference) {
  LenetBothEnginesEqualTheReference(config::LoadConfig("tpu-v2"), 8, 1, 2);
}

// The step split across tpu-v3's two cores, the gradients summed through HBM.
TEST(DenseStepSlowTest, LenetOnTpuV3TwoCoresBothEnginesEqualTheReference) {
  LenetBothEnginesEqualTheReference(config::LoadConfig("tpu-v3"), 4, 2, 2);
}

// The perceptron's step on two cores (its gradients summed layer by layer), a small one.
TEST(DenseStepSlowTest, SmallPerceptronOnTpuV3TwoCoresBothEnginesEqualTheReference) {
  const config::TpuConfig config = config::LoadConfig("tpu-v3");
  const train::DenseNet net{{20, 12, 10}};
  const train::Optimizer adam;
  std::mt19937_64 rng(76);
  train::Batch b;
  for (int i = 0; i < 6 * net.In(0); ++i) b.x.push_back(static_cast<float>(rng() % 256) / 256.0f);
  for (int i = 0; i < 6; ++i) b.labels.push_back(static_cast<uint8_t>(rng() % 10));
  std::vector<std::vector<float>> w;
  for (int l = 0; l < net.Layers(); ++l) {
    std::vector<float> t(static_cast<size_t>(net.Params(l)));
    for (float& v : t) v = static_cast<float>(static_cast<int>(rng() % 200) - 100) / 400.0f;
    w.push_back(t);
  }
  std::vector<engine::ExecResult> last;
  for (const engine::EngineKind kind : {engine::EngineKind::kRtl, engine::EngineKind::kFast}) {
    const auto chip = engine::MakeChipEngine(kind, config, {});
    train::DenseState ref = train::DenseState::Fresh(w, adam);
    train::ChipTrainer trainer(chip.get(), train::CompileDenseStep(net, 6, adam, config, 2), adam);
    trainer.Start(ref);
    const train::StepOut want =
        train::ReferenceStep(net, config.array_dim, adam, b, 6, &ref, nullptr, 2);
    EXPECT_TRUE(trainer.Step(b) == want) << chip->Name();
    EXPECT_TRUE(trainer.State() == ref) << chip->Name();
    last.push_back(trainer.LastStep());
  }
  EXPECT_EQ(last[0].cycles, last[1].cycles);
  EXPECT_TRUE(last[0].counters == last[1].counters);
}

}  // namespace
}  // namespace tpu::test
