// `tpusim model --summary`: the per-layer table of a model (see nn_commands.h).
#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/nn/model.h"

namespace tpu::cli {

void AddModelCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>(TPUSIM_SOURCE_DIR "/models/lenet5");
  auto summary = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("model", "Describe a model: layers, shapes, parameters.");
  cmd->footer("\nExample:\n  tpusim model --summary --model models/lenet5");
  cmd->add_option("--model", *dir, "model folder (model.json + .npy tensors)")
      ->capture_default_str();
  cmd->add_flag("--summary", *summary, "print the per-layer table (the default action)");
  // The callback owns both values the options write into.
  cmd->callback([dir, summary] { std::cout << nn::Summary(nn::LoadModel(*dir)); });
}

}  // namespace tpu::cli
