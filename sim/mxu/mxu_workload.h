// The stream of weight tiles and activation rows that a matrix-unit run consumes.
#pragma once

#include <cstdint>

namespace tpu::sim {

// What travels with an activation row through the array to the accumulators.
struct RowTag {
  uint32_t acc_addr = 0;    // accumulator row to write
  bool accumulate = false;  // add into the row instead of overwriting it
  bool final_fold = false;  // this write completes the row: read it out afterwards
  int64_t result_id = 0;    // caller's name for the completed row (final folds only)
};

// A sequence of tiles. Tile t is ArrayDim weight rows followed by RowsInTile(t)
// activation rows that multiply with them. Implemented by the host (e.g. a tiled GEMM).
class MxuWorkload {
 public:
  virtual ~MxuWorkload() = default;
  virtual int ArrayDim() const = 0;
  // Bytes of one operand: 1 for int8, 2 for bfloat16 (docs/bf16.md). Rows are ArrayDim
  // operands of this many bytes, little-endian, lane 0 first; results are int32 or float32
  // bit patterns.
  virtual int OperandBytes() const { return 1; }
  virtual int64_t NumTiles() const = 0;
  virtual int RowsInTile(int64_t tile) const = 0;
  // Row r (0 = top of the array) of tile's weights; writes ArrayDim operands.
  virtual void WeightRow(int64_t tile, int r, int8_t* out) const = 0;
  // Activation row m of tile; writes ArrayDim operands and the row's tag.
  virtual void ActRow(int64_t tile, int m, int8_t* out, RowTag* tag) const = 0;
  // A completed accumulator row (ArrayDim values) for a row tagged final_fold.
  virtual void TakeResult(int64_t result_id, const int32_t* row) = 0;
  // Number of rows tagged final_fold over the whole run.
  virtual int64_t NumResults() const = 0;
};

}  // namespace tpu::sim
