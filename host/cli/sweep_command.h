// `tpusim sweep` and `tpusim plot`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddSweepCommand(CLI::App& app);

}  // namespace tpu::cli
