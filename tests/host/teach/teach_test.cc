// `tpusim teach` shows the RTL's own state: every PE value it records in every cycle equals
// the waveform of the same run on the traced (ordinary) model; the HTML page holds every
// cycle and steps in a real browser; and the CLI's output and errors.
#include "host/teach/teach.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "contract/tpu_signals.h"
#include "host/gemm/gemm_runner.h"
#include "sim/wave/vcd_signals.h"
#include "tests/host/cli/cli_fixture.h"
#include "tests/test_util.h"

namespace tpu::test {
namespace {

class TeachTest : public CliFixture {};
namespace probe = hw::signals::probe_mxu;  // the names the teaching probe reads

TEST_F(TeachTest, EveryPeValueEqualsTheWaveformOfTheSameRun) {
  const int n = 4;
  const Matrix<int8_t> a = gemm::RandomInt8(5, 6, 3);  // K > N: two tiles, a weight switch
  const Matrix<int8_t> b = gemm::RandomInt8(6, 3, 4);
  const teach::WsRecording run = teach::RecordWeightStationary(a, b, n);
  ASSERT_TRUE(run.matches_reference);
  ASSERT_EQ(run.frames.size(), run.counters.cycles);
  EXPECT_EQ(run.frames.back().tiles, 2u);
  EXPECT_EQ(run.frames.back().rows_in, 10u);

  sim::RunOptions opts;
  opts.trace.path = P("run.vcd");
  const gemm::GemmRunResult traced = RunOnRtl(a, b, n, sim::EngineKind::kVerilator, opts);
  ASSERT_EQ(traced.counters.cycles, run.counters.cycles);
  const sim::VcdSignals vcd = sim::VcdSignals::FromFile(P("run.vcd"), {});
  int nonzero = 0;
  for (const teach::WsCycle& t : run.frames) {
    const uint64_t time = t.cycle * 10;  // the trace's dump before the clock edge
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        SCOPED_TRACE(::testing::Message() << "cycle " << t.cycle << " PE " << r << "," << c);
        const std::string pe = std::string(probe::kScope) +
                               hw::signals::Fill(hw::signals::Fill(probe::kPe, 'r', r), 'c', c);
        const auto reg = [&](std::string_view name) {
          return vcd.Signed(pe + std::string(name), time);
        };
        const sim::PeState& s = t.state.pe[static_cast<size_t>(r * n + c)];
        ASSERT_EQ(s.psum, reg(probe::kPePsum));
        ASSERT_EQ(s.act, reg(probe::kPeAct));
        ASSERT_EQ(s.weight, reg(probe::kPeWeight));
        ASSERT_EQ(s.shadow, reg(probe::kPeShadow));
        ASSERT_EQ(s.sw, reg(probe::kPeSwitch) != 0);
        nonzero += s.psum != 0;
      }
    }
    ASSERT_EQ(t.state.out_valid,
              vcd.Signed(std::string(probe::kScope) + std::string(probe::kOutValid), time) != 0);
  }
  EXPECT_GT(nonzero, 20) << "the comparison saw activity";
}

TEST_F(TeachTest, HtmlHoldsEveryCycleAndStepsInABrowser) {
  const Outcome o = Run("teach --m 3 --k 2 --n 3 --html " + P("t.html"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string html = Slurp(P("t.html"));
  for (const char* remote : {"http://", "https://", "src=", "@import"}) {
    EXPECT_EQ(html.find(remote), std::string::npos) << "the page must work offline: " << remote;
  }
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t at = html.find(open);
  ASSERT_NE(at, std::string::npos);
  const size_t end = html.find("</script>", at);
  const auto runs = nlohmann::json::parse(html.substr(at + open.size(), end - at - open.size()));
  ASSERT_EQ(runs.size(), 1u);
  const auto& data = runs[0];
  EXPECT_EQ(data["dataflow"], "ws");
  const auto& frames = data["frames"];
  ASSERT_EQ(frames.size(), data["cycles"].get<size_t>());
  ASSERT_EQ(frames.size(), 16u);  // 3 x 2 by 2 x 3 on 4 x 4 (docs/teaching.md)
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i]["cycle"], i + 1);
    EXPECT_EQ(frames[i]["pe"].size(), 16u);
  }
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium missing (scripts/install-deps installs it)";
  }
  // Open at cycle 9 and press "step >" twice: the page must show cycle 11's values.
  const std::string cmd =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--user-data-dir=" +
      P("chrome") + " --dump-dom 'file://" + P("t.html") + "#cycle=9&step=2' >" + P("dom.html") +
      " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string dom = Slurp(P("dom.html"));
  EXPECT_NE(dom.find("id=\"cycle-label\">cycle 11 of 16<"), std::string::npos) << dom;
  const auto& f = frames[10];
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      const auto& pe = f["pe"][r * 4 + c];
      const std::string cell = "id=\"pe-" + std::to_string(r) + "-" + std::to_string(c) + "\">";
      const size_t p = dom.find(cell);
      ASSERT_NE(p, std::string::npos) << cell;
      const std::string text = dom.substr(p, dom.find("</td>", p) - p);
      EXPECT_NE(text.find("p " + std::to_string(pe[3].get<int>()) + "<"), std::string::npos)
          << text;
      EXPECT_NE(text.find("w " + std::to_string(pe[0].get<int>()) + "<"), std::string::npos)
          << text;
    }
  }
}

