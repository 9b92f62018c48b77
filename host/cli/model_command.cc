// `tpusim model`: the per-layer table of a model, and its batch normalizations folded for
// inference (see nn_commands.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/nn/model.h"

namespace tpu::cli {
namespace {

struct ModelArgs {
  std::string dir = TPUSIM_SOURCE_DIR "/models/lenet5";
  std::string fold_out;
  bool summary = false;
};

void Run(const ModelArgs& a) {
  if (a.fold_out.empty()) {
    std::cout << nn::Summary(nn::LoadModel(a.dir));
    return;
  }
  CheckOutputFolder(a.fold_out, nn::kModelFolder);  // before the work, not after it
  nn::Model m = nn::LoadModel(a.dir);
  const int folded = nn::FoldBatchNorms(&m);
  nn::SaveModel(m, a.fold_out);
  std::cout << nn::Summary(m);
  std::cout << fmt::format("wrote {}: {} batch normalization{} folded from {}\n", a.fold_out,
                           folded, folded == 1 ? "" : "s", a.dir);
}

}  // namespace

void AddModelCommand(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  CLI::App* cmd = app.add_subcommand("model", "Describe a model: layers, shapes, parameters.");
  cmd->footer(R"(
With --fold-batchnorm OUT, writes the model with each batch_norm layer (a model trained with
batch normalization: tpusim import --keep-batchnorm, then tpusim train) folded into the
convolution or dense layer before it over its running statistics, as inference runs it:
the model that quantize and the chips run. A batch_norm reading anything else is refused,
naming it, and nothing is written.

Examples:
  tpusim model --summary --model models/lenet5
  tpusim model --model trained-bn --fold-batchnorm trained-folded)");
  cmd->add_option("--model", a->dir, "model folder (model.json + .npy tensors)")
      ->capture_default_str();
  cmd->add_flag("--summary", a->summary, "print the per-layer table (the default action)");
  cmd->add_option("--fold-batchnorm", a->fold_out,
                  "model folder to write with the batch normalizations folded");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
