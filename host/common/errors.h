// Typed errors of the host tools. The CLI prints the message as one line on stderr and
// exits 2 for a UsageError (the command line or an input is wrong) or 1 for a
// RuntimeError (something failed while running).
//
// Libraries speak of their inputs' fields, never of command-line flags: a message names a
// field with Field("batch"). what() shows the field by its name ("batch"); the CLI shows it
// as its flag ("--batch"), from one table (host/cli/flags.cc), through Error::marked().
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tpu {

// A field named in an error message (the name between two unit separators).
std::string Field(std::string_view name);
// The message with each field shown as show(name) says.
std::string ShowFields(std::string_view marked,
                       const std::function<std::string(std::string_view)>& show);
// The message with each field shown by its name (what Error::what() says).
std::string PlainText(std::string_view marked);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& marked);
  // The message with its fields marked, for ShowFields.
  const std::string& marked() const { return marked_; }

 private:
  std::string marked_;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace tpu