TEST_F(TeachTest, TerminalRunShowsEveryCycleAsPlainTextWhenPiped) {
  const Outcome o = Run("teach --array 4 --m 3 --k 2 --n 3");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  for (int c = 1; c <= 16; ++c) {
    EXPECT_NE(o.out.find("cycle " + std::to_string(c) + " of 16"), std::string::npos) << c;
  }
  EXPECT_EQ(o.out.find("\033["), std::string::npos) << "no colour codes in a pipe";
  EXPECT_NE(o.out.find("bit-exact with the Eigen int32 reference"), std::string::npos);
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n') > 300, true);
  EXPECT_NE(o.out.find("result row out"), std::string::npos);
}

TEST_F(TeachTest, StepWaitsForEnterAndQGoesToTheEnd) {
  const std::string cmd = "printf '\\n\\nq\\n' | " + std::string(TPUSIM_BINARY) +
                          " teach --step >" + P("out") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string out = Slurp(P("out"));
  size_t prompts = 0;
  for (size_t at = 0; (at = out.find("[Enter: next cycle", at)) != std::string::npos; ++at)
    ++prompts;
  EXPECT_EQ(prompts, 3u);
  EXPECT_NE(out.find("cycle 16 of 16"), std::string::npos);
}

TEST_F(TeachTest, ColourOnATerminalAndTooNarrowTerminalsAreRefused) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const std::string wide = "script -qec \"stty cols 120 rows 40; " + std::string(TPUSIM_BINARY) +
                           " teach\" /dev/null >" + P("tty") + " 2>&1";
  ASSERT_EQ(std::system(wide.c_str()), 0);
  EXPECT_NE(Slurp(P("tty")).find("\033[1m"), std::string::npos) << "colour on a terminal";
  const std::string narrow = "script -qec \"stty cols 60 rows 40; " + std::string(TPUSIM_BINARY) +
                             " teach --array 8\" /dev/null >" + P("tty2") + " 2>&1";
  EXPECT_NE(std::system(narrow.c_str()), 0);
  EXPECT_NE(Slurp(P("tty2")).find("a 8 x 8 array needs 125 terminal columns and this terminal "
                                  "has 60"),
            std::string::npos)
      << Slurp(P("tty2"));
}

TEST_F(TeachTest, BadInputsAreUsageErrors) {
  ExpectError("teach --array 5", 2, "5 is not built");
  ExpectError("teach --array 1", 2, "--array 1 is out of range");
  ExpectError("teach --m 0", 2, "--m 0 must be at least 1");
  ExpectError("teach --m 400 --k 40 --n 40", 2, "teach shows at most 2000");
  ExpectError("teach --dataflow os --m 400 --k 40 --n 40", 2, "teach shows at most 2000");
  ExpectError("teach --a " + P("missing.npy") + " --b " + P("missing.npy"), 2, "missing.npy");
  ExpectError("teach --a " + P("x.npy"), 2, "--a was given without --b");
  ExpectError("teach --a " + P("x.npy") + " --b " + P("y.npy") + " --m 3", 2, "not both");
  ExpectError("teach --html " + P("no/such/dir/t.html"), 1, "t.html");
}

