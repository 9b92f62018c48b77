// A test fixture that runs build/tpusim as a user would, in a scratch folder, and checks
// the error contract: exit code, one line on stderr naming the problem.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tpu::test {

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tpusim_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A path in the scratch folder.
  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Runs `tpusim ARGS` with no standard input.
  Outcome Run(const std::string& args) const {
    const std::string cmd = std::string(TPUSIM_BINARY) + " " + args + " >" + P("stdout") + " 2>" +
                            P("stderr") + " </dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(P("stdout")), Slurp(P("stderr"))};
  }

  // A bad invocation ends with `code` and exactly one stderr line containing `fragment`.
  Outcome ExpectError(const std::string& args, int code, const std::string& fragment) const {
    SCOPED_TRACE(args);
    const Outcome o = Run(args);
    EXPECT_EQ(o.exit_code, code) << o.err;
    EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(o.err.rfind("tpusim: error: ", 0), 0u) << o.err;
    return o;
  }

  std::filesystem::path dir_;
};

}  // namespace tpu::test
