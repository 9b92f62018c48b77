// An executable loaded once and run many times (host/engine/executable.h, ChipEngine::Load,
// Write, Run, Read) on both engines: inputs rewritten alone between runs, memories that
// keep what they hold across runs and loads, regions checked by name and size.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/isa/assembler.h"

namespace tpu::test {
namespace {

using engine::EngineKind;
using engine::Executable;
using engine::Memory;

constexpr uint64_t kRows = 24;
constexpr uint64_t kRowBytes = 16;  // small-16: 16 int8 lanes
constexpr uint64_t kBytes = kRows * kRowBytes;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Copies `from` to `to` through the unified buffer.
Executable Copy(const std::string& from, uint64_t from_addr, const std::string& to,
                uint64_t to_addr) {
  Executable exe;
  exe.name = "copy " + from + " to " + to;
  exe.programs.push_back(isa::Assemble("read_host host=" + std::to_string(from_addr) +
                                           " ub=0 rows=" + std::to_string(kRows) +
                                           "\nwrite_host ub=0 host=" + std::to_string(to_addr) +
                                           " rows=" + std::to_string(kRows) + "\nhalt\n",
                                       "copy.asm"));
  exe.regions = {{from, Memory::kHost, from_addr, kBytes, {}},
                 {to, Memory::kHost, to_addr, kBytes, {}}};
  return exe;
}

class ExecutableTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  std::unique_ptr<engine::ChipEngine> chip_ =
      engine::MakeChipEngine(GetParam(), config::LoadConfig("small-16"), {});
};

TEST_P(ExecutableTest, OnlyTheInputsAreWrittenBetweenRuns) {
  chip_->Load(Copy("in", 0, "out", 0x1000));
  uint64_t cycles = 0;
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const std::vector<uint8_t> in = RandomBytes(kBytes, seed);
    chip_->Write("in", in);
    const engine::ExecResult r = chip_->Run();
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_TRUE(r.host_out.empty()) << "a run reads nothing back unless asked";
    EXPECT_EQ(chip_->Read("out"), in) << "run " << seed;
    EXPECT_EQ(r.counters.host_bytes_read, kBytes);
    if (seed > 1) {
      EXPECT_EQ(r.cycles, cycles) << "the same program, the same timing";
    }
    cycles = r.cycles;
  }
}

TEST_P(ExecutableTest, MemoriesKeepWhatTheyHoldAcrossRunsAndLoads) {
  const std::vector<uint8_t> in = RandomBytes(kBytes, 7);
  chip_->Load(Copy("in", 0, "out", 0x1000));
  chip_->Write("in", in);
  ASSERT_TRUE(chip_->Run().ok);
  // A second run and a second executable, nothing written: they find what the first left.
  ASSERT_TRUE(chip_->Run().ok);
  EXPECT_EQ(chip_->Read("out"), in);
  chip_->Load(Copy("state", 0x1000, "copy", 0x2000));
  ASSERT_TRUE(chip_->Run().ok);
  EXPECT_EQ(chip_->Read("copy"), in);
  EXPECT_EQ(chip_->Read("state"), in);
}

TEST_P(ExecutableTest, RegionsAreCheckedByNameAndSize) {
  auto error = [](auto&& f) {
    try {
      f();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error([&] { chip_->Run(); }).find("no executable is loaded"), std::string::npos);
  chip_->Load(Copy("in", 0, "out", 0x1000));
  EXPECT_NE(
      error([&] { chip_->Write("inputs", {1}); }).find("has no region 'inputs' (it has: in, out)"),
      std::string::npos);
  EXPECT_NE(error([&] {
              chip_->Write("in", std::vector<uint8_t>(kBytes + 1));
            }).find("do not fit region 'in'"),
            std::string::npos);
  Executable past = Copy("in", 0, "out", 0x1000);
  past.regions.push_back({"far", Memory::kWeight, 1ull << 40, 16, {}});
  EXPECT_NE(error([&] { chip_->Load(past); }).find("region 'far'"), std::string::npos);
  EXPECT_NE(error([&] { chip_->Load(Executable{}); }).find("has no program"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Engines, ExecutableTest,
                         ::testing::Values(EngineKind::kRtl, EngineKind::kFast),
                         [](const auto& info) {
                           return info.param == EngineKind::kRtl ? "rtl" : "fast";
                         });

}  // namespace
}  // namespace tpu::test
