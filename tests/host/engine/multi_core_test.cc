// A job for a chip of several cores through the ChipEngine seam (config `cores`): a program
// per core, each core's result, the run's state, message and summed counters, on both
// engines (the rtl engine's 2 x 4 chip, CMake TPUSIM_TPU_CHIPS). Each test is its own process
// (the SystemC kernel elaborates once per process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/engine/engine_factory.h"
#include "host/engine/timeline.h"
#include "host/gemm/gemm_runner.h"
#include "host/isa/assembler.h"
#include "tests/host/engine/chip_test_util.h"

namespace tpu::test {
namespace {

config::TpuConfig TwoCores() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.cores = 2;
  return c;
}

// Both engines' results of a job on the 2-core chip (rtl only where it is built). The engines
// live as long as the process (one SystemC system per process), made for the config of the
// process's first call (each test is its own process).
const std::vector<std::unique_ptr<engine::ChipEngine>>& Engines(
    const config::TpuConfig& config = TwoCores()) {
  static const std::vector<std::unique_ptr<engine::ChipEngine>> engines =
      ChipEngines(config, "2x4");
  SayWhereTheRtlIsMissing(engines, "2x4");
  return engines;
}

std::vector<engine::ExecResult> RunBoth(const engine::ExecJob& job,
                                        const config::TpuConfig& config = TwoCores()) {
  std::vector<engine::ExecResult> out;
  for (const auto& e : Engines(config)) out.push_back(e->Run(job));
  return out;
}

// Core c copies 5 rows from host 0x100 * (c + 1) to 0x1000 + 0x100 * c.
std::string Copy(int c) {
  return fmt::format("read_host host={} ub=0 rows=5\nwrite_host ub=0 host={} rows=5\nhalt\n",
                     0x100 * (c + 1), 0x1000 + 0x100 * c);
}

std::vector<uint8_t> HostImage() {
  std::vector<uint8_t> host(0x1200, 0);
  std::iota(host.begin() + 0x100, host.begin() + 0x300, uint8_t{1});
  return host;
}

TEST(MultiCoreTest, EachCoreRunsItsProgramAndTheCountersAddUp) {
  engine::ExecJob job = Job(Copy(0), HostImage(), {}, 0, 0x1200);
  job.other_programs.push_back(isa::Assemble(Copy(1), "core1.asm"));
  for (const engine::ExecResult& r : RunBoth(job)) {
    SCOPED_TRACE(r.engine);
    ASSERT_TRUE(r.ok) << r.message;
    ASSERT_EQ(r.cores.size(), 2u);
    for (int c = 0; c < 2; ++c) {
      const engine::CoreResult& k = r.cores[static_cast<size_t>(c)];
      EXPECT_EQ(k.state, engine::RunEnd::kHalted);
      EXPECT_EQ(k.counters.instructions, 3u);
      EXPECT_EQ(k.counters.host_bytes_written, 20u);
      EXPECT_GT(k.cycles, 0u);
      EXPECT_LE(k.cycles, r.cycles);
      // Each copy arrived where its core wrote it.
      EXPECT_TRUE(std::equal(r.host_out.begin() + 0x1000 + 0x100 * c,
                             r.host_out.begin() + 0x1000 + 0x100 * c + 20,
                             r.host_out.begin() + 0x100 * (c + 1)));
    }
    EXPECT_EQ(r.cycles, std::max(r.cores[0].cycles, r.cores[1].cycles));
    EXPECT_EQ(r.counters.cycles, r.cycles);
    EXPECT_EQ(r.counters.instructions, 6u);
    EXPECT_EQ(r.counters.host_bytes_read, 40u);
  }
}

TEST(MultiCoreTest, ACoreWithoutAProgramStaysIdle) {
  for (const engine::ExecResult& r : RunBoth(Job(Copy(0), HostImage()))) {
    SCOPED_TRACE(r.engine);
    ASSERT_TRUE(r.ok) << r.message;
    ASSERT_EQ(r.cores.size(), 2u);
    EXPECT_EQ(r.cores[1].state, engine::RunEnd::kIdle);
    EXPECT_EQ(r.cores[1].cycles, 0u);
    EXPECT_EQ(r.cores[1].counters.instructions, 0u);
    EXPECT_EQ(r.counters.instructions, 3u);
  }
}

TEST(MultiCoreTest, AnErrorOnOneCoreIsTheRunsAndNamesTheCore) {
  engine::ExecJob job = Job(Copy(0), HostImage());
  job.other_programs.push_back(isa::Assemble("nop\nread_host host=0 ub=16384 rows=1\nhalt\n", "x"));
  const std::vector<engine::ExecResult> rs = RunBoth(job);
  for (const engine::ExecResult& r : rs) {
    SCOPED_TRACE(r.engine);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.state, engine::RunEnd::kError);
    EXPECT_EQ(r.cores[0].state, engine::RunEnd::kHalted);
    EXPECT_EQ(r.cores[1].state, engine::RunEnd::kError);
    EXPECT_EQ(r.chip_status, r.cores[1].chip_status);
    EXPECT_EQ(r.error_pc, 1u);
    EXPECT_EQ(r.message.rfind("core 1: the chip stopped at instruction 1", 0), 0u) << r.message;
  }
  if (rs.size() == 2) {
    EXPECT_EQ(rs[0].message, rs[1].message);
  }
}