TEST_F(TeachTest, NumpyOperandsAreShownAndMultiplied) {
  const std::string py =
      "/usr/bin/python3 -c \"import numpy as np; "
      "np.save('" +
      P("A.npy") +
      "', np.array([[1,2],[3,4],[5,6]], dtype=np.int8)); "
      "np.save('" +
      P("B.npy") + "', np.array([[1,0,2],[0,1,3]], dtype=np.int8))\"";
  if (std::system(py.c_str()) != 0) GTEST_SKIP() << "python3-numpy missing";
  const Outcome o = Run("teach --array 2 --a " + P("A.npy") + " --b " + P("B.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  // C = [[1,2,8],[3,4,18],[5,6,28]]; N = 3 > 2, so two column tiles.
  EXPECT_NE(
      o.out.find("          1      2      8\n          3      4     18\n          5      6     28"),
      std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("2 weight tile(s) = 1 K-fold(s) x 2 N-tile(s)"), std::string::npos);
}

// The derived wavefront of the weight-stationary array (its PE has no valid bit) agrees
// with the RTL: every PE holding a non-zero activation is marked active, and the active
// PE-cycles are the rows that fired times N x N. C fills in to exactly the RTL's result.
TEST_F(TeachTest, WeightStationaryWavefrontAndCFillingAgreeWithTheRtl) {
  const int n = 4;
  const Matrix<int8_t> a = gemm::RandomInt8(5, 6, 3), b = gemm::RandomInt8(6, 7, 4);
  const teach::WsRecording run = teach::RecordWeightStationary(a, b, n);
  ASSERT_TRUE(run.matches_reference);
  uint64_t active = 0;
  for (const teach::WsCycle& t : run.frames) {
    for (size_t i = 0; i < t.state.pe.size(); ++i) {
      active += t.active[i];
      if (t.state.pe[i].act != 0) {
        ASSERT_TRUE(t.active[i]) << "cycle " << t.cycle << " PE " << i;
      }
    }
  }
  EXPECT_EQ(active, run.frames.back().rows_in * n * n);
  const teach::CProgress& c = run.frames.back().c;
  EXPECT_EQ(c.value, run.c.data);
  EXPECT_TRUE(std::all_of(c.seen.begin(), c.seen.end(), [](uint8_t s) { return s == 2; }));
  // K = 6 > N: the first fold's partial sums show before the final ones.
  bool partial = false;
  for (const auto& t : run.frames) partial |= std::count(t.c.seen.begin(), t.c.seen.end(), 1) > 0;
  EXPECT_TRUE(partial);
}

// The output-stationary recording: every value equals what the OS array's closed forms say
// it must be, and the data-movement counts taken from the RTL's valid bits equal the
// counts the dataflow implies (docs/teaching.md).
TEST_F(TeachTest, OutputStationaryRunCountsWhatItMoves) {
  for (int n : {2, 4}) {
    const int64_t m = 5, k = 3, nn = 7;
    const Matrix<int8_t> a = gemm::RandomInt8(m, k, 8), b = gemm::RandomInt8(k, nn, 9);
    const teach::OsRecording run = teach::RecordOutputStationary(a, b, n);
    SCOPED_TRACE(n);
    ASSERT_TRUE(run.matches_reference);
    EXPECT_EQ(run.frames.size(), run.counters.cycles);
    EXPECT_EQ(run.counters.cycles, run.predicted.total);
    const uint64_t tiles = run.predicted.tiles, nu = static_cast<uint64_t>(n);
    EXPECT_EQ(tiles, static_cast<uint64_t>(((m + n - 1) / n) * ((nn + n - 1) / n)));
    EXPECT_EQ(run.macs, tiles * k * nu * nu);
    EXPECT_EQ(run.moved.reads_in, 2 * tiles * k * nu);
    EXPECT_EQ(run.moved.operand_writes, 2 * run.macs);
    EXPECT_EQ(run.moved.sum_writes, run.macs + tiles * nu * nu * nu);
    EXPECT_EQ(run.moved.passes, 2 * tiles * k * nu * (nu - 1) + tiles * nu * nu * (nu - 1));
    EXPECT_EQ(run.moved.writes_out, tiles * nu * nu);
    EXPECT_EQ(run.frames.back().c.value, run.c.data);
    EXPECT_EQ(run.frames.back().macs, run.macs);
  }
}

TEST_F(TeachTest, BothDataflowsCompareOnTheSameOperands) {
  const Outcome o = Run("teach --dataflow both --array 4 --m 3 --k 2 --n 3");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  // 3 x 2 by 2 x 3 on 4 x 4: WS 16 cycles (docs/teaching.md), OS 2 + 6 + 4 = 12.
  EXPECT_NE(o.out.find("  cycles                                            16                12"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("C bit-exact with Eigen: yes and yes"), std::string::npos);
  const Outcome os = Run("teach --dataflow os --m 3 --k 2 --n 3");
  ASSERT_EQ(os.exit_code, 0) << os.err;
  EXPECT_NE(os.out.find("cycle 12 of 12"), std::string::npos);
  EXPECT_NE(os.out.find("output-stationary"), std::string::npos);
  EXPECT_NE(os.out.find("tile row 0 out"), std::string::npos);
}

TEST_F(TeachTest, AnswersAreCheckedAgainstTheRtl) {
  Outcome o =
      Run("teach --dataflow both --m 3 --k 2 --n 3 --answer ws.cycles=16 "
          "--answer os.cycles=12 --answer os.utilization=9.4 --answer ws.macs=18");
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("os.utilization = 9.4: right"), std::string::npos) << o.out;
  o = Run("teach --dataflow os --m 3 --k 2 --n 3 --answer cycles=11 --answer passes=96");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.out.find("os.cycles = 11: not right, try again"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("os.passes = 96: right"), std::string::npos) << o.out;
  EXPECT_NE(o.err.find("1 of 2 answers are not right"), std::string::npos) << o.err;
  ExpectError("teach --dataflow both --answer cycles=3", 2, "say which dataflow, as ws.cycles");
  ExpectError("teach --answer speed=3", 2, "no number named 'speed'");
  ExpectError("teach --answer cycles=many", 2, "'many' is not a number");
  ExpectError("teach --answer cycles", 2, "is not KEY=VALUE");
  ExpectError("teach --dataflow ws --answer os.cycles=3", 2, "is about os, but --dataflow is ws");
  ExpectError("teach --dataflow sideways", 2, "--dataflow");
  ExpectError("teach --dataflow both --step", 2, "--step shows one dataflow at a time");
}

// The exercises in docs/teaching.md and the example in README.md: every answer they give is
// what tpusim checks as right.
TEST_F(TeachTest, TheExercisesInTheDocsAreRight) {
  int checked = 0;
  for (const char* file : {TPUSIM_SOURCE_DIR "/docs/teaching.md", TPUSIM_SOURCE_DIR "/README.md"}) {
    std::ifstream doc(file);
    ASSERT_TRUE(doc) << file;
    for (std::string line; std::getline(doc, line);) {
      const size_t at = line.find("build/tpusim teach ");
      if (at == std::string::npos || line.find_first_not_of(' ') != at ||
          line.find("--answer") == std::string::npos) {
        continue;
      }
      std::string args = line.substr(at + std::string("build/tpusim ").size());
      if (const size_t hash = args.find(" #"); hash != std::string::npos) args.resize(hash);
      const Outcome o = Run(args);
      EXPECT_EQ(o.exit_code, 0) << file << ": " << line << "\n" << o.out << o.err;
      ++checked;
    }
  }
  EXPECT_GE(checked, 5) << "docs/teaching.md lists its exercises' checks as commands";
}

// Both arrays on one time axis in a real browser: open at cycle 5, step twice, and both
// panels show cycle 7's values.
TEST_F(TeachTest, BothSideBySideInABrowser) {
  const Outcome o = Run("teach --dataflow both --array 4 --m 3 --k 2 --n 3 --html " + P("b.html"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string html = Slurp(P("b.html"));
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t at = html.find(open);
  ASSERT_NE(at, std::string::npos);
  const auto runs = nlohmann::json::parse(
      html.substr(at + open.size(), html.find("</script>", at) - at - open.size()));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["dataflow"], "ws");
  EXPECT_EQ(runs[1]["dataflow"], "os");
  EXPECT_EQ(runs[1]["frames"].size(), 12u);
  for (const char* remote : {"http://", "https://", "src=", "@import"}) {
    EXPECT_EQ(html.find(remote), std::string::npos) << "the page must work offline: " << remote;
  }
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium missing (scripts/install-deps installs it)";
  }
  const std::string cmd =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--user-data-dir=" +
      P("chrome") + " --dump-dom 'file://" + P("b.html") + "#cycle=5&step=2' >" + P("dom.html") +
      " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string dom = Slurp(P("dom.html"));
  EXPECT_NE(dom.find("id=\"cycle-label\">cycle 7 of 16<"), std::string::npos);
  auto cell = [&](const std::string& id) {
    const size_t id_at = dom.find("id=\"" + id + "\"");
    if (id_at == std::string::npos) return std::string();
    const size_t p = dom.rfind("<td", id_at);  // the class comes before the id
    return dom.substr(p, dom.find("</td>", p) - p);
  };
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      const std::string rc = std::to_string(r) + "-" + std::to_string(c);
      const auto& ws = runs[0]["frames"][6]["pe"][r * 4 + c];
      EXPECT_NE(cell("pe-" + rc).find("p " + std::to_string(ws[3].get<int>()) + "<"),
                std::string::npos)
          << cell("pe-" + rc);
      const auto& os = runs[1]["frames"][6]["pe"][r * 4 + c];
      EXPECT_NE(cell("os-pe-" + rc).find("c " + std::to_string(os[2].get<int>()) + "<"),
                std::string::npos)
          << cell("os-pe-" + rc);
      EXPECT_EQ(cell("os-pe-" + rc).find("active") != std::string::npos, os[3].get<int>() == 1)
          << cell("os-pe-" + rc);
    }
  }
}

