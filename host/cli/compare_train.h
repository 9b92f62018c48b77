// `tpusim compare --train`: the course material's experiment, one network trained with the
// same hyperparameters on the CPU (fp32, measured), on the CPU reference of the chip's
// arithmetic (bf16, measured) and on the simulated chip at each preset (simulated time at
// its clock, energy from the energy model), one table of time per epoch, images/s, loss,
// test accuracy and energy per epoch (docs/training.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tpu::cli {

struct CompareTrainArgs {
  std::vector<std::string> configs;
  std::string data, dataset = "mnist", optimizer = "adam", markdown, json, energy;
  std::string arch = "mlp";  // the network (nn::MakeArch)
  int epochs = 1, batch = 64, threads = 2;
  int64_t limit = 0;
  uint64_t seed = 1;
  bool quiet = false;
};

void CompareTrain(const CompareTrainArgs& a);

// CPU package energy from Linux RAPL, in joules, when the kernel exposes it to this user
// (both compare commands' measured energy); and the joules since `before` (nothing where
// either reading is missing or the counter wrapped).
std::optional<double> RaplJoules();
std::optional<double> RaplJoulesSince(std::optional<double> before);

}  // namespace tpu::cli
