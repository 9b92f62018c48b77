// The neural-network commands: `tpusim model`, `tpusim train`, `tpusim quantize`,
// `tpusim infer`, `tpusim generate`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddModelCommand(CLI::App& app);
void AddTrainCommand(CLI::App& app);
void AddQuantizeCommand(CLI::App& app);
void AddInferCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddImportCommand(CLI::App& app);

}  // namespace tpu::cli
