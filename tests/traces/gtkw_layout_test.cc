// Every GTKWave layout in traces/ is what tpusim writes beside the trace of the command in
// its header ("[*] Trace made by: tpusim ..."), byte for byte; and, opened in GTKWave under
// Xvfb (traces/check_layout.tcl) against that trace, every signal it names exists and is
// displayed, every PE line carries its coordinates, its markers lie inside the trace, its
// zoom shows the whole trace, and a screenshot of it is taken.
#include "sim/wave/gtkw_layout.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/host/cli/cli_fixture.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

class GtkwLayoutTest : public test::CliFixture {};

std::string HeaderValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

TEST_F(GtkwLayoutTest, EveryLayoutIsWhatTpusimWritesAndOpensOnTheWholeTrace) {
  const bool gui =
      std::system("command -v xvfb-run >/dev/null && command -v gtkwave >/dev/null") == 0;
  int layouts = 0;
  for (const auto& entry : fs::directory_iterator(TPUSIM_SOURCE_DIR "/traces")) {
    if (entry.path().extension() != ".gtkw") continue;
    ++layouts;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::string committed = Slurp(entry.path().string());
    const std::string command = HeaderValue(committed, "[*] Trace made by: tpusim ");
    const std::string open = HeaderValue(committed, "[*] Open with: gtkwave ");
    ASSERT_FALSE(command.empty()) << "the header names no command";
    const std::string trace_name = open.substr(0, open.find(' '));
    const std::string written_name = open.substr(open.find(' ') + 1);
    // Run the header's command with the trace in the test's folder.
    const std::string flag = "--trace " + trace_name;
    const size_t at = command.find(flag);
    ASSERT_NE(at, std::string::npos) << command;
    const std::string args =
        command.substr(0, at) + "--trace " + P(trace_name) + command.substr(at + flag.size());
    const std::string run = "cd " TPUSIM_SOURCE_DIR " && " TPUSIM_BINARY " " + args + " >" +
                            P("out") + " 2>" + P("err");
    ASSERT_EQ(std::system(run.c_str()), 0) << args << ": " << Slurp(P("err"));
    EXPECT_NE(Slurp(P("err")).find("GTKWave layout"), std::string::npos) << Slurp(P("err"));
    // One home: the copy in traces/ is what tpusim writes (scripts/screenshots regenerates).
    ASSERT_EQ(Slurp(P(written_name)), committed)
        << "traces/" << name << " differs from what `tpusim " << command
        << "` writes; run scripts/screenshots";

    // What the layout names, read from it.
    std::set<std::string> named;
    std::vector<std::string> aliases;
    int lines = 0, groups = 0;
    double zoom = 0;
    int signals_width = 0;
    std::vector<int64_t> marker_times;
    std::istringstream in(committed);
    const std::regex bit_ref(R"(\((\d+)\)(\S+))");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("[signals_width] ", 0) == 0) signals_width = std::stoi(line.substr(16));
      if (line[0] == '*') {
        std::istringstream z(line.substr(1));
        int64_t marker, t;
        z >> zoom >> marker;
        while (z >> t) {
          if (t >= 0) marker_times.push_back(t);
        }
      }
      if (line.empty() || line[0] == '[' || line[0] == '@' || line[0] == '*') continue;
      ++lines;
      if (line[0] == '-') {
        ++groups;
        continue;
      }
      if (line.rfind("#{", 0) == 0) {  // a lane: bits of one vector
        aliases.push_back(line.substr(2, line.find('}') - 2));
        for (std::sregex_iterator it(line.begin(), line.end(), bit_ref), end; it != end; ++it) {
          named.insert((*it)[2]);
        }
      } else if (line.rfind("+{", 0) == 0) {
        aliases.push_back(line.substr(2, line.find('}') - 2));
        named.insert(line.substr(line.find("} ") + 2));
      } else {
        named.insert(line);
      }
    }
    EXPECT_GT(named.size(), 10u);
    EXPECT_GT(signals_width, 0);
    // Every PE line is named by its coordinates.
    for (const std::string& fac : named) {
      if (fac.find(".u_pe.") == std::string::npos) continue;
      const std::smatch m = [&] {
        std::smatch s;
        std::regex_search(fac, s, std::regex(R"(gen_row\[(\d+)\]\.gen_col\[(\d+)\])"));
        return s;
      }();
      ASSERT_EQ(m.size(), 3u) << fac;
      const std::string coord = "PE(" + m[1].str() + "," + m[2].str() + ")";
      EXPECT_NE(committed.find("+{" + coord + " "), std::string::npos) << fac;
    }
    // The trace's span: the header's cycle window.
    const std::string cycles = HeaderValue(committed, "[*] Cycles ");
    const uint64_t c0 = std::stoull(cycles),
                   c1 = std::stoull(cycles.substr(cycles.find(" to ") + 4));
    const double span = static_cast<double>((c1 + 1 - c0) * 10);
    EXPECT_GE(sim::VisibleNanoseconds(zoom, 1400, signals_width), span)
        << "the zoom does not show the whole trace";
    EXPECT_LE(sim::VisibleNanoseconds(zoom, 1400, signals_width), 1.2 * span)
        << "the zoom leaves the trace small";
    EXPECT_FALSE(marker_times.empty()) << "no markers";
    for (int64_t t : marker_times) {
      EXPECT_GE(t, static_cast<int64_t>(c0 * 10));
      EXPECT_LE(t, static_cast<int64_t>(c1 * 10 + 9));
    }

    if (!gui) continue;
    const std::string cmd =
        "timeout 120 xvfb-run -a gtkwave -S " TPUSIM_SOURCE_DIR "/traces/check_layout.tcl " +
        P(trace_name) + " " + entry.path().string() + " >" + P("gtkwave.out") + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::set<std::string> facilities, shown_names;
    int traces = -1;
    std::istringstream out(Slurp(P("gtkwave.out")));
    for (std::string line; std::getline(out, line);) {
      if (line.rfind("FAC ", 0) == 0) facilities.insert(line.substr(4));
      if (line.rfind("TRACES ", 0) == 0) traces = std::stoi(line.substr(7));
      if (line.rfind("TRACE ", 0) == 0) shown_names.insert(line.substr(6));
    }
    ASSERT_GT(facilities.size(), 100u) << "gtkwave did not load the trace";
    for (const std::string& fac : named) {
      EXPECT_TRUE(facilities.count(fac)) << "the layout names " << fac << ", which the trace lacks";
    }
    EXPECT_EQ(traces, lines) << "gtkwave did not display every line of the layout";
    for (const std::string& alias : aliases) {
      EXPECT_TRUE(shown_names.count(alias)) << "gtkwave does not show '" << alias << "'";
    }
    // A screenshot of the layout as a user opens it (gtkwave TRACE LAYOUT).
    if (std::system("command -v xwd >/dev/null && command -v xwdtopnm >/dev/null && "
                    "command -v pnmtopng >/dev/null") == 0) {
      const std::string shot =
          "timeout 60 xvfb-run -a -s '-screen 0 1400x900x24' sh -c \"gtkwave " + P(trace_name) +
          " " + entry.path().string() +
          " >/dev/null 2>&1 & pid=\\$!; sleep 2; xwd -root -silent | "
          "xwdtopnm 2>/dev/null | pnmtopng >" +
          P("shot.png") + "; kill \\$pid\"";
      ASSERT_EQ(std::system(shot.c_str()), 0);
      EXPECT_GT(fs::file_size(P("shot.png")), 20000u) << "the screenshot is (nearly) empty";
    }
  }
  EXPECT_GE(layouts, 3);  // MXU wavefront, controller flow, VPU
}

// Any trace gets its own layout: its cycle window, its command, every PE named.
TEST_F(GtkwLayoutTest, LayoutsForAnyTraceNameTheirWindow) {
  const test::Outcome o = Run("gemm --config teach-4 --m 5 --k 9 --n 6 --trace " + P("w.vcd") +
                              " --trace-start 10 --trace-end 30");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string text = Slurp(P("w.gtkw"));
  EXPECT_NE(text.find("[*] Cycles 10 to 30 "), std::string::npos) << text;
  EXPECT_NE(text.find("[timestart] 100\n"), std::string::npos);
  EXPECT_NE(text.find("--trace w.vcd --trace-start 10 --trace-end 30"), std::string::npos);
  EXPECT_NE(text.find("+{PE(3,3) psum} "), std::string::npos);
}

}  // namespace
}  // namespace tpu
