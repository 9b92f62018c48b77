// The fast engine on its own (fast/fast_chip.cc, fast/chip_values.cc): array sizes and
// buffer depths without an RTL build, values against Eigen, timing-only runs, independence
// of timing from data, memory timing, parallel jobs, and configs it cannot honour.
// (Equality with the RTL is tests/host/cosim/cosim_test.cc's job.)
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <thread>

#include "host/common/errors.h"
#include "host/compiler/gemm_program.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/gemm/gemm_runner.h"
#include "host/isa/assembler.h"

namespace tpu::test {
namespace {

using engine::EngineKind;
using engine::ExecJob;
using engine::ExecResult;

config::TpuConfig Config(int n) {
  config::TpuConfig c = config::LoadConfig(n >= 256 ? "tpu-v1" : "small-16");
  c.array_dim = n;
  c.name = "test-" + std::to_string(n);
  return c;
}

std::unique_ptr<engine::ChipEngine> Fast(const config::TpuConfig& c, bool timing_only) {
  engine::EngineOptions o;
  o.timing_only = timing_only;
  return engine::MakeChipEngine(EngineKind::kFast, c, o);
}

ExecResult RunFast(const config::TpuConfig& c, const ExecJob& job, bool timing_only = false) {
  return Fast(c, timing_only)->Run(job);
}

// GEMM program g run with A on a fast engine of its own.
compiler::GemmRun<int8_t> RunFast(const config::TpuConfig& c, const compiler::GemmProgram& g,
                                  const Matrix<int8_t>& a, bool timing_only = false) {
  const auto e = Fast(c, timing_only);
  e->Load(g.exe);
  return g.Run(*e, a);
}

class FastChipSizeTest : public ::testing::TestWithParam<int> {};

// Sizes the RTL is not built for, odd ones included, up to the largest the engine takes.
TEST_P(FastChipSizeTest, TiledGemmEqualsEigenAtAnySize) {
  const int n = GetParam();
  const int64_t m = n >= 256 ? 300 : 37, k = n + n / 2 + 1, cols = 2 * n - 1;
  const Matrix<int8_t> a = gemm::RandomInt8(m, k, 100 + static_cast<uint64_t>(n));
  const Matrix<int8_t> b = gemm::RandomInt8(k, cols, 200 + static_cast<uint64_t>(n));
  const compiler::GemmProgram g = compiler::MakeGemmProgram(m, b, Config(n));
  const compiler::GemmRun<int8_t> run = RunFast(Config(n), g, a);
  const ExecResult& r = run.result;
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.engine, "fast");
  EXPECT_EQ(run.c.data, g.Expected(gemm::ReferenceGemm(a, b)).data);
  EXPECT_EQ(r.counters.macs, static_cast<uint64_t>(g.kt * g.nt * m * n * n));
  EXPECT_EQ(r.counters.weight_tiles, static_cast<uint64_t>(g.kt * g.nt));
  EXPECT_EQ(r.counters.mxu_stream_cycles + r.counters.mxu_load_cycles +
                r.counters.mxu_stall_weights + r.counters.mxu_drain_cycles +
                r.counters.mxu_idle_cycles,
            r.cycles);
}

INSTANTIATE_TEST_SUITE_P(Sizes, FastChipSizeTest,
                         ::testing::Values(2, 3, 5, 12, 64, 100, 256, 512));

// The counters of a run do not depend on the values it moves (docs/timing.md says so on
// the strength of this test): the same program with other data, and with no data at all.
TEST(FastChipTest, TimingDoesNotDependOnData) {
  const int n = 16;
  std::vector<hw::ChipCounters> runs;
  for (uint64_t seed : {1, 2, 3}) {
    Matrix<int8_t> a = gemm::RandomInt8(70, 40, seed);
    if (seed == 3) std::fill(a.data.begin(), a.data.end(), 0);  // all zeros
    const Matrix<int8_t> b = gemm::RandomInt8(40, 33, seed + 10);
    const compiler::GemmProgram g = compiler::MakeGemmProgram(a.rows, b, Config(n), seed);
    const ExecResult r = RunFast(Config(n), g, a).result;
    ASSERT_TRUE(r.ok) << r.message;
    runs.push_back(r.counters);
    const compiler::GemmRun<int8_t> t = RunFast(Config(n), g, a, /*timing_only=*/true);
    ASSERT_TRUE(t.result.ok) << t.result.message;
    EXPECT_EQ(t.result.counters, r.counters);
    EXPECT_TRUE(t.c.data.empty());
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

// Every config field the engine models changes what it should: memory latency and
// bandwidth the cycles, the FIFO depth the weight DMA's stalls.
TEST(FastChipTest, MemoryTimingAndFifoDepthShowInTheCounters) {
  auto run = [](int bytes_per_cycle, int latency) {
    config::TpuConfig c = config::LoadConfig("teach-4");
    c.host_mem_bytes_per_cycle = bytes_per_cycle;
    c.host_mem_latency_cycles = latency;
    ExecJob job;
    job.program = isa::Assemble("read_host host=0 ub=0 rows=64\nhalt\n", "t");
    job.host_image.assign(256, 1);
    return RunFast(c, job);
  };
  const ExecResult slow = run(1, 30), fast = run(4, 0);
  ASSERT_TRUE(slow.ok && fast.ok);
  // 64 rows of 4 bytes at 1 byte per cycle: 4 cycles of channel per row, plus the latency.
  EXPECT_GE(slow.cycles, 64u * 4u + 30u);
  EXPECT_LE(slow.cycles, 64u * 4u + 30u + 8u);
  EXPECT_LT(fast.cycles, 64u + 10u);

  const Matrix<int8_t> a = gemm::RandomInt8(8, 64, 5), b = gemm::RandomInt8(64, 64, 6);
  const compiler::GemmProgram g = compiler::MakeGemmProgram(a.rows, b, Config(16));
  config::TpuConfig one = Config(16), eight = Config(16);
  one.weight_fifo_tiles = 1;
  eight.weight_fifo_tiles = 8;
  const compiler::GemmRun<int8_t> r1 = RunFast(one, g, a), r8 = RunFast(eight, g, a);
  ASSERT_TRUE(r1.result.ok && r8.result.ok);
  EXPECT_EQ(r1.c.data, r8.c.data);
  EXPECT_GT(r1.result.counters.weight_dma_stall_fifo_full,
            r8.result.counters.weight_dma_stall_fifo_full);
}

// Independent jobs on engines of their own run in parallel and give what they give alone.
TEST(FastChipTest, EnginesOnSeveralThreadsAgreeWithSequentialRuns) {
  std::vector<compiler::GemmProgram> programs;
  std::vector<Matrix<int8_t>> as;
  std::vector<config::TpuConfig> configs;
  for (int i = 0; i < 4; ++i) {
    const int n = 4 << i;  // 4, 8, 16, 32
    as.push_back(gemm::RandomInt8(50, 3 * n, i));
    const Matrix<int8_t> b = gemm::RandomInt8(3 * n, 2 * n, i + 9);
    programs.push_back(compiler::MakeGemmProgram(50, b, Config(n)));
    configs.push_back(Config(n));
  }
  const size_t count = programs.size();
  std::vector<compiler::GemmRun<int8_t>> alone, together(count);
  for (size_t i = 0; i < count; ++i) alone.push_back(RunFast(configs[i], programs[i], as[i]));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] { together[i] = RunFast(configs[i], programs[i], as[i]); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(together[i].result.counters, alone[i].result.counters) << i;
    EXPECT_EQ(together[i].c.data, alone[i].c.data) << i;
    EXPECT_FALSE(alone[i].c.data.empty()) << i;
  }
}

TEST(FastChipTest, ConfigsItCannotHonourAreErrorsNamingTheField) {
  config::TpuConfig c = Config(16);
  c.array_dim = 513;
  try {
    engine::MakeChipEngine(EngineKind::kFast, c, {});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("array_dim"), std::string::npos) << e.what();
  }
  engine::EngineOptions o;
  o.trace_path = "x.fst";
  EXPECT_THROW(engine::MakeChipEngine(EngineKind::kFast, Config(16), o), UsageError);
}

TEST(FastChipTest, ImagesThatDoNotFitAreUsageErrorsLikeOnTheRtl) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  ExecJob job;
  job.program = isa::Assemble("halt\n", "t");
  job.host_image.assign(static_cast<size_t>(c.host_mem_bytes) + 1, 0);
  EXPECT_THROW(RunFast(c, job), UsageError);
  job.host_image.clear();
  job.host_out_addr = static_cast<uint64_t>(c.host_mem_bytes);
  job.host_out_bytes = 1;
  EXPECT_THROW(RunFast(c, job), UsageError);
}

}  // namespace
}  // namespace tpu::test
