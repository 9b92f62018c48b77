// `tpusim run`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddRunCommand(CLI::App& app);

}  // namespace tpu::cli
