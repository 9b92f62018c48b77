// `tpusim asm`, `tpusim disasm` and `tpusim exec`: TPU programs.
#pragma once

#include <CLI/CLI.hpp>

namespace tpu::cli {

void AddIsaCommands(CLI::App& app);
void AddExecCommand(CLI::App& app);
void AddLstmCommand(CLI::App& app);

}  // namespace tpu::cli