// In bfloat16 (--dtype bf16) the teaching model is the bf16 matrix unit: the same cycles as
// int8 for the same shape, C bit-exact with arith::Bf16Gemm and filled in to exactly the
// RTL's result (float32 adds of the folds), and the PEs' registers read as 16-bit values:
// in the last cycle every PE holds B's last tile as bfloat16.
TEST_F(TeachTest, Bf16RecordsTheBf16MatrixUnit) {
  const int n = 4;
  const Matrix<uint16_t> a = gemm::RandomBf16(5, 6, 3), b = gemm::RandomBf16(6, 3, 4);
  const teach::WsRecording run = teach::RecordWeightStationary(a, b, n);
  ASSERT_TRUE(run.matches_reference);
  EXPECT_EQ(run.values.dtype, hw::Dtype::kBf16);
  const teach::WsRecording int8 =
      teach::RecordWeightStationary(gemm::RandomInt8(5, 6, 3), gemm::RandomInt8(6, 3, 4), n);
  EXPECT_EQ(run.frames.size(), int8.frames.size());
  EXPECT_EQ(run.c.data, gemm::ReferenceGemm(a, b, n).data);
  EXPECT_EQ(run.frames.back().c.value, run.c.data);  // two K folds added in float32
  const sim::ArrayState& last = run.frames.back().state;
  for (int r = 0; r < 2; ++r)  // K = 6: the second tile holds rows 4 and 5 of B
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(last.pe[static_cast<size_t>(r * n + c)].weight, b.at(4 + r, c)) << r << "," << c;
  EXPECT_EQ(run.values.Operand(0x3fc0), "1.5");
  EXPECT_EQ(run.values.Operand(0x4068), "3.625");       // exact, not the shorter 3.62
  EXPECT_EQ(run.values.Operand(0x3eab), "0.33398438");  // bfloat16(1/3) as a float32
  EXPECT_EQ(run.values.Sum(static_cast<int32_t>(0x3eaaaaab)), "0.33333334");
}

