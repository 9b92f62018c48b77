// How weights and VPU parameters are laid out in the chip's memories, for every program
// that multiplies on it (the lowering, the layer compiler, the GEMM and LSTM programs), in
// either format (arith/format.h): one home for both layouts.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "arith/format.h"

namespace tpu::compiler {

// Tile (kb, j) of the layout below alone: N x N operands, zero-padded, each the bytes
// (little-endian) of value(w[i]), an int8 or the bits of a bfloat16. For a caller that
// needs a few tiles of a large matrix without the whole (an average pooling's, mostly
// zeros: docs/performance.md, "Memory").
template <class T, class Value>
std::vector<uint8_t> WeightTile(const T* w, int64_t k, int64_t cols, int n, int64_t kb, int64_t j,
                                Value value) {
  using Operand = decltype(value(w[0]));
  std::vector<uint8_t> tile(sizeof(Operand) * static_cast<size_t>(n) * static_cast<size_t>(n), 0);
  for (int64_t r = 0; r < n && kb * n + r < k; ++r) {
    for (int64_t c = 0; c < n && j * n + c < cols; ++c) {
      const Operand v = value(w[(kb * n + r) * cols + j * n + c]);
      std::memcpy(&tile[sizeof(Operand) * static_cast<size_t>(r * n + c)], &v, sizeof(Operand));
    }
  }
  return tile;
}

// The N x N weight tiles of a K x cols matrix W (row-major) of operands T (int8_t, or
// bfloat16 bit patterns: 2 bytes each, little-endian), zero-padded to whole tiles. Tile
// (kb, j), rows kb*N .. and columns j*N .. of W, is the (j * kt + kb)-th tile (kt = ceil(K /
// N)): a column block's K-folds stream one after another. Tile row r is weight row kb * N +
// r, which multiplies activation lane r. Built tile by tile (WeightTile), so that no second
// copy of a large matrix is held.
template <class T>
std::vector<uint8_t> PackWeightTiles(const T* w, int64_t k, int64_t cols, int n) {
  const int64_t kt = (k + n - 1) / n, nt = (cols + n - 1) / n;
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(kt * nt) * sizeof(T) * static_cast<size_t>(n) * n);
  for (int64_t j = 0; j < nt; ++j) {
    for (int64_t kb = 0; kb < kt; ++kb) {
      const std::vector<uint8_t> tile = WeightTile(w, k, cols, n, kb, j, [](T v) { return v; });
      bytes.insert(bytes.end(), tile.begin(), tile.end());
    }
  }
  return bytes;
}

// The vector unit's parameter sets in format F (docs/isa.md): one per N output channels,
// lane l of set j for channel j * N + l; lanes beyond the channels get F::Channel{} (output
// 0).
template <class F>
std::vector<uint8_t> PackParamSets(const std::vector<typename F::Channel>& channels, int n) {
  const auto count = static_cast<int64_t>(channels.size());
  const int64_t sets = (count + n - 1) / n, set_bytes = arith::ParamSetBytes<F>(n);
  std::vector<uint8_t> out(static_cast<size_t>(sets * set_bytes), 0);
  for (int64_t j = 0; j < sets; ++j)
    for (int64_t l = 0; l < n; ++l) {
      const int64_t ch = j * n + l;
      F::Pack(ch < count ? channels[static_cast<size_t>(ch)] : typename F::Channel{}, l, n,
              &out[static_cast<size_t>(j * set_bytes)]);
    }
  return out;
}

// The int8 channels of a quantized layer's per-channel bias, multiplier and shift.
std::vector<arith::Int8Format::Channel> Int8Channels(const int32_t* bias, const int32_t* multiplier,
                                                     const int32_t* shift, int64_t channels);

}  // namespace tpu::compiler
