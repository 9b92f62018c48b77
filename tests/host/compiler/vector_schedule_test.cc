// compiler::HoistVectorWork on programs built by hand: four products, each activated, then
// the vector unit's work on each product's rows (it moves up beside the later products,
// never before the activate that writes what it reads); and vector work on rows of its own
// before the products (they move up past it). The results are the same bytes, in fewer
// cycles, on both engines of a 4 x 4 bf16 chip (the RTL in the _rtl twin).
#include "host/compiler/vector_schedule.h"

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

class VectorScheduleTest : public ::testing::TestWithParam<engine::EngineKind> {};

TEST_P(VectorScheduleTest, VectorWorkMovesBesideTheProductsWithTheSameResults) {
  const config::TpuConfig c = Bf16Teach();
  const isa::Program before = Products(kParts);
  std::vector<int32_t> op_of(before.words.size());
  for (size_t i = 0; i < op_of.size(); ++i) op_of[i] = static_cast<int32_t>(i);
  const isa::Program after = compiler::HoistVectorWork(before, &op_of, c);
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
  const auto chip = test::TestEngine(GetParam(), c);
  const engine::ExecResult was = chip->Run(Job(before));
  const engine::ExecResult is = chip->Run(Job(after));
  ASSERT_TRUE(was.ok && is.ok) << was.message << is.message;
  EXPECT_EQ(is.host_out, was.host_out);
  EXPECT_LT(is.cycles, was.cycles);
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

TEST_P(VectorScheduleTest, ProductsMovePastVectorWorkTheyDoNotRead) {
  const config::TpuConfig c = Bf16Teach();
  const isa::Program before = VectorFirst();
  const isa::Program after = compiler::HoistVectorWork(before, nullptr, c);
  const size_t first_product = 4 + kParts, last_vector = 3 + kParts;
  EXPECT_LT(Position(after, before.words[first_product]),
            Position(after, before.words[last_vector]));
  const auto chip = test::TestEngine(GetParam(), c);
  const engine::ExecResult was = chip->Run(Job(before));
  const engine::ExecResult is = chip->Run(Job(after));
  ASSERT_TRUE(was.ok && is.ok) << was.message << is.message;
  EXPECT_EQ(is.host_out, was.host_out);
  EXPECT_LT(is.cycles, was.cycles);
}

// A program with no vector work to move, or one the controller refuses, stays as it is.
TEST(VectorScheduleRefusalTest, NothingToMoveOrARefusedInstructionLeavesTheProgram) {
  const config::TpuConfig c = Bf16Teach();
  const isa::Program none = Products(0);
  EXPECT_EQ(compiler::HoistVectorWork(none, nullptr, c).words, none.words);
  isa::Program bad = Products(kParts);
  isa::ProgramBuilder p;
  p.ReadHost(0, c.ub_depth_rows, 1);  // past the buffer
  bad.words.insert(bad.words.begin() + 1, p.Take().words[0]);
  EXPECT_EQ(compiler::HoistVectorWork(bad, nullptr, c).words, bad.words);
}

INSTANTIATE_TEST_SUITE_P(Engines, VectorScheduleTest, ::testing::ValuesIn(test::TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

}  // namespace
}  // namespace tpu
