// Moves rows of int8 / int32 lanes in and out of Verilator's packed port types
// (CData/SData/IData/QData/VlWide in C++ models; uint32_t/uint64_t/sc_bv in SystemC).
#pragma once

#include <verilated.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tpu::sim {

// Lanes are packed little-endian: lane 0 occupies the least significant bits, as the
// RTL's `operand_t [ArrayDim-1:0]` ports do.
template <typename T>
void PackLanes(const T* lanes, int count, uint32_t* words) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 4, "int8 or int32 lanes");
  const int bytes = count * static_cast<int>(sizeof(T));
  const int num_words = (bytes + 3) / 4;
  std::memset(words, 0, static_cast<size_t>(num_words) * 4);
  std::memcpy(words, lanes, static_cast<size_t>(bytes));  // x86 is little-endian
}

template <typename T>
void UnpackLanes(const uint32_t* words, int count, T* lanes) {
  std::memcpy(lanes, words, static_cast<size_t>(count) * sizeof(T));
}

// C++ model ports: integral types up to 64 bits, VlWide above.
template <typename Port>
void WritePort(Port& port, const uint32_t* words) {
  if constexpr (std::is_integral_v<Port>) {
    uint64_t v = words[0];
    if constexpr (sizeof(Port) > 4) v |= static_cast<uint64_t>(words[1]) << 32;
    port = static_cast<Port>(v);
  } else {
    for (size_t i = 0; i < sizeof(Port) / 4; ++i) port[i] = words[i];
  }
}

template <typename Port>
void ReadPort(const Port& port, uint32_t* words) {
  if constexpr (std::is_integral_v<Port>) {
    const uint64_t v = static_cast<uint64_t>(port);
    words[0] = static_cast<uint32_t>(v);
    if constexpr (sizeof(Port) > 4) words[1] = static_cast<uint32_t>(v >> 32);
  } else {
    for (size_t i = 0; i < sizeof(Port) / 4; ++i) words[i] = port[i];
  }
}

}  // namespace tpu::sim
