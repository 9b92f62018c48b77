// Weights through the unified buffer (host/compiler/emit/weight_staging.h): the rewrite of a
// program's read_weights into read_hbm + load_weights, instruction by instruction.
#include "host/compiler/emit/weight_staging.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "host/isa/assembler.h"

namespace tpu::compiler::emit {
namespace {

constexpr int64_t kN = 4, kRow = 8;  // a 4 x 4 bf16 array: a tile is 4 rows of 8 bytes

// `text` assembled, each line the operation given in `ops`, rewritten with staging rows
// from 100 (slots of 4 tiles, two per unit); the disassembly and each line's operation.
std::pair<std::string, std::vector<int32_t>> Staged(const std::string& text,
                                                    std::vector<int32_t> ops) {
  EmittedProgram e;
  e.program = isa::Assemble(text, "test.asm");
  e.op_of = std::move(ops);
  StageWeights(&e, {100, 4, 2}, kN, kRow);
  return {isa::Disassemble(e.program), e.op_of};
}

TEST(WeightStagingTest, EachReadBecomesAnHbmReadIntoItsUnitsNextSlotAndALoad) {
  // Unit 0's reads take its slots 100 and 116 in turn, unit 1's 132 and 148; a unit's next
  // read_hbm follows its load before (the first goes just before its own load).
  const auto [text, ops] = Staged(
      "read_weights addr=0 tiles=1\n"
      "matmul ub=0 acc=0 rows=4 switch\n"
      "read_weights addr=0x80 tiles=2 mxu=1\n"
      "matmul ub=0 acc=0 rows=4 switch mxu=1\n"
      "read_weights addr=0x20 tiles=1\n"
      "matmul ub=4 acc=0 rows=4 switch\n"
      "read_weights addr=0x40 tiles=1\n"
      "matmul ub=8 acc=0 rows=4 switch\n"
      "halt\n",
      {0, 0, 1, 1, 2, 2, 3, 3, -1});
  EXPECT_EQ(text,
            "read_hbm addr=0x0 ub=100 rows=4\n"
            "load_weights ub=100 tiles=1\n"
            "read_hbm addr=0x20 ub=116 rows=4\n"
            "matmul ub=0 acc=0 rows=4 switch\n"
            "read_hbm addr=0x80 ub=132 rows=8\n"
            "load_weights ub=132 tiles=2 mxu=1\n"
            "matmul ub=0 acc=0 rows=4 mxu=1 switch\n"
            "load_weights ub=116 tiles=1\n"
            "read_hbm addr=0x40 ub=100 rows=4\n"
            "matmul ub=4 acc=0 rows=4 switch\n"
            "load_weights ub=100 tiles=1\n"
            "matmul ub=8 acc=0 rows=4 switch\n"
            "halt\n");
  // Each new instruction belongs to the operation of the read it came from.
  EXPECT_EQ(ops, (std::vector<int32_t>{0, 0, 2, 0, 1, 1, 1, 2, 3, 2, 3, 3, -1}));
}

TEST(WeightStagingTest, AReadLongerThanASlotGoesInPiecesEachBeforeTheSwitchOfThePieceBefore) {
  // Six tiles in slots of four: tiles 4-5 load just before the switch that takes tile 0
  // (the first piece's first), once the first piece's four tiles are in the FIFO.
  std::string matmuls = "matmul ub=0 acc=0 rows=4 switch\n";
  for (int k = 1; k < 6; ++k)
    matmuls += "matmul ub=" + std::to_string(4 * k) + " acc=0 rows=4 switch accumulate\n";
  const auto [text, ops] =
      Staged("read_weights addr=0 tiles=6\n" + matmuls + "halt\n", {5, 5, 5, 5, 5, 5, 5, -1});
  EXPECT_EQ(text,
            "read_hbm addr=0x0 ub=100 rows=16\n"
            "load_weights ub=100 tiles=4\n"
            "read_hbm addr=0x80 ub=116 rows=8\n"
            "load_weights ub=116 tiles=2\n" +
                matmuls + "halt\n");
  std::vector<int32_t> want(10, 5);
  want.push_back(-1);
  EXPECT_EQ(ops, want);
}

TEST(WeightStagingTest, APieceStillWaitingGoesBeforeTheUnitsNextRead) {
  // Ten tiles (pieces of 4, 4, 2): the third piece waits for the switch of tile 4, but the
  // unit's next read comes first, and tiles must reach the FIFO in order.
  std::string text = "read_weights addr=0 tiles=10\n";
  for (int k = 0; k < 3; ++k) text += "matmul ub=0 acc=0 rows=4 switch\n";
  text += "read_weights addr=0x200 tiles=1\nhalt\n";
  const auto [got, ops] = Staged(text, std::vector<int32_t>(6, 0));
  EXPECT_EQ(got,
            "read_hbm addr=0x0 ub=100 rows=16\n"
            "load_weights ub=100 tiles=4\n"
            "read_hbm addr=0x80 ub=116 rows=16\n"
            "load_weights ub=116 tiles=4\n"
            "read_hbm addr=0x100 ub=100 rows=8\n"
            "matmul ub=0 acc=0 rows=4 switch\n"
            "matmul ub=0 acc=0 rows=4 switch\n"
            "matmul ub=0 acc=0 rows=4 switch\n"
            "load_weights ub=100 tiles=2\n"
            "read_hbm addr=0x200 ub=116 rows=4\n"
            "load_weights ub=116 tiles=1\n"
            "halt\n");
}

TEST(WeightStagingTest, NoStagingRowsLeavesTheProgramAsItIs) {
  EmittedProgram e;
  e.program = isa::Assemble("read_weights addr=0 tiles=1\nhalt\n", "test.asm");
  e.op_of = {0, -1};
  StageWeights(&e, {-1, 4, 2}, kN, kRow);
  EXPECT_EQ(isa::Disassemble(e.program), "read_weights addr=0x0 tiles=1\nhalt\n");
}

}  // namespace
}  // namespace tpu::compiler::emit