// A barrier (docs/isa.md, "Several cores"): core 1 reads the rows core 0 writes to host memory
// only after both passed their barriers; with a nop in its place core 1 reads them before
// they are written. Both engines give the same counters on each core.
TEST(MultiCoreTest, ABarrierOrdersTheCoresThroughHostMemory) {
  for (const char* wait : {"barrier cores=3", "nop"}) {
    SCOPED_TRACE(wait);
    engine::ExecJob job =
        Job(fmt::format("read_host host=0x100 ub=0 rows=5\nwrite_host ub=0 host=0x1000 rows=5\n"
                        "{}\nhalt\n",
                        wait),
            HostImage(), {}, 0, 0x1200);
    job.other_programs.push_back(isa::Assemble(
        fmt::format("{}\nread_host host=0x1000 ub=0 rows=5\nwrite_host ub=0 host=0x1100 "
                    "rows=5\nhalt\n",
                    wait),
        "core1.asm"));
    const std::vector<engine::ExecResult> rs = RunBoth(job);
    for (const engine::ExecResult& r : rs) {
      SCOPED_TRACE(r.engine);
      ASSERT_TRUE(r.ok) << r.message;
      const bool copied = std::equal(r.host_out.begin() + 0x1100, r.host_out.begin() + 0x1114,
                                     r.host_out.begin() + 0x100);
      EXPECT_EQ(copied, std::string(wait) != "nop");
      if (std::string(wait) != "nop") {  // core 1 waited while core 0 moved its 10 rows
        EXPECT_GT(r.cores[1].counters.issue_stall_drain, 10u);
        EXPECT_GT(r.cores[1].cycles, r.cores[0].cycles);
      }
    }
    if (rs.size() == 2) {
      for (size_t c = 0; c < 2; ++c) {
        EXPECT_EQ(rs[0].cores[c].counters.FirstDifference(rs[1].cores[c].counters), -1) << c;
      }
    }
  }
}

// Each core has its own weight-memory port, and the ports share the memory's channel
// (docs/timing.md, "Chips of several cores"): both cores load two tiles (8 rows each) from the
// same weights. At 8 bytes a cycle (two 4-byte rows) both are served in every cycle and never
// wait; at teach-4's 4 bytes a cycle (one row) they take turns, each waiting while the other
// is served. The engines agree on every counter of each core.
void LoadTwoTilesOnEachCore(int weight_bytes_per_cycle, bool wait) {
  config::TpuConfig c = TwoCores();
  c.weight_mem_bytes_per_cycle = weight_bytes_per_cycle;
  const std::string load = "read_weights addr=0 tiles=2\nsync\nhalt\n";
  std::vector<uint8_t> weights(64);
  std::iota(weights.begin(), weights.end(), uint8_t{1});
  engine::ExecJob job = Job(load, {}, weights);
  job.other_programs.push_back(isa::Assemble(load, "core1.asm"));
  const std::vector<engine::ExecResult> rs = RunBoth(job, c);
  for (const engine::ExecResult& r : rs) {
    SCOPED_TRACE(r.engine);
    ASSERT_TRUE(r.ok) << r.message;
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(r.cores[k].counters.weight_bytes_read, 32u) << k;
      EXPECT_EQ(r.cores[k].counters.weight_mem_stall > 0, wait) << k;
    }
    // Taking turns, one core waits in each cycle in which both ask (8 rows each).
    if (wait) {
      EXPECT_GE(r.counters.weight_mem_stall, 8u);
    }
  }
  if (rs.size() == 2) {
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(rs[0].cores[k].counters.FirstDifference(rs[1].cores[k].counters), -1) << k;
      EXPECT_EQ(rs[0].cores[k].cycles, rs[1].cores[k].cycles) << k;
    }
  }
}

