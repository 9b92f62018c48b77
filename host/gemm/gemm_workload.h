// A GEMM as a matrix-unit workload: weight tiles of B, activation rows of A, result
// rows scattered into C, following a GemmPlan.
#pragma once

#include <cstdint>

#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "sim/mxu/mxu_workload.h"

namespace tpu::gemm {

class GemmWorkload final : public sim::MxuWorkload {
 public:
  // a: M x K, b: K x N; c is resized to M x N and filled as results arrive.
  GemmWorkload(const GemmPlan& plan, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
               Matrix<int32_t>* c);

  int ArrayDim() const override { return plan_.array_dim; }
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
  const Matrix<int8_t>& a_;
  const Matrix<int8_t>& b_;
  Matrix<int32_t>* c_;
};

}  // namespace tpu::gemm
