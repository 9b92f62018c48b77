// Checkpoints of a training (`tpusim train`, on the chip or the CPU), so that a run that was
// interrupted (Ctrl-C, a kill, a Slurm preemption) goes on, when started again with the same
// command, from its last checkpoint and ends with the same weights, bit for bit, as a run
// that was never interrupted: the state (weights, optimizer state, step count), where the
// run is (the epoch and its steps done, with the epoch's sums so far) and the report so far.
// A checkpoint is an output folder (host/common/output_folder.h): written whole beside its
// place and renamed into it, never half-written.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "host/common/output_folder.h"
#include "host/train/dense_model.h"

namespace tpu::train {

inline const OutputKind kCheckpointFolder{"training checkpoint", "checkpoint.json"};

struct Checkpoint {
  nlohmann::json run;     // the settings that make a run this one (the command's flags)
  int epoch = 1;          // the epoch in progress, from 1
  ChipEpochResult done;   // of that epoch so far (steps done, their sums)
  DenseState state;       // after those steps
  nlohmann::json report;  // the report of the epochs before
};

void WriteCheckpoint(const std::string& dir, const Checkpoint& c);
// The checkpoint in `dir`, or nothing where there is none. Throws UsageError where it is of
// another run (its settings are not `run`: the message names the first that differs and
// what to do) or does not hold the state of layers of `params` values each and `opt`, and
// kept tensors (DenseState::kept) of `kept` values each.
std::optional<Checkpoint> ReadCheckpoint(const std::string& dir, const nlohmann::json& run,
                                         const std::vector<int64_t>& params, const Optimizer& opt,
                                         const std::vector<int64_t>& kept = {});

}  // namespace tpu::train