TEST(MultiCoreTest, TheWeightPortsShareTheChannelTwoRowsACycle) {
  LoadTwoTilesOnEachCore(8, false);
}

TEST(MultiCoreTest, TheWeightPortsShareTheChannelOneRowACycle) { LoadTwoTilesOnEachCore(4, true); }

// A barrier passes a core that has halted; one naming a core past the chip's last is a bad
// operand, on both engines.
TEST(MultiCoreTest, ABarrierPassesHaltedCoresAndRefusesCoresPastTheLast) {
  engine::ExecJob job = Job("halt\n", HostImage());
  job.other_programs.push_back(isa::Assemble("nop\nnop\nbarrier cores=3\nhalt\n", "core1.asm"));
  for (const engine::ExecResult& r : RunBoth(job)) {
    SCOPED_TRACE(r.engine);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.cores[1].counters.instructions, 4u);
  }
  engine::ExecJob bad = Job("barrier cores=4\nhalt\n", HostImage());
  for (const engine::ExecResult& r : RunBoth(bad)) {
    SCOPED_TRACE(r.engine);
    EXPECT_EQ(r.cores[0].state, engine::RunEnd::kError);
    EXPECT_EQ(r.chip_status, hw::Status::kBadOperand);
  }
}

// A timeline per core, written as one file with a process per core; runs laid end to end stay
// aligned across the cores.
TEST(MultiCoreTest, EachCoreHasItsTimelineInOneFile) {
  engine::ExecJob job = Job(Copy(0), HostImage());
  job.other_programs.push_back(isa::Assemble(Copy(1), "core1.asm"));
  auto chip = engine::MakeChipEngine(EngineKind::kFast, TwoCores(), {});
  engine::Timeline t0(700), t1(700);
  chip->SetTimeline(&t0, 0);
  chip->SetTimeline(&t1, 1);
  const engine::ExecResult first = chip->Run(job);
  const engine::ExecResult second = chip->Run(job);
  ASSERT_TRUE(first.ok && second.ok);
  const nlohmann::json j = t0.ToJson({&t1});
  std::map<int, int> issues;                    // per process: instructions issued
  std::map<int, std::vector<uint64_t>> starts;  // per process: the cycle of each run's first issue
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "tpusim chip, core " + std::to_string(e["pid"].get<int>() - 1));
    }
    if (e["ph"] != "X") continue;
    const int pid = e["pid"].get<int>();
    if (e["name"].get<std::string>().rfind("issue ", 0) == 0) ++issues[pid];
    if (e["name"] == "issue read_host") starts[pid].push_back(e["args"]["cycle"].get<uint64_t>());
  }
  EXPECT_EQ(issues, (std::map<int, int>{{1, 6}, {2, 6}}));  // 3 instructions, 2 runs
  // The second run starts the run's cycles after the first on both cores' axes.
  for (const int pid : {1, 2}) {
    ASSERT_EQ(starts[pid].size(), 2u) << pid;
    EXPECT_EQ(starts[pid][1] - starts[pid][0], first.cycles) << pid;
  }
}

