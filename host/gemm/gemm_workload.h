// A GEMM as a matrix-unit workload: weight tiles of B, activation rows of A, result
// rows scattered into C, following a GemmPlan. T is the operand: int8_t, or uint16_t for
// bfloat16 bit patterns (C then holds float32 bit patterns).
#pragma once

#include <cstdint>

#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "sim/mxu/mxu_workload.h"

namespace tpu::gemm {

template <class T>
class GemmWorkloadOf final : public sim::MxuWorkload {
 public:
  // a: M x K, b: K x N; c is resized to M x N and filled as results arrive.
  GemmWorkloadOf(const GemmPlan& plan, const Matrix<T>& a, const Matrix<T>& b, Matrix<int32_t>* c);

  int ArrayDim() const override { return plan_.array_dim; }
  int OperandBytes() const override { return sizeof(T); }
  int64_t NumTiles() const override { return plan_.tiles; }
  int RowsInTile(int64_t tile) const override;
  void WeightRow(int64_t tile, int r, int8_t* out) const override;
  void ActRow(int64_t tile, int m, int8_t* out, sim::RowTag* tag) const override;
  void TakeResult(int64_t result_id, const int32_t* row) override;
  int64_t NumResults() const override;

 private:
  struct TileIndex {
    int64_t chunk, n, k;
  };
  TileIndex Index(int64_t tile) const;

  GemmPlan plan_;
  const Matrix<T>& a_;
  const Matrix<T>& b_;
  Matrix<int32_t>* c_;
};

using GemmWorkload = GemmWorkloadOf<int8_t>;
using Bf16GemmWorkload = GemmWorkloadOf<uint16_t>;

}  // namespace tpu::gemm
