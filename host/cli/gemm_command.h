// `tpusim gemm`: multiply two int8 matrices on the RTL systolic array.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

// Adds the subcommand to app; it runs when parsed.
void AddGemmCommand(CLI::App& app);

}  // namespace tpu::cli
