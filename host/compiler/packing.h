// How weights and VPU parameters are laid out in the chip's memories, for every program
// that multiplies on it (the layer compiler, the GEMM program): one home for both layouts.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

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

// The N x N weight tiles of a K x cols int8 matrix W (row-major), zero-padded to whole
// tiles. Tile (kb, j), rows kb*N .. and columns j*N .. of W, is the (j * kt + kb)-th tile
// (kt = ceil(K / N)): a column block's K-folds stream one after another. Tile row r is
// weight row kb * N + r, which multiplies activation lane r.
std::vector<uint8_t> PackWeightTiles(const int8_t* w, int64_t k, int64_t cols, int n);
// The same for a bf16 chip: bfloat16 weights, 2 bytes each (little-endian), 2N^2 per tile.
std::vector<uint8_t> PackWeightTilesBf16(const uint16_t* w, int64_t k, int64_t cols, int n);

// VPU parameter sets (docs/isa.md): one per N output channels, lane l of set j for channel
// j * N + l; lanes beyond `channels` get bias 0, multiplier 0 and shift 1 (output 0).
std::vector<uint8_t> PackParamSets(const int32_t* bias, const int32_t* multiplier,
                                   const int32_t* shift, int64_t channels, int n);
// The bf16 chip's parameter sets: float32 biases and upper bounds (bit patterns; +inf: no
// bound); lanes beyond `channels` get bias 0 and bound 0 (output 0).
std::vector<uint8_t> PackParamSetsBf16(const uint32_t* bias, const uint32_t* hi, int64_t channels,
                                       int n);

}  // namespace tpu::compiler
