// `tpusim compare`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddCompareCommand(CLI::App& app);

}  // namespace tpu::cli
