// tpusim: the command-line entry point. Each subcommand lives in its own file.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "host/cli/gemm_command.h"
#include "host/common/errors.h"
#include "host/common/revision.h"

// libsystemc.so's own main() refers to sc_main. tpusim has its own main() and starts the
// SystemC kernel with sc_start() where it needs it, so the library's main never runs.
extern "C" int sc_main(int, char**) { return 1; }

int main(int argc, char** argv) {
  // The SystemC engine would otherwise print the library's banner on stdout.
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  CLI::App app{"tpusim: a cycle-accurate simulator of a TPU v1-style accelerator"};
  app.set_version_flag("--version", std::string("tpusim 0.1.0 (") + tpu::kGitRevision + ")");
  app.require_subcommand(1);
  app.footer(
      "Run 'tpusim COMMAND --help' for a command's options. Docs: docs/ in the source tree.\n");
  tpu::cli::AddGemmCommand(app);
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
    std::cerr << "tpusim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tpusim: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
