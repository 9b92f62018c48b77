// Every GTKWave layout in traces/ opens headlessly (xvfb-run gtkwave with
// traces/check_layout.tcl) against the trace that the tpusim command in its header
// ("[*]   build/tpusim ... --trace NAME") writes, and every signal the layout names exists
// in that trace and is displayed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/host/cli/cli_fixture.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

class GtkwLayoutTest : public test::CliFixture {};

TEST_F(GtkwLayoutTest, EveryLayoutOpensAgainstATraceFromTpusim) {
  if (std::system("command -v xvfb-run >/dev/null && command -v gtkwave >/dev/null") != 0) {
    GTEST_SKIP() << "xvfb-run or gtkwave missing (scripts/install-deps installs both)";
  }
  int layouts = 0;
  for (const auto& entry : fs::directory_iterator(TPUSIM_SOURCE_DIR "/traces")) {
    if (entry.path().extension() != ".gtkw") continue;
    ++layouts;
    SCOPED_TRACE(entry.path().filename().string());
    // The command the layout's header tells users to run, run from the source tree.
    std::string args;
    {
      std::ifstream layout(entry.path());
      const std::string prefix = "[*]   build/tpusim ";
      for (std::string line; std::getline(layout, line);) {
        if (line.rfind(prefix, 0) == 0) args = line.substr(prefix.size());
      }
    }
    const size_t at = args.find("--trace ");
    ASSERT_NE(at, std::string::npos) << "the header names no 'build/tpusim ... --trace FILE'";
    const std::string trace = P(args.substr(at + 8));
    args = args.substr(0, at) + "--trace " + trace + " -q";
    const std::string tpusim =
        "cd " TPUSIM_SOURCE_DIR " && " TPUSIM_BINARY " " + args + " 2>" + P("tpusim.err");
    ASSERT_EQ(std::system(tpusim.c_str()), 0) << args << ": " << Slurp(P("tpusim.err"));
    const std::string cmd =
        "timeout 120 xvfb-run -a gtkwave -S " TPUSIM_SOURCE_DIR "/traces/check_layout.tcl " +
        trace + " " + entry.path().string() + " >" + P("gtkwave.out") + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::set<std::string> facilities;
    int traces = -1, shown = 0;
    std::istringstream out(Slurp(P("gtkwave.out")));
    for (std::string line; std::getline(out, line);) {
      if (line.rfind("FAC ", 0) == 0) facilities.insert(line.substr(4));
      if (line.rfind("TRACES ", 0) == 0) traces = std::stoi(line.substr(7));
      if (line.rfind("TRACE ", 0) == 0) ++shown;
    }
    ASSERT_GT(facilities.size(), 100u) << "gtkwave did not load the trace";
    int signals = 0, markers = 0;
    std::ifstream layout(entry.path());
    for (std::string line; std::getline(layout, line);) {
      if (line.empty() || line[0] == '[' || line[0] == '@' || line[0] == '*') continue;
      if (line[0] == '-') {
        ++markers;
        continue;
      }
      ++signals;
      EXPECT_TRUE(facilities.count(line))
          << "the layout names " << line << ", which the trace does not have";
    }
    EXPECT_GT(signals, 0);
    EXPECT_EQ(traces, signals + markers) << "gtkwave did not display every line of the layout";
    EXPECT_EQ(shown, traces);
  }
  EXPECT_GE(layouts, 3);  // MXU wavefront, controller flow, VPU
}

}  // namespace
}  // namespace tpu