TEST(MultiCoreTest, MoreProgramsThanCoresIsAUsageError) {
  engine::ExecJob job = Job("halt\n");
  job.other_programs.assign(2, isa::Assemble("halt\n", "x"));
  auto chip = engine::MakeChipEngine(EngineKind::kFast, TwoCores(), {});
  try {
    chip->Run(job);
    FAIL() << "a job of 3 programs ran on 2 cores";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("programs for 3 cores"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cores=3"), std::string::npos) << e.what();
  }
}

// A GEMM split over the two cores by rows and by columns (compiler::MakeGemmOnCores): right
// on both engines, the engines equal on every core's cycles and counters, and faster than one
// core on teach-4's memories.
class MultiCoreGemmTest : public ::testing::TestWithParam<compiler::CoreSplit> {};

TEST_P(MultiCoreGemmTest, IsRightOnBothEnginesAndFasterThanOneCore) {
  const bool rows = GetParam() == compiler::CoreSplit::kRows;
  const Matrix<int8_t> a = gemm::RandomInt8(61, 20, 1), b = gemm::RandomInt8(20, 11, 2);
  const compiler::GemmOnCores g = compiler::MakeGemmOnCores(a.rows, b, TwoCores(), GetParam());
  ASSERT_EQ(g.parts.size(), 2u);
  if (rows) {
    EXPECT_EQ(g.parts[0].m + g.parts[1].m, 61);
  } else {
    EXPECT_EQ(g.parts[0].cols, 4);  // 3 column tiles: 1 and 2
    EXPECT_EQ(g.parts[1].cols, 7);
  }
  const Matrix<int8_t> want = g.Expected(gemm::ReferenceGemm(a, b));
  std::vector<engine::ExecResult> rs;
  for (const auto& e : Engines()) {
    e->Load(g.exe);
    const compiler::GemmRun<int8_t> run = g.Run(*e, a);
    const engine::ExecResult& r = run.result;
    rs.push_back(r);
    SCOPED_TRACE(r.engine);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(run.c.data, want.data);
    // By rows, both cores stream all of B; by columns, each its own tiles.
    const uint64_t w0 = r.cores[0].counters.weight_bytes_read,
                   w1 = r.cores[1].counters.weight_bytes_read;
    if (rows) {
      EXPECT_EQ(w0, w1);
    } else {
      EXPECT_EQ(w0 * 2, w1);
    }
  }
  if (rs.size() == 2) {
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_EQ(rs[0].cores[c].cycles, rs[1].cores[c].cycles);
      EXPECT_EQ(rs[0].cores[c].counters.FirstDifference(rs[1].cores[c].counters), -1);
    }
  }
  const GemmProgram one = MakeGemmProgram(a.rows, b, config::LoadConfig("teach-4"));
  const auto fast = engine::MakeChipEngine(EngineKind::kFast, config::LoadConfig("teach-4"), {});
  const compiler::GemmRun<int8_t> one_run = LoadAndRun(*fast, one, a);
  const engine::ExecResult& alone = one_run.result;
  ASSERT_TRUE(alone.ok);
  EXPECT_EQ(one_run.c.data, want.data);
  EXPECT_LT(rs.back().cycles, alone.cycles);
  std::printf("one core %lu cycles, two cores %lu\n", alone.cycles, rs.back().cycles);
}

INSTANTIATE_TEST_SUITE_P(Splits, MultiCoreGemmTest,
                         ::testing::Values(compiler::CoreSplit::kRows,
                                           compiler::CoreSplit::kColumns),
                         [](const ::testing::TestParamInfo<compiler::CoreSplit>& i) {
                           return i.param == compiler::CoreSplit::kRows ? "Rows" : "Columns";
                         });

TEST(MultiCoreTest, RelocatingMovesHostAndWeightAddressesAcrossFourGiB) {
  isa::Program p = isa::Assemble(
      "read_host host=0x10 ub=0 rows=1\nread_weights addr=0xfffffff0 tiles=1\n"
      "write_host ub=0 host=0x20 rows=1\nmatmul ub=0 acc=0 rows=1\nhalt\n",
      "p.asm");
  const isa::Program q = compiler::Relocate(p, 0x1000, 0x20);
  EXPECT_EQ(isa::Disassemble(q),
            isa::Disassemble(isa::Assemble("read_host host=0x1010 ub=0 rows=1\n"
                                           "read_weights addr=0x100000010 tiles=1\n"
                                           "write_host ub=0 host=0x1020 rows=1\n"
                                           "matmul ub=0 acc=0 rows=1\nhalt\n",
                                           "q.asm")));
  EXPECT_THROW(compiler::Relocate(p, 0xffffffffu, 0), std::invalid_argument);
}

}  // namespace
}  // namespace tpu::test
