// `tpusim teach`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddTeachCommand(CLI::App& app);

}  // namespace tpu::cli
