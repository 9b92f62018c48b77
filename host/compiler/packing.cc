// Weight-tile and parameter-set layouts (see packing.h).
#include "host/compiler/packing.h"

#include <cstring>

#include "contract/tpu_contract.h"

namespace tpu::compiler {

namespace {

// The tiles of operands of type T, as the bytes of weight memory (little-endian), tile by
// tile (WeightTile), so that no second copy of a large matrix is held.
template <class T>
std::vector<uint8_t> PackTiles(const T* w, int64_t k, int64_t cols, int n) {
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

}  // namespace

std::vector<uint8_t> PackWeightTiles(const int8_t* w, int64_t k, int64_t cols, int n) {
  return PackTiles(w, k, cols, n);
}

std::vector<uint8_t> PackWeightTilesBf16(const uint16_t* w, int64_t k, int64_t cols, int n) {
  return PackTiles(w, k, cols, n);
}

std::vector<uint8_t> PackParamSetsBf16(const uint32_t* bias, const uint32_t* hi, int64_t channels,
                                       int n) {
  const int64_t sets = (channels + n - 1) / n, set_bytes = int64_t{hw::ParamRows(2)} * 2 * n;
  std::vector<uint8_t> out(static_cast<size_t>(sets * set_bytes), 0);
  for (int64_t j = 0; j < sets; ++j) {
    uint8_t* p = &out[static_cast<size_t>(j * set_bytes)];
    for (int64_t l = 0; l < n; ++l) {
      const int64_t ch = j * n + l;
      const uint32_t b = ch < channels ? bias[ch] : 0, h = ch < channels ? hi[ch] : 0;
      std::memcpy(p + hw::kParamBiasByte * n + 4 * l, &b, 4);
      std::memcpy(p + hw::kParamMultiplierByte * n + 4 * l, &h, 4);
    }
  }
  return out;
}

std::vector<uint8_t> PackParamSets(const int32_t* bias, const int32_t* multiplier,
                                   const int32_t* shift, int64_t channels, int n) {
  const int64_t sets = (channels + n - 1) / n, set_bytes = int64_t{hw::kParamRows} * n;
  std::vector<uint8_t> out(static_cast<size_t>(sets * set_bytes), 0);
  for (int64_t j = 0; j < sets; ++j) {
    uint8_t* p = &out[static_cast<size_t>(j * set_bytes)];
    for (int64_t l = 0; l < n; ++l) {
      const int64_t ch = j * n + l;
      const int32_t b = ch < channels ? bias[ch] : 0;
      const int32_t m = ch < channels ? multiplier[ch] : 0;
      const int32_t s = ch < channels ? shift[ch] : 1;
      std::memcpy(p + hw::kParamBiasRow * n + 4 * l, &b, 4);
      std::memcpy(p + hw::kParamMultiplierRow * n + 4 * l, &m, 4);
      p[hw::kParamShiftRow * n + l] = static_cast<uint8_t>(s);
    }
  }
  return out;
}

}  // namespace tpu::compiler
