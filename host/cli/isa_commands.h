// `tpusim asm` and `tpusim disasm`.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddIsaCommands(CLI::App& app);

}  // namespace tpu::cli
