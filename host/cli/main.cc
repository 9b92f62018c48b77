// tpusim: the command-line entry point. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <systemc>

#include "host/cli/compare_command.h"
#include "host/cli/compile_command.h"
#include "host/cli/cosim_command.h"
#include "host/cli/flags.h"
#include "host/cli/gemm_command.h"
#include "host/cli/isa_commands.h"
#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/cli/run_command.h"
#include "host/cli/sweep_command.h"
#include "host/cli/teach_command.h"
#include "host/common/errors.h"
#include "host/common/interrupt.h"
#include "host/common/revision.h"

// The CLI runs inside sc_main, as a SystemC program does: `--engine systemc` elaborates the
// RTL as a SystemC module with an sc_clock and runs the kernel from here.
extern "C" int sc_main(int argc, char** argv) {
  tpu::InstallInterruptHandler();
  CLI::App app{"tpusim: a cycle-accurate simulator of a TPU v1-style accelerator"};
  app.set_version_flag("--version", std::string("tpusim 0.1.0 (") + tpu::kGitRevision + ")");
  app.require_subcommand(1);
  app.footer(
      "Run 'tpusim COMMAND --help' for a command's options. Docs: docs/ in the source tree.\n");
  tpu::cli::AddGemmCommand(app);
  tpu::cli::AddModelCommand(app);
  tpu::cli::AddTrainCommand(app);
  tpu::cli::AddQuantizeCommand(app);
  tpu::cli::AddInferCommand(app);
  tpu::cli::AddGenerateCommand(app);
  tpu::cli::AddImportCommand(app);
  tpu::cli::AddIsaCommands(app);
  tpu::cli::AddExecCommand(app);
  tpu::cli::AddLstmCommand(app);
  tpu::cli::AddTeachCommand(app);
  tpu::cli::AddRunCommand(app);
  tpu::cli::AddMergeCommand(app);
  tpu::cli::AddCompareCommand(app);
  tpu::cli::AddCompileCommand(app);
  tpu::cli::AddCosimCommand(app);
  tpu::cli::AddSweepCommand(app);
  tpu::cli::RefuseNegativeUnsigned(&app);
  tpu::cli::RememberCommandLine(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tpusim: error: " << e.what() << " (see 'tpusim COMMAND --help')\n";
    return 2;
  } catch (const tpu::UsageError& e) {
    std::cerr << "tpusim: error: " << tpu::cli::InFlagTerms(e.marked()) << "\n";
    return 2;
  } catch (const tpu::Error& e) {
    std::cerr << "tpusim: error: " << tpu::cli::InFlagTerms(e.marked()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tpusim: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// What libsystemc's own main() does, without printing the library's banner on stdout.
int main(int argc, char** argv) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
