// The one way tpusim starts a child process (compare's and cosim's rtl runs, sweep points,
// Slurm's commands): an argument vector, never a shell string (a path with a quote or a
// space stays one argument), stdin from /dev/null, and registered with the interrupt
// handler for as long as it runs, so that Ctrl-C stops the child too (host/common/interrupt.h).
#pragma once

#include <string>
#include <vector>

namespace tpu {

struct ChildOptions {
  enum class Output {
    kInherit,  // the child writes to this process's stdout and stderr
    kFile,     // stdout and stderr into `log` (created or truncated)
    kCapture,  // stdout and stderr into ChildResult::output
  };
  Output output = Output::kInherit;
  std::string log;
};

struct ChildResult {
  int status = -1;     // the exit status; 128 + the signal when killed; -1: it did not start
  std::string output;  // stdout and stderr (kCapture)
  bool Ok() const { return status == 0; }
};

// Runs `argv` (argv[0] a path, or a name looked up on PATH) to its end.
ChildResult RunChild(const std::vector<std::string>& argv, const ChildOptions& options = {});

// Where `name` is on PATH ("" when it is not there, or not executable).
std::string FindOnPath(const std::string& name);

// `s` as one word of a shell script, in single quotes (Slurm's batch scripts).
std::string ShellQuote(const std::string& s);

// The command line for people ("tpusim run --model 'my model'"), in messages only.
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace tpu
