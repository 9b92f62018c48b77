// The vector unit's instruction (`vector`, docs/vpu.md "The vector unit") as the CPU
// reference computes it, bit for bit, on unified-buffer rows: the fast engine's values and
// the tests' expectations. A row of n lanes is one buffer row of n bfloat16 values, or two
// for float32 (the lanes' high halves, then their low halves).
#pragma once

#include <cstdint>

#include "contract/tpu_contract.h"

namespace tpu::arith {

// One lane of an operation of kind binary, unary or select: a, b and the result row's old
// value `old` as float32 (select: a is the mask).
uint32_t VectorLane(hw::VectorOp op, uint32_t a, uint32_t b, uint32_t old);

// A vector instruction's operands: rows `a`, `b` and `out` of the buffer, `rows` rows of a,
// the formats (float32 or bfloat16) and whether b is one row for all.
struct VectorInstr {
  hw::VectorOp op = hw::VectorOp::kAdd;
  uint64_t a = 0, b = 0, out = 0;
  uint32_t rows = 1;
  bool a32 = false, b32 = false, o32 = false, bcast = false;
};

// Runs it on `buffer`, rows of n lanes from row 0 (the result's rows the same as an
// operand's or apart from them, as the controller checks).
void VectorRun(const VectorInstr& v, uint16_t* buffer, int64_t n);

// Lane `lane` of row `row` of an operand at buffer row `first`, as float32 (canonical).
uint32_t VectorValue(const uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane,
                     bool fp32);
// Stores x into lane `lane` of that row: both halves, or rounded to bfloat16.
void VectorStore(uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane, bool fp32,
                 uint32_t x);

}  // namespace tpu::arith
