// How weights and VPU parameters are laid out in the chip's memories, for every program
// that multiplies on it (the layer compiler, the GEMM program): one home for both layouts.
#pragma once

#include <cstdint>
#include <vector>

namespace tpu::compiler {

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
