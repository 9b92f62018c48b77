// `tpusim cosim`: the two engines held equal on random programs.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddCosimCommand(CLI::App& app);

}  // namespace tpu::cli
