// The rows of a transformer's chip programs (transformer_run.cc): each operation's name by
// its part of a block, and its attainable bound from its own instructions. Shared by
// `tpusim run` (RunTransformerOnTpu) and decoding on the chip (generate_run.h).
#pragma once

#include <string>
#include <vector>

#include "host/compiler/layer_compiler.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"
#include "host/run/tpu_runner.h"

namespace tpu::run {

// Each operation's attainable bound (report/program_bound.h) from its own instructions (an
// instruction of none, as the group's input, counts in the next operation's), in the
// terms of a row's bound: the matrix unit, the weights' path, the host's, the activation
// unit and the vector unit. `ops`: the operations of job.op_of.
std::vector<compiler::Bound> OperationBounds(const compiler::LayerJob& job, size_t ops,
                                             const config::TpuConfig& config);

// What layer i is in a transformer block, for its row's name ("" where nothing more than
// its type): the QKV projection, attention scores, context, output projection, the
// feed-forward, ... (docs/transformers.md, "On the chip"). `readers`: m.Consumers().
std::string TransformerRole(const nn::Model& m, const std::vector<std::vector<int>>& readers,
                            int i);

// A row for each operation `ops` (TransformerProgram::Operations()), named "layer (role)".
std::vector<LayerStats> OperationRows(const nn::Model& model, const std::vector<int>& ops);

}  // namespace tpu::run
