// A GEMM as a matrix-unit workload (see gemm_workload.h).
#include "host/gemm/gemm_workload.h"

#include <algorithm>

namespace tpu::gemm {

template <class T>
GemmWorkloadOf<T>::GemmWorkloadOf(const GemmPlan& plan, const Matrix<T>& a, const Matrix<T>& b,
                                  Matrix<int32_t>* c)
    : plan_(plan), a_(a), b_(b), c_(c) {
  c_->rows = plan.shape.m;
  c_->cols = plan.shape.n;
  c_->data.assign(static_cast<size_t>(c_->rows * c_->cols), 0);
}

template <class T>
typename GemmWorkloadOf<T>::TileIndex GemmWorkloadOf<T>::Index(int64_t tile) const {
  TileIndex t;
  t.k = tile % plan_.k_tiles;
  t.n = (tile / plan_.k_tiles) % plan_.n_tiles;
  t.chunk = tile / (plan_.k_tiles * plan_.n_tiles);
  return t;
}

template <class T>
int GemmWorkloadOf<T>::RowsInTile(int64_t tile) const {
  return static_cast<int>(plan_.RowsInChunk(Index(tile).chunk));
}

template <class T>
void GemmWorkloadOf<T>::WeightRow(int64_t tile, int r, int8_t* bytes) const {
  T* out = reinterpret_cast<T*>(bytes);
  // PE row r holds B[k0 + r][n0 .. n0 + dim); zero beyond the matrix.
  const TileIndex t = Index(tile);
  const int dim = plan_.array_dim;
  const int64_t kk = t.k * dim + r;
  const int64_t n0 = t.n * dim;
  std::fill(out, out + dim, T{0});
  if (kk >= b_.rows) return;
  const int64_t cols = std::min<int64_t>(dim, b_.cols - n0);
  std::copy_n(&b_.at(kk, n0), cols, out);
}

template <class T>
void GemmWorkloadOf<T>::ActRow(int64_t tile, int m, int8_t* bytes, sim::RowTag* tag) const {
  T* out = reinterpret_cast<T*>(bytes);
  // Lane i carries A[row][k0 + i]; zero beyond K, so padded weights never count.
  const TileIndex t = Index(tile);
  const int dim = plan_.array_dim;
  const int64_t row = t.chunk * plan_.m_chunk + m;
  const int64_t k0 = t.k * dim;
  const int64_t lanes = std::min<int64_t>(dim, a_.cols - k0);
  std::fill(out, out + dim, T{0});
  std::copy_n(&a_.at(row, k0), lanes, out);
  tag->acc_addr = static_cast<uint32_t>(m);
  tag->accumulate = t.k > 0;
  tag->final_fold = t.k == plan_.k_tiles - 1;
  tag->result_id = row * plan_.n_tiles + t.n;
}

template <class T>
void GemmWorkloadOf<T>::TakeResult(int64_t result_id, const int32_t* row) {
  const int64_t r = result_id / plan_.n_tiles;
  const int64_t n0 = (result_id % plan_.n_tiles) * plan_.array_dim;
  const int64_t cols = std::min<int64_t>(plan_.array_dim, c_->cols - n0);
  std::copy_n(row, cols, &c_->at(r, n0));
}

template <class T>
int64_t GemmWorkloadOf<T>::NumResults() const {
  return plan_.shape.m * plan_.n_tiles;
}

template class GemmWorkloadOf<int8_t>;
template class GemmWorkloadOf<uint16_t>;

}  // namespace tpu::gemm
