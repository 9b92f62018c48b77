// What the compiled training steps' tests share (conv_step_test.cc, graph_step_test.cc):
// random batches, and steps on a chip checked one by one against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/nn/model.h"
#include "host/train/dense_model.h"
#include "host/train/dense_step.h"
#include "host/train/graph_reference.h"

namespace tpu::test {

// `batch` images of m's input (a quarter of the values 0, the rest k / 255) and labels
// below its classes.
inline train::Batch RandomBatch(const nn::Model& m, int batch, std::mt19937_64& rng) {
  train::Batch b;
  for (int64_t i = 0; i < batch * m.input.Size(); ++i)
    b.x.push_back(rng() % 4 == 0 ? 0.0f : static_cast<float>(rng() % 256) / 255.0f);
  for (int i = 0; i < batch; ++i)
    b.labels.push_back(static_cast<uint8_t>(rng() % m.layers.back().out.c));
  return b;
}

// A step's compiler (CompileConvStep, CompileGraphStep).
using CompileStepFn = std::function<train::CompiledStep(
    const nn::Model&, int batch, const train::Optimizer&, const config::TpuConfig&, int cores)>;

// `steps` steps of `m` at `batch` on the chip (split across `cores` cores), compiled by
// `compile`, on batches drawn from `seed`, each against the reference (ReferenceGraphStep):
// the losses, the logits, the gradients and the state after every step equal, bit for bit.
// The chip's last step's result.
inline engine::ExecResult StepsEqualReference(const CompileStepFn& compile, uint64_t seed,
                                              engine::ChipEngine* chip, const nn::Model& m,
                                              int batch, train::Optimizer::Kind kind, int steps,
                                              int cores = 1) {
  train::Optimizer opt;
  opt.kind = kind;
  opt.lr = kind == train::Optimizer::Kind::kSgd ? 0.0625 : 0.001;
  std::mt19937_64 rng(seed + static_cast<uint64_t>(batch));
  train::DenseState ref = train::FreshState(m, opt);
  train::ChipTrainer trainer(chip, compile(m, batch, opt, chip->Config(), cores), opt);
  trainer.Start(ref);
  const train::Batch batches[2] = {RandomBatch(m, batch, rng), RandomBatch(m, batch, rng)};
  const std::string what = m.name + " batch " + std::to_string(batch) + " " + opt.Name() + " on " +
                           std::to_string(cores) + " core(s) in " +
                           std::to_string(trainer.Passes()) + " pass(es)";
  for (int t = 1; t <= steps; ++t) {
    const train::Batch& b = batches[(t - 1) % 2];
    std::vector<std::vector<float>> grads;
    const train::StepOut want = train::ReferenceGraphStep(
        m, chip->Config().array_dim, opt, b, batch, &ref, &grads, cores, trainer.Passes());
    const train::StepOut got = trainer.Step(b, t < steps ? &batches[t % 2] : nullptr);
    EXPECT_EQ(trainer.Gradients(), grads) << what << ": the gradients of step " << t;
    EXPECT_EQ(got.loss, want.loss) << what << " step " << t;
    EXPECT_TRUE(got == want) << what << " step " << t << ": loss " << got.mean << " against "
                             << want.mean;
    EXPECT_TRUE(trainer.State() == ref) << what << ": the state after step " << t;
  }
  return trainer.LastStep();
}

// On a unified buffer that holds `m`'s step at batch 2 and no more, batch 2 compiles and
// batch 5 is refused, the refusal naming batch 2 as the largest.
inline void ExpectTheLargestBatchNamed(const CompileStepFn& compile, const nn::Model& m,
                                       const config::TpuConfig& config) {
  const train::Optimizer adam;
  config::TpuConfig small = config;
  small.ub_depth_rows = static_cast<int>(compile(m, 2, adam, config, 1).programs.ub_rows);
  EXPECT_NO_THROW(compile(m, 2, adam, small, 1));
  try {
    compile(m, 5, adam, small, 1);
    ADD_FAILURE() << "batch 5 fits a buffer made for batch 2";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a --batch of at most 2,"), std::string::npos) << e.what();
  }
}

}  // namespace tpu::test
