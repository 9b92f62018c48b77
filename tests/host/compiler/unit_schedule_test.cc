// compiler::ScheduleUnits on programs built by hand: four products, each activated, then
// the vector unit's work on each product's rows (it moves up beside the later products,
// never before the activate that writes what it reads); vector work on rows of its own
// before the products (they move up past it); two matrix units' products one unit after
// the other (the second's move up beside the first's). The results are the same bytes, in
// fewer cycles, on both engines of a 4 x 4 bf16 chip (the RTL in the _rtl twin; its chip of
// two matrix units is built, TPUSIM_TPU_CHIPS 1x2x4bf16).
#include "host/compiler/unit_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "host/config/tpu_config.h"
#include "host/isa/program_builder.h"
#include "tests/test_engines.h"

namespace tpu {
namespace {

constexpr uint64_t kRows = 64, kParts = 4, kRowBytes = 8;  // a bf16 row of 4 lanes
constexpr uint64_t kX = 0, kTile = kRows, kOut = 128, kY = kOut + kParts * kRows;

config::TpuConfig Bf16Teach() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.dtype = hw::Dtype::kBf16;
  return c;
}

// Part k: X through one tile into accumulators, activated into out_k; then y_k = out_k^2
// for each part on the vector unit (`squares`: that many parts), and every y out to the host.
isa::Program Products(uint64_t squares) {
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  p.LoadWeights(kTile, 1, false);
  for (uint64_t k = 0; k < kParts; ++k) {
    p.Matmul(kX, k * kRows, kRows, k == 0, isa::Acc::kOverwrite);
    p.Activate(k * kRows, kOut + k * kRows, kRows, 0, false, isa::Pool::kNone);
  }
  for (uint64_t k = 0; k < squares; ++k) {
    const uint64_t out = kOut + k * kRows;
    p.Vector({hw::VectorOp::kMul, out, out, kY + k * kRows, kRows});
  }
  p.WriteHost(kY, 0, kParts * kRows);
  p.Halt();
  return p.Take();
}

engine::ExecJob Job(isa::Program program) {
  engine::ExecJob job;
  job.name = "products";
  job.program = std::move(program);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  job.host_image.resize((kRows + 4) * kRowBytes);
  for (size_t i = 0; i < job.host_image.size(); ++i)  // bf16 values of moderate size
    job.host_image[i] = static_cast<uint8_t>(i % 2 == 1 ? 0x3e + byte(rng) % 2 : byte(rng));
  job.host_out_bytes = kParts * kRows * kRowBytes;
  return job;
}

size_t Position(const isa::Program& p, const isa::Word& w) {
  return static_cast<size_t>(std::find(p.words.begin(), p.words.end(), w) - p.words.begin());
}

// The program reordered gives the same output bytes as before, in fewer cycles.
void SameResultsInFewerCycles(engine::EngineKind kind, const config::TpuConfig& c,
                              const isa::Program& before, const isa::Program& after) {
  const auto chip = test::TestEngine(kind, c);
  const engine::ExecResult was = chip->Run(Job(before));
  const engine::ExecResult is = chip->Run(Job(after));
  ASSERT_TRUE(was.ok && is.ok) << was.message << is.message;
  EXPECT_EQ(is.host_out, was.host_out);
  EXPECT_LT(is.cycles, was.cycles);
}

// The program of `p` ended (the parts' rows from `out` to the host, halt) and scheduled:
// its instruction `first` goes before `second`, with the same results in fewer cycles.
void EndScheduleAndCompare(isa::ProgramBuilder& p, uint64_t out, const config::TpuConfig& c,
                           size_t first, size_t second, engine::EngineKind kind) {
  p.WriteHost(out, 0, kParts * kRows);
  p.Halt();
  const isa::Program before = p.Take();
  const isa::Program after = compiler::ScheduleUnits(before, nullptr, c);
  EXPECT_LT(Position(after, before.words[first]), Position(after, before.words[second]));
  SameResultsInFewerCycles(kind, c, before, after);
}

class UnitScheduleTest : public ::testing::TestWithParam<engine::EngineKind> {};

TEST_P(UnitScheduleTest, VectorWorkMovesBesideTheProductsWithTheSameResults) {
  const config::TpuConfig c = Bf16Teach();
  const isa::Program before = Products(kParts);
  std::vector<int32_t> op_of(before.words.size());
  for (size_t i = 0; i < op_of.size(); ++i) op_of[i] = static_cast<int32_t>(i);
  const isa::Program after = compiler::ScheduleUnits(before, &op_of, c);
  // The same instructions, op_of moved with them.
  ASSERT_EQ(after.words.size(), before.words.size());
  for (size_t i = 0; i < after.words.size(); ++i)
    EXPECT_EQ(after.words[i], before.words[static_cast<size_t>(op_of[i])]) << i;
  // Each square after the activate it reads, and the first before the last product.
  for (uint64_t k = 0; k < kParts; ++k) {
    const size_t square = 3 + 2 * kParts + 1 + k;  // its place before
    const size_t activate = 3 + 2 + 2 * k;
    EXPECT_GT(Position(after, before.words[square]), Position(after, before.words[activate]));
  }
  EXPECT_LT(Position(after, before.words[3 + 2 * kParts + 1]),
            Position(after, before.words[3 + 1 + 2 * (kParts - 1)]));
  SameResultsInFewerCycles(GetParam(), c, before, after);
}

// Vector work on rows of its own (kC), emitted before four products: the products move up
// past it, with the same results in fewer cycles.
constexpr uint64_t kC = kY + kParts * kRows, kLong = 512;

isa::Program VectorFirst() {
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  p.LoadWeights(kTile, 1, false);
  for (uint64_t k = 0; k < kParts; ++k)
    p.Vector({hw::VectorOp::kMul, kC + k * kLong, kC + k * kLong, kC + k * kLong, kLong});
  for (uint64_t k = 0; k < kParts; ++k) {
    p.Matmul(kX, k * kRows, kRows, k == 0, isa::Acc::kOverwrite);
    p.Activate(k * kRows, kOut + k * kRows, kRows, 0, false, isa::Pool::kNone);
  }
  p.WriteHost(kOut, 0, kParts * kRows);
  p.Halt();
  return p.Take();
}

TEST_P(UnitScheduleTest, ProductsMovePastVectorWorkTheyDoNotRead) {
  const config::TpuConfig c = Bf16Teach();
  const isa::Program before = VectorFirst();
  const isa::Program after = compiler::ScheduleUnits(before, nullptr, c);
  const size_t first_product = 4 + kParts, last_vector = 3 + kParts;
  EXPECT_LT(Position(after, before.words[first_product]),
            Position(after, before.words[last_vector]));
  SameResultsInFewerCycles(GetParam(), c, before, after);
}

// Four products on matrix unit 0 and then four on unit 1 (config mxus_per_core = 2): unit
// 1's load and products move up beside unit 0's, with the same results in fewer cycles.
isa::Program TwoUnits() {
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  for (uint64_t u = 0; u < 2; ++u) {
    p.SetUnit(u);
    p.LoadWeights(kTile, 1, false);
    for (uint64_t k = 0; k < kParts; ++k)
      p.Matmul(kX, k * kRows, kRows, k == 0, isa::Acc::kOverwrite);
    for (uint64_t k = 0; k < kParts; ++k)
      p.Activate(k * kRows, kOut + (u * kParts + k) * kRows / 2, kRows / 2, 0, false,
                 isa::Pool::kNone);
  }
  p.WriteHost(kOut, 0, kParts * kRows);
  p.Halt();
  return p.Take();
}

TEST_P(UnitScheduleTest, TheSecondUnitsProductsMoveBesideTheFirsts) {
  config::TpuConfig c = Bf16Teach();
  c.mxus_per_core = 2;
  const isa::Program before = TwoUnits();
  const isa::Program after = compiler::ScheduleUnits(before, nullptr, c);
  const size_t unit1_load = 3 + 1 + 2 * kParts, unit0_last = 3 + kParts;
  EXPECT_LT(Position(after, before.words[unit1_load]), Position(after, before.words[unit0_last]));
  SameResultsInFewerCycles(GetParam(), c, before, after);
}

// Two products of 2 rows on matrix unit 0, the first one's rows activated, then unit 1's load
// and products (mxus_per_core = 2). The activate waits for unit 0's accumulators to drain, 2N
// cycles after the second product's last row: a product's rows merge with those of the one
// draining before it (fast/controller.h). By an estimate that knows it, unit 1's products go
// before the activate and need not wait behind it (without the drain, the estimate put it
// after the first). Same results in fewer cycles.
TEST_P(UnitScheduleTest, AnActivateWaitsForItsUnitsLastDrainInTheEstimate) {
  config::TpuConfig c = Bf16Teach();
  c.mxus_per_core = 2;
  constexpr uint64_t kR = 2;
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  p.LoadWeights(kTile, 1, false);
  p.Matmul(kX, 0, kR, true, isa::Acc::kOverwrite);
  p.Matmul(kX, kRows, kR, false, isa::Acc::kOverwrite);
  p.Activate(0, kOut, kR, 0, false, isa::Pool::kNone);
  p.SetUnit(1);
  p.LoadWeights(kTile, 1, false);
  for (uint64_t k = 1; k < kParts; ++k)
    p.Matmul(kX + k, k * kRows, kR, k == 1, isa::Acc::kOverwrite);
  for (uint64_t k = 1; k < kParts; ++k)
    p.Activate(k * kRows, kOut + k * kR, kR, 0, false, isa::Pool::kNone);
  p.SetUnit(0);
  const size_t activate = 6, unit1_last = 10;
  EndScheduleAndCompare(p, kOut, c, unit1_last, activate, GetParam());
}

// Two long vector instructions, then a short one whose rows a product reads: when the first
// long one ends, the second and the short one issue as soon by the estimate, and the short
// one goes first (Before), so that the product need not wait for the second long one. Same
// results in fewer cycles.
TEST_P(UnitScheduleTest, AShortVectorInstructionGoesBeforeALongOneThatIssuesAsSoon) {
  const config::TpuConfig c = Bf16Teach();
  constexpr uint64_t kLong = 1200, kFrom = 2048, kX2 = 1024, kAct = 1100;
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  p.LoadWeights(kTile, 1, false);
  p.Vector({hw::VectorOp::kAdd, kFrom, kFrom, 2 * kFrom, kLong});
  p.Vector({hw::VectorOp::kAdd, kFrom, kFrom, 4 * kFrom, kLong});
  p.Vector({hw::VectorOp::kMul, kX, kX, kX2, kRows});
  p.Matmul(kX2, 0, kRows, true, isa::Acc::kOverwrite);
  p.Activate(0, kAct, kRows, 0, false, isa::Pool::kNone);
  const size_t second_long = 5, short_one = 6;
  EndScheduleAndCompare(p, kAct, c, short_one, second_long, GetParam());
}

// A product, its rows written to the host, a read of the same rows back (it waits for the
// write: one host DMA), then a set_window and three more products. The set_window and the
// products go before the read, which would hold them: a set_window is no fence, only kept in
// order with the matrix unit's instructions (the controller retires it at once, and a matmul
// takes the window as it issues). Same results in fewer cycles.
void WindowThenProducts(isa::ProgramBuilder& p) {
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.ReadHost(kRows * kRowBytes, kTile, 4);
  p.LoadWeights(kTile, 1, false);
  p.Matmul(kX, 0, kRows, true, isa::Acc::kOverwrite);
  p.Activate(0, kOut, kRows, 0, false, isa::Pool::kNone);
  p.WriteHost(kOut, 0, kRows);
  p.ReadHost(0, kC, kRows);
  isa::WindowGeometry g;
  g.in_h = g.in_w = g.out_h = g.out_w = 8;
  g.channels = 4;
  g.pixel_bytes = kRowBytes;
  p.SetWindow(g);
  for (uint64_t k = 1; k < kParts; ++k) {
    p.Matmul(kX, k * kRows, kRows, false, isa::Acc::kOverwrite);
    p.Activate(k * kRows, kOut + k * kRows, kRows, 0, false, isa::Pool::kNone);
  }
}

TEST_P(UnitScheduleTest, AWindowSettingKeepsItsOrderWithTheProductsAlone) {
  const config::TpuConfig c = Bf16Teach();
  const size_t first_product = 4, read = 7, set_window = 8, next_product = 9;
  isa::ProgramBuilder p;
  WindowThenProducts(p);
  EndScheduleAndCompare(p, kOut, c, set_window, read, GetParam());
  WindowThenProducts(p);
  p.Halt();
  const isa::Program before = p.Take();
  const isa::Program after = compiler::ScheduleUnits(before, nullptr, c);
  EXPECT_LT(Position(after, before.words[first_product]),
            Position(after, before.words[set_window]));
  EXPECT_LT(Position(after, before.words[set_window]), Position(after, before.words[next_product]));
}

// A long read over the host link, a long vector instruction, a second read on the host DMA,
// then vector work on the long one's rows: by the estimate of one core, the second read issues
// before the long vector instruction ends, so it goes before the vector work; with two cores'
// programs on the one link (link_cores 2: each gets half of it), after. Both cores running the
// program on a two-core chip, that order takes fewer cycles: the second read, waiting for the
// first, no longer holds the vector work behind it. Same results. (The fast engine: the RTL's chips
// of two cores are built for tpu-v2's size and larger.)
TEST(UnitScheduleLinkTest, TwoCoresShareTheHostLinkInTheEstimate) {
  config::TpuConfig c = Bf16Teach();
  c.cores = 2;
  const auto rows = static_cast<uint64_t>(
      (c.HostRowCycles() * 1.5 * kRows + c.host_mem_latency_cycles) * c.vector_sublanes);
  isa::ProgramBuilder p;
  p.SetFormat(true);
  p.ReadHost(0, kX, kRows);
  p.Vector({hw::VectorOp::kAdd, kOut, kOut, kOut + rows, rows});
  p.ReadHost(0, kTile, 1);
  for (uint64_t k = 0; k < kParts; ++k)
    p.Vector({hw::VectorOp::kMul, kOut + rows, kOut + rows, kOut + 2 * rows + k * kRows, kRows});
  p.WriteHost(kOut + 2 * rows, 0, kParts * kRows);
  p.Halt();
  const isa::Program before = p.Take();
  const isa::Program one = compiler::ScheduleUnits(before, nullptr, c, 1);
  const isa::Program two = compiler::ScheduleUnits(before, nullptr, c, 2);
  const size_t second_read = 3, first_vector = 4;
  EXPECT_LT(Position(one, before.words[second_read]), Position(one, before.words[first_vector]));
  EXPECT_GT(Position(two, before.words[second_read]), Position(two, before.words[first_vector]));
  const auto chip = test::TestEngine(engine::EngineKind::kFast, c);
  const auto run = [&](const isa::Program& program) {
    engine::ExecJob job = Job(program);
    job.other_programs = {program};
    const engine::ExecResult r = chip->Run(job);
    EXPECT_TRUE(r.ok) << r.message;
    return r;
  };
  const engine::ExecResult a = run(one), b = run(two);
  EXPECT_EQ(b.host_out, a.host_out);
  EXPECT_LT(b.cycles, a.cycles);
}

// A program with an instruction the controller refuses stays as it is.
TEST(UnitScheduleRefusalTest, ARefusedInstructionLeavesTheProgram) {
  const config::TpuConfig c = Bf16Teach();
  isa::Program bad = Products(kParts);
  isa::ProgramBuilder p;
  p.ReadHost(0, c.ub_depth_rows, 1);  // past the buffer
  bad.words.insert(bad.words.begin() + 1, p.Take().words[0]);
  EXPECT_EQ(compiler::ScheduleUnits(bad, nullptr, c).words, bad.words);
}

INSTANTIATE_TEST_SUITE_P(Engines, UnitScheduleTest, ::testing::ValuesIn(test::TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

}  // namespace
}  // namespace tpu
