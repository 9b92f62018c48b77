// A core of two matrix units (config `mxus_per_core`, docs/architecture.md "A core of several
// matrix units") through the ChipEngine seam, on both engines (the rtl engine's 1 x 2 x 4 chip,
// CMake TPUSIM_TPU_CHIPS): matmuls naming different units run at once, as their weight DMAs do;
// each unit keeps its own weight tiles and accumulators, and an mxu= past the core's last is
// a bad operand. Each test is its own process (the SystemC kernel elaborates once per process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/common/errors.h"
#include "host/engine/engine_factory.h"
#include "host/engine/timeline.h"
#include "host/isa/assembler.h"
#include "tests/host/engine/chip_test_util.h"

namespace tpu::test {
namespace {

config::TpuConfig TwoMxus() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.mxus_per_core = 2;
  return c;
}

// Both engines on the core of two matrix units (rtl where it is built).
const std::vector<std::unique_ptr<engine::ChipEngine>>& Engines() {
  static const std::vector<std::unique_ptr<engine::ChipEngine>> engines =
      ChipEngines(TwoMxus(), "1x2x4");
  return engines;
}

// Both engines' results of a job.
std::vector<engine::ExecResult> RunBoth(const engine::ExecJob& job) {
  SayWhereTheRtlIsMissing(Engines(), "1x2x4");
  std::vector<engine::ExecResult> out;
  for (const auto& e : Engines()) out.push_back(e->Run(job));
  return out;
}

constexpr int kRows = 64;       // activation rows, 4 int8 each, at host 0
constexpr int kParams = 0x200;  // one VPU parameter set: bias 0, x 2^30 >> 30 (the identity)
constexpr int kOut = 0x400;     // 2 x 64 result rows
constexpr int kHostBytes = 0x600;

std::vector<uint8_t> HostImage() {
  std::vector<uint8_t> host(kHostBytes, 0);
  for (int i = 0; i < kRows * 4; ++i) host[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 3);
  for (int l = 0; l < 4; ++l) {
    const uint32_t mult = 1u << 30;
    std::memcpy(&host[static_cast<size_t>(kParams + 16 + 4 * l)], &mult, 4);
    host[static_cast<size_t>(kParams + 32 + l)] = 30;
  }
  return host;
}

// Two 4 x 4 tiles: weight w[t][r][c] = (t + 1) x (r + c) % 5 - 2.
std::vector<uint8_t> WeightImage() {
  std::vector<uint8_t> w(32);
  for (int i = 0; i < 32; ++i)
    w[static_cast<size_t>(i)] = static_cast<uint8_t>(((i / 16 + 1) * (i % 16 / 4 + i % 4)) % 5 - 2);
  return w;
}

const char* kPrologue =
    "read_host host=0 ub=0 rows=64\n"
    "read_host host=0x200 params=0 rows=1\n";

// Tile 0 times the rows into results 0-63, tile 1 into results 64-127.
engine::ExecJob OnTwoUnits() {
  return Job(std::string(kPrologue) +
                 "read_weights addr=0 tiles=1\n"
                 "read_weights addr=16 tiles=1 mxu=1\n"
                 "matmul ub=0 acc=0 rows=64 switch\n"
                 "matmul ub=0 acc=0 rows=64 switch mxu=1\n"
                 "activate acc=0 ub=64 rows=64 params=0\n"
                 "activate acc=0 ub=128 rows=64 params=0 mxu=1\n"
                 "write_host ub=64 host=0x400 rows=128\n"
                 "halt\n",
             HostImage(), WeightImage(), 0, kHostBytes);
}

engine::ExecJob OnOneUnit() {
  return Job(std::string(kPrologue) +
                 "read_weights addr=0 tiles=2\n"
                 "matmul ub=0 acc=0 rows=64 switch\n"
                 "matmul ub=0 acc=64 rows=64 switch\n"
                 "activate acc=0 ub=64 rows=128 params=0\n"
                 "write_host ub=64 host=0x400 rows=128\n"
                 "halt\n",
             HostImage(), WeightImage(), 0, kHostBytes);
}

TEST(MultiMxuTest, TwoUnitsComputeWhatOneDoesInFewerCycles) {
  const std::vector<engine::ExecResult> two = RunBoth(OnTwoUnits());
  const std::vector<engine::ExecResult> one = RunBoth(OnOneUnit());
  for (size_t e = 0; e < two.size(); ++e) {
    SCOPED_TRACE(two[e].engine);
    ASSERT_TRUE(two[e].ok) << two[e].message;
    ASSERT_TRUE(one[e].ok) << one[e].message;
    EXPECT_EQ(two[e].host_out, one[e].host_out);
    // Not all zero: the tiles did multiply.
    EXPECT_TRUE(std::any_of(two[e].host_out.begin() + kOut, two[e].host_out.end(),
                            [](uint8_t v) { return v != 0; }));
    EXPECT_EQ(two[e].counters.macs, one[e].counters.macs);
    EXPECT_EQ(two[e].counters.weight_tiles, 2u);
    // The second unit's 64 rows stream beside the first's instead of after them.
    EXPECT_LT(two[e].cycles + 48, one[e].cycles) << two[e].cycles << " vs " << one[e].cycles;
  }
  if (two.size() == 2) {
    EXPECT_EQ(two[0].cycles, two[1].cycles);
    EXPECT_EQ(two[0].counters, two[1].counters);
    EXPECT_EQ(one[0].counters, one[1].counters);
  }
}

// The timeline has a track per matrix unit, each with its own matmul, the two side by side
// in time; the same on both engines (their mxu_busy_o).
TEST(MultiMxuTest, TheTimelineHasATrackPerMatrixUnit) {
  std::vector<nlohmann::json> events;
  SayWhereTheRtlIsMissing(Engines(), "1x2x4");
  for (const auto& e : Engines()) {
    SCOPED_TRACE(e->Name());
    engine::Timeline t(700, 2);
    e->SetTimeline(&t);
    const engine::ExecResult r = e->Run(OnTwoUnits());
    e->SetTimeline(nullptr);
    ASSERT_TRUE(r.ok) << r.message;
    const nlohmann::json j = t.ToJson();
    std::map<std::string, int> track;  // name -> tid
    for (const auto& ev : j["traceEvents"])
      if (ev["name"] == "thread_name") track[ev["args"]["name"]] = ev["tid"];
    ASSERT_EQ(track.count("matrix unit 0"), 1u);
    ASSERT_EQ(track.count("matrix unit 1"), 1u);
    std::vector<nlohmann::json> matmuls[2];
    for (const auto& ev : t.Events())
      for (int m = 0; m < 2; ++m)
        if (ev["tid"] == track["matrix unit " + std::to_string(m)]) matmuls[m].push_back(ev);
    ASSERT_EQ(matmuls[0].size(), 1u);
    ASSERT_EQ(matmuls[1].size(), 1u);
    const uint64_t start0 = matmuls[0][0]["args"]["cycle"], start1 = matmuls[1][0]["args"]["cycle"];
    const uint64_t end0 = start0 + matmuls[0][0]["args"]["cycles"].get<uint64_t>();
    EXPECT_EQ(matmuls[0][0]["name"], "matmul");
    EXPECT_NE(matmuls[1][0]["args"]["instruction"].get<std::string>().find("mxu=1"),
              std::string::npos);
    EXPECT_LT(start1, end0);  // unit 1 starts while unit 0 streams
    EXPECT_GT(end0 - start0, 64u);
    events.push_back(t.Events());
  }
  if (events.size() == 2) {
    EXPECT_EQ(events[0].dump(), events[1].dump());
  }
}

// Each matrix unit has its own weight DMA (docs/timing.md, "Why a port per matrix unit"): a
// read_weights for unit 1 issues while unit 0's is still reading, where a second read for
// unit 0 waits for unit 0's DMA; the rows are the same, and both engines count the same.
TEST(MultiMxuTest, EachUnitsWeightDmaReadsBesideTheOthers) {
  const auto reads = [](const char* second) {
    return Job(
        std::string("read_weights addr=0 tiles=2\n") + second + "halt\n", {},
        [] {
          std::vector<uint8_t> w = WeightImage();
          w.insert(w.end(), w.begin(), w.end());
          return w;
        }(),
        0, 0);
  };
  const std::vector<engine::ExecResult> apart =
      RunBoth(reads("read_weights addr=32 tiles=2 mxu=1\n"));
  const std::vector<engine::ExecResult> after = RunBoth(reads("read_weights addr=32 tiles=2\n"));
  for (size_t e = 0; e < apart.size(); ++e) {
    SCOPED_TRACE(apart[e].engine);
    ASSERT_TRUE(apart[e].ok) << apart[e].message;
    ASSERT_TRUE(after[e].ok) << after[e].message;
    EXPECT_EQ(apart[e].counters.issue_stall_unit_busy, 0u);
    EXPECT_GT(after[e].counters.issue_stall_unit_busy, 0u);
    EXPECT_LT(apart[e].cycles, after[e].cycles);
    for (const engine::ExecResult* r : {&apart[e], &after[e]}) {
      EXPECT_EQ(r->counters.weight_fifo_pushes, 16u);
      EXPECT_EQ(r->counters.weight_bytes_read, 64u);
    }
    // The two reads overlap: some weight DMA is busy in fewer cycles than one after the other.
    EXPECT_LT(apart[e].counters.busy_weight_dma, after[e].counters.busy_weight_dma);
  }
  if (apart.size() == 2) {
    EXPECT_EQ(apart[0].counters, apart[1].counters);
    EXPECT_EQ(after[0].counters, after[1].counters);
  }
}

TEST(MultiMxuTest, AnMxuPastTheCoresLastIsABadOperand) {
  for (const engine::ExecResult& r :
       RunBoth(Job("nop\nmatmul ub=0 acc=0 rows=1 mxu=2\nhalt\n", {}, {}, 0, 0))) {
    SCOPED_TRACE(r.engine);
    EXPECT_EQ(r.state, engine::RunEnd::kError);
    EXPECT_EQ(r.chip_status, hw::Status::kBadOperand);
    EXPECT_EQ(r.error_pc, 1u);
  }
}

TEST(MultiMxuTest, TheAssemblerReadsAndWritesMxu) {
  const isa::Program p = isa::Assemble(
      "read_weights addr=0 tiles=1 mxu=3\nmatmul ub=0 acc=0 rows=1 switch mxu=1\n"
      "activate acc=0 ub=0 rows=1 params=0 mxu=2\n",
      "t.asm");
  EXPECT_EQ(p.words[0][1], 0xc0);
  EXPECT_EQ(isa::Disassemble(p),
            "read_weights addr=0x0 tiles=1 mxu=3\nmatmul ub=0 acc=0 rows=1 mxu=1 switch\n"
            "activate acc=0 ub=0 rows=1 params=0 mxu=2\n");
  EXPECT_THROW(isa::Assemble("matmul ub=0 acc=0 rows=1 mxu=4\n", "t.asm"), UsageError);
}

}  // namespace
}  // namespace tpu::test
