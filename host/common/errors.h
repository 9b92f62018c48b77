// Typed errors of the host tools. The CLI prints the message as one line on stderr and
// exits 2 for a UsageError (the command line or an input is wrong) or 1 for a
// RuntimeError (something failed while running).
#pragma once

#include <stdexcept>
#include <string>

namespace tpu {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpu
