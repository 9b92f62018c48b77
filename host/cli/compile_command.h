// `tpusim compile`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddCompileCommand(CLI::App& app);

}  // namespace tpu::cli
