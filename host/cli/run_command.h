// `tpusim run` and `tpusim merge`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddRunCommand(CLI::App& app);
void AddMergeCommand(CLI::App& app);

}  // namespace tpu::cli
