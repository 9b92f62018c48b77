// The two engines held equal (host/cosim/): random programs on every built RTL size, every
// job of a compiled MNIST batch, the shipped examples, and the comparison's own checks:
// it notices a difference anywhere, and a mismatch folder replays. Each test is its own
// process, so each can have its one RTL system.
#include "host/cosim/cosim.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/network_compiler.h"
#include "host/cosim/network_generator.h"
#include "host/cosim/program_generator.h"
#include "host/data/mnist.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/engine/timeline.h"
#include "host/isa/assembler.h"
#include "tests/mnist_test_util.h"

namespace tpu::cosim {
namespace {

using engine::EngineKind;

struct Engines {
  std::unique_ptr<engine::ChipEngine> rtl, fast;
};

Engines Make(const config::TpuConfig& c) {
  engine::EngineOptions o;
  o.watchdog_cycles = 20000;
  return {engine::MakeChipEngine(EngineKind::kRtl, c, o),
          engine::MakeChipEngine(EngineKind::kFast, c, o)};
}

// The config of the preset built for size n (teach-4, lab-8, small-16, edge-32).
std::string PresetFor(int n) {
  for (const std::string& p : config::PresetNames())
    if (config::LoadConfig(p).array_dim == n) return p;
  return "";
}

class CosimSizeTest : public ::testing::TestWithParam<int> {};

TEST_P(CosimSizeTest, TwoHundredRandomProgramsAgreeOnEverything) {
  const int n = GetParam();
  const std::vector<int> built = engine::RtlBuiltDims();
  if (std::find(built.begin(), built.end(), n) == built.end()) {
    GTEST_SKIP() << "no RTL of " << n << " x " << n << " in this build";
  }
  const std::string preset = PresetFor(n);
  ASSERT_FALSE(preset.empty());
  Engines e = Make(config::LoadConfig(preset));
  CosimOptions o;
  o.programs = 200;
  o.seed = 1000 + static_cast<uint64_t>(n);
  o.mismatch_dir = (std::filesystem::temp_directory_path() / "tpusim-cosim-test").string();
  const CosimSummary s = RunCosim(*e.rtl, *e.fast, o);
  EXPECT_EQ(s.programs, 200u);
  EXPECT_EQ(s.mismatches, 0u) << s.first_mismatch;
  // The programs end in every way a run can end.
  for (const char* ending :
       {"halted", "no-halt", "watchdog", "error: invalid-opcode", "error: address-out-of-range",
        "error: buffer-overflow", "error: bad-operand", "error: bad-window"}) {
    EXPECT_GT(s.endings.count(ending) ? s.endings.at(ending) : 0, 0u) << ending;
  }
  EXPECT_GT(s.endings.at("halted"), 100u);
}

INSTANTIATE_TEST_SUITE_P(BuiltSizes, CosimSizeTest, ::testing::Values(4, 8, 16, 32));

// Every layer job of an MNIST batch, on each engine: identical status, counters, outputs
// and timelines, job by job.
TEST(CosimTest, EveryJobOfACompiledMnistBatchAgrees) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet set = data::LoadMnist(dir, false, 16);
  const config::TpuConfig c = config::LoadConfig("small-16");
  Engines e = Make(c);
  std::vector<int8_t> act;
  for (int64_t i = 0; i < 16 * m.input.Size(); ++i)
    act.push_back(arith::QuantizePixel(set.pixels[static_cast<size_t>(i)]));
  int jobs = 0;
  for (const compiler::LayerStep& step : compiler::PlanSteps(m)) {
    const compiler::LayerCompiler lc(m, step, c);
    const Outcome out = RunBoth(*e.rtl, *e.fast, lc.Build(act, 16).exec);
    ASSERT_TRUE(out.rtl.ok) << out.rtl.message;
    EXPECT_EQ(out.difference, "") << step.Name(m);
    act = lc.Decode(out.fast.host_out, 16);
    ++jobs;
  }
  EXPECT_EQ(jobs, 5);
}

// The whole-network program of a batch (window convolutions, strided activations, stacked
// dense windows): identical status, counters, outputs and timelines.
TEST(CosimTest, TheWholeNetworkProgramAgrees) {
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const config::TpuConfig c = config::LoadConfig("small-16");
  const compiler::NetworkCompiler nc(m, c, 16);
  ASSERT_TRUE(nc.Fits()) << nc.WhyNot();
  std::mt19937 rng(4);
  std::vector<int8_t> act(static_cast<size_t>(16 * m.input.Size()));
  for (size_t i = 0; i < act.size(); ++i) {  // 28 x 28 inside the zero border of mnist32
    const size_t y = i % 1024 / 32, x = i % 32;
    if (y >= 2 && y < 30 && x >= 2 && x < 30) act[i] = static_cast<int8_t>(rng() % 128);
  }
  Engines e = Make(c);
  const Outcome out = RunBoth(*e.rtl, *e.fast, nc.Build(act, 16).exec);
  ASSERT_TRUE(out.rtl.ok) << out.rtl.message;
  EXPECT_EQ(out.difference, "");
  EXPECT_GT(out.rtl.counters.macs, 0u);
}

std::vector<uint8_t> Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(CosimTest, ThePoolingExampleAgrees) {
  const std::string ex = TPUSIM_SOURCE_DIR "/examples/";
  Engines e = Make(config::LoadConfig("teach-4"));
  engine::ExecJob job;
  std::ifstream f(ex + "pool_layer.asm");
  job.program = isa::Assemble(std::string(std::istreambuf_iterator<char>(f), {}), "pool");
  job.host_image = Bytes(ex + "pool_layer.host.bin");
  job.weight_image = Bytes(ex + "pool_layer.weights.bin");
  job.host_out_addr = 0x200;
  job.host_out_bytes = 16;
  const Outcome o = RunBoth(*e.rtl, *e.fast, job);
  EXPECT_EQ(o.difference, "");
  EXPECT_EQ(o.fast.host_out, Bytes(ex + "pool_layer.expected.bin"));
}

TEST(CosimTest, TheDenseLayerExampleAgrees) {
  const std::string ex = TPUSIM_SOURCE_DIR "/examples/";
  Engines e = Make(config::LoadConfig("small-16"));
  engine::ExecJob job;
  std::ifstream f(ex + "dense_layer.asm");
  job.program = isa::Assemble(std::string(std::istreambuf_iterator<char>(f), {}), "dense");
  job.host_image = Bytes(ex + "dense_layer.host.bin");
  job.weight_image = Bytes(ex + "dense_layer.weights.bin");
  job.host_out_addr = 0x2000;
  job.host_out_bytes = 1024;
  const Outcome o = RunBoth(*e.rtl, *e.fast, job);
  EXPECT_EQ(o.difference, "");
  EXPECT_EQ(o.fast.host_out, Bytes(ex + "dense_layer.expected.bin"));
}

// The comparison notices a difference in each thing it compares.
TEST(CosimTest, CompareNoticesEveryKindOfDifference) {
  engine::ExecResult a;
  a.state = engine::RunEnd::kHalted;
  a.chip_status = hw::Status::kOk;
  a.counters.cycles = 100;
  a.counters.macs = 64;
  a.host_out = {1, 2, 3};
  EXPECT_EQ(Compare(a, a), "");
  auto changed = [&](auto edit) {
    engine::ExecResult b = a;
    edit(b);
    return Compare(a, b);
  };
  EXPECT_NE(changed([](auto& b) { b.state = engine::RunEnd::kWatchdog; }).find("ended as"),
            std::string::npos);
  EXPECT_NE(changed([](auto& b) { b.chip_status = hw::Status::kBadOperand; }).find("status"),
            std::string::npos);
  EXPECT_NE(changed([](auto& b) { b.error_pc = 3; }).find("error_pc"), std::string::npos);
  EXPECT_NE(
      changed([](auto& b) { b.counters.ub_reads = 1; }).find("counter ub_reads is 0 on rtl, 1"),
      std::string::npos);
  EXPECT_NE(changed([](auto& b) { b.host_out[2] = 9; }).find("host memory byte 2"),
            std::string::npos);
  EXPECT_NE(changed([](auto& b) { b.message = "x"; }).find("message"), std::string::npos);
}

// A mismatch folder holds everything to run the job again, and replays to the same result.
TEST(CosimTest, MismatchFoldersRoundTrip) {
  const config::TpuConfig c = config::LoadConfig("teach-4");
  const ProgramGenerator gen(c, 5);
  const GeneratedProgram g = gen.Make(3);
  Outcome out;
  out.difference = "made up for the test";
  const auto dir = std::filesystem::temp_directory_path() / "tpusim-mismatch-roundtrip";
  std::filesystem::remove_all(dir);
  WriteMismatch(dir.string(), g.job, out, c);
  config::TpuConfig back;
  const engine::ExecJob job = ReadMismatch(dir.string(), &back);
  EXPECT_EQ(back.ToJson(), c.ToJson());
  EXPECT_EQ(job.program.words, g.job.program.words);
  EXPECT_EQ(job.host_image, g.job.host_image);
  EXPECT_EQ(job.weight_image, g.job.weight_image);
  EXPECT_EQ(job.host_out_bytes, g.job.host_out_bytes);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(ReadMismatch(dir.string(), &back), UsageError);
}

// The generator is deterministic: the same seed and index give the same program.
TEST(CosimTest, GeneratedProgramsAreReproducible) {
  const config::TpuConfig c = config::LoadConfig("small-16");
  const ProgramGenerator a(c, 9), b(c, 9), other(c, 10);
  EXPECT_EQ(a.Make(17).job.program.words, b.Make(17).job.program.words);
  EXPECT_EQ(a.Make(17).job.host_image, b.Make(17).job.host_image);
  EXPECT_NE(a.Make(17).job.program.words, other.Make(17).job.program.words);
}

// Two runs of a network differ where any counter of the chip differs: the chip's cycles, a
// layer row's counters, one core's share of them, the units' busy cycles (issue 71: the
// random networks compared the rows' sums only).
TEST(CosimTest, NetworkRunsDifferWhereAnyCounterDoes) {
  run::TpuRunResult a;
  a.plan = "whole network";
  a.chip_cycles = 100;
  run::LayerStats row;
  row.name = "conv1";
  row.counters.cycles = 180;
  row.cores.resize(2);
  row.cores[0].counters.cycles = 100;
  row.cores[1].counters.cycles = 80;
  row.mxu_busy = {60, 40};
  a.layers.push_back(row);
  EXPECT_EQ(CompareRuns(a, a), "");
  run::TpuRunResult b = a;
  b.chip_cycles = 101;
  EXPECT_NE(CompareRuns(a, b).find("the chip's cycles"), std::string::npos);
  b = a;
  b.layers[0].cores[0].counters.cycles = 101;
  b.layers[0].cores[1].counters.cycles = 79;  // the row's sum unchanged
  EXPECT_NE(CompareRuns(a, b).find("core 0"), std::string::npos);
  b = a;
  b.layers[0].mxu_busy = {50, 50};
  EXPECT_NE(CompareRuns(a, b).find("busy cycles"), std::string::npos);
  b = a;
  b.layers[0].counters.macs = 1;
  EXPECT_NE(CompareRuns(a, b).find("layer row 'conv1'"), std::string::npos);
}

}  // namespace
}  // namespace tpu::cosim