// The CLI in bf16: float32 .npy operands shown and multiplied, C exact; the page's data in
// float values; the output-stationary array and unbuilt sizes refused with what to do.
TEST_F(TeachTest, Bf16FromTheCommandLine) {
  const std::string py =
      "/usr/bin/python3 -c \"import numpy as np; "
      "np.save('" +
      P("A.npy") +
      "', np.array([[0.5,-1.25],[2,3]], dtype=np.float32)); "
      "np.save('" +
      P("B.npy") + "', np.array([[1.5,0],[0.25,-2]], dtype=np.float32))\"";
  if (std::system(py.c_str()) != 0) GTEST_SKIP() << "python3-numpy missing";
  const Outcome o = Run("teach --dtype bf16 --array 2 --a " + P("A.npy") + " --b " + P("B.npy"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  // C = [[0.75 - 0.3125, 2.5], [3 + 0.75, -6]]
  EXPECT_NE(o.out.find("     0.4375    2.5\n       3.75     -6\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("        0.5  -1.25\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("bit-exact with the CPU bf16 reference"), std::string::npos) << o.out;
  ASSERT_EQ(Run("teach --dtype bf16 --array 2 --a " + P("A.npy") + " --b " + P("B.npy") +
                " --html " + P("t.html"))
                .exit_code,
            0);
  const std::string html = Slurp(P("t.html"));
  const std::string open = "<script type=\"application/json\" id=\"data\">";
  const size_t at = html.find(open);
  ASSERT_NE(at, std::string::npos);
  const auto runs = nlohmann::json::parse(
      html.substr(at + open.size(), html.find("</script>", at) - at - open.size()));
  EXPECT_EQ(runs[0]["dtype"], "bf16");
  // Every register of every cycle is one of the operands (or 0): read from the live model
  // (a thread context left dangling by an earlier model made them garbage).
  const std::set<double> operands = {0, 0.5, -1.25, 2, 3, 1.5, 0.25, -2};
  for (const auto& f : runs[0]["frames"])
    for (const auto& pe : f["pe"])
      for (int reg = 0; reg < 3; ++reg)
        EXPECT_TRUE(pe[reg].is_number() && operands.count(pe[reg].get<double>())) << pe;
  EXPECT_EQ(runs[0]["c"][0][0].get<double>(), 0.4375);
  EXPECT_EQ(runs[0]["a"][0][1].get<double>(), -1.25);
  ExpectError("teach --dtype bf16 --dataflow os", 2, "output-stationary teaching array is int8");
  ExpectError("teach --dtype bf16 --array 3", 2, "TPUSIM_TEACH_BF16_DIMS");
  ExpectError("teach --dtype fp8", 2, "--dtype");
}

// The rows printed under the first line of `out` that contains `header`: each line after it
// that holds "[ ... ]" until one that does not, as its numbers.
std::vector<std::vector<double>> RowsAfter(const std::string& out, const std::string& header) {
  std::vector<std::vector<double>> rows;
  size_t at = out.find(header);
  if (at == std::string::npos) return rows;
  at = out.find('\n', at) + 1;
  for (size_t end; (end = out.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string line = out.substr(at, end - at);
    const size_t open = line.find('['), close = line.find(']');
    if (open == std::string::npos || close == std::string::npos) break;
    std::istringstream in(line.substr(open + 1, close - open - 1));
    rows.emplace_back(std::istream_iterator<double>(in), std::istream_iterator<double>());
  }
  return rows;
}

// A transposed load on the whole chip's RTL: K's rows go into the tile buffer one a cycle,
// and FIFO row k, pushed a cycle each, is lane k of every row; the unit is busy as the
// timing rule says (2N + 1 cycles a tile).
TEST_F(TeachTest, ChipTransposeShowsKsColumnsBecomingTheFifosRows) {
  const Outcome o = Run("teach --chip transpose --seed 3");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto k = RowsAfter(o.out, "Its operands");
  const auto fifo = RowsAfter(o.out, "The weight FIFO's rows");
  ASSERT_EQ(k.size(), 4u) << o.out;
  ASSERT_EQ(fifo.size(), 4u) << o.out;
  for (size_t r = 0; r < 4; ++r) {
    ASSERT_EQ(k[r].size(), 4u);
    for (size_t l = 0; l < 4; ++l) EXPECT_EQ(fifo[l][r], k[r][l]) << "row " << r << " lane " << l;
  }
  EXPECT_NE(o.out.find("tile buffer   4 of 4 rows in"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("9 busy cycles of its unit; the timing rule's: 9"), std::string::npos)
      << o.out;
}

// A vector operation: every row read, computed and written, the rows written equal to the
// arithmetic (a + b of small halves and quarters is exact), the busy cycles the rule's.
TEST_F(TeachTest, ChipVectorShowsRowsReadComputedDelayedAndWritten) {
  const Outcome o = Run("teach --chip vector --op add --seed 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto ops = RowsAfter(o.out, "Its operands");  // a's 4 rows then b's
  const auto out = RowsAfter(o.out, "The rows written");
  ASSERT_EQ(ops.size(), 8u) << o.out;
  ASSERT_EQ(out.size(), 4u) << o.out;
  for (size_t r = 0; r < 4; ++r)
    for (size_t l = 0; l < 4; ++l) EXPECT_EQ(out[r][l], ops[r][l] + ops[4 + r][l]) << r << l;
  for (int row = 8; row < 12; ++row)
    EXPECT_NE(o.out.find("write         row " + std::to_string(row) + " <-"), std::string::npos);
  EXPECT_NE(o.out.find("delay line    stage 0: row 8"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("7 busy cycles of its unit; the timing rule's: 7"), std::string::npos)
      << o.out;
  const Outcome e = Run("teach --chip vector --op exp");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("11 busy cycles of its unit; the timing rule's: 11"), std::string::npos)
      << e.out;
  ExpectError("teach --chip vector --op fma", 2, "'fma' is not a vector operation (known: add");
  ExpectError("teach --chip transpose --m 3", 2, "--m is for the matrix-multiply lesson");
  ExpectError("teach --chip transpose --op exp", 2, "--op names the operation of --chip vector");
  ExpectError("teach --chip scalar", 2, "--chip");
}

}  // namespace
}  // namespace tpu::test
