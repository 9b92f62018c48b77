// Waveform traces (sim/wave/wave_file.cc and the engines' tracing): the file is a real FST or
// VCD that GTKWave's tools parse, holds the matrix unit's signals, and only the requested
// cycle window.
#include "sim/wave/wave_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("tpusim_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// fst2vcd exits non-zero on a file that is not a valid FST.
std::string FstToVcd(const std::string& fst) {
  const std::string vcd = fst + ".vcd";
  const std::string cmd = "fst2vcd -f '" + fst + "' -o '" + vcd + "' >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "fst2vcd rejected " << fst;
  std::string text = Slurp(vcd);
  std::remove(vcd.c_str());
  return text;
}

// First and last timestamps (#N lines) of a VCD.
std::pair<long, long> TimeRange(const std::string& vcd) {
  long first = -1, last = -1;
  std::istringstream in(vcd);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '#') {
      const long t = std::stol(line.substr(1));
      if (first < 0) first = t;
      last = t;
    }
  }
  return {first, last};
}

void ExpectMxuSignals(const std::string& vcd) {
  for (const char* name :
       {"clk_i", "a_data_i", "w_ready_o", "rd_data_o", "u_mxu", "u_array", "u_pe",
        "weight_active_q", "weight_shadow_q", "psum_q", "switch_q", "cnt_cycles_o"}) {
    EXPECT_NE(vcd.find(name), std::string::npos) << "signal or scope " << name << " missing";
  }
}

sim::RunOptions Traced(const std::string& path, uint64_t start, uint64_t end) {
  sim::RunOptions o;
  o.trace.path = path;
  o.trace.start_cycle = start;
  o.trace.end_cycle = end;
  return o;
}

TEST(WaveFileTest, FstTraceIsValidAndHoldsTheWindow) {
  const std::string path = TempPath("t.fst");
  const auto a = gemm::RandomInt8(6, 8, 1), b = gemm::RandomInt8(8, 5, 2);
  const auto r = test::RunOnRtl(a, b, 4, sim::EngineKind::kVerilator, Traced(path, 3, 12));
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp" + std::to_string(::getpid()) + ".fst"));
  const std::string vcd = FstToVcd(path);
  ExpectMxuSignals(vcd);
  const auto [first, last] = TimeRange(vcd);
  EXPECT_EQ(first, 30);  // cycle 3, clock low
  EXPECT_EQ(last, 125);  // cycle 12, clock high
  EXPECT_GT(r.counters.cycles, 12u);
  std::remove(path.c_str());
}

TEST(WaveFileTest, VcdTraceIsWrittenOnRequest) {
  const std::string path = TempPath("t.vcd");
  const auto a = gemm::RandomInt8(3, 2, 1), b = gemm::RandomInt8(2, 3, 2);
  test::RunOnRtl(a, b, 4, sim::EngineKind::kVerilator, Traced(path, 0, UINT64_MAX));
  const std::string vcd = Slurp(path);
  EXPECT_EQ(vcd.rfind("$date", 0), 0u) << "not a VCD header";
  ExpectMxuSignals(vcd);
  EXPECT_EQ(TimeRange(vcd).first, 0);
  std::remove(path.c_str());
}

TEST(WaveFileTest, UnknownExtensionIsRejected) {
  EXPECT_THROW(sim::WaveFile("trace.txt"), std::invalid_argument);
}

TEST(WaveFileTest, UncommittedTraceLeavesNothingBehind) {
  const std::string path = TempPath("never.fst");
  std::string tmp;
  {
    sim::WaveFile w(path);
    tmp = w.FstPath();
    std::ofstream(tmp) << "partial";
  }
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace tpu
