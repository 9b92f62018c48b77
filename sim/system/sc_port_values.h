// Values of Verilator SystemC ports (bool, uint32_t, uint64_t, sc_bv<W>) to and from
// little-endian 32-bit words, and the sc_signal type that binds to a given port.
#pragma once

#include <systemc.h>

#include <cstdint>
#include <type_traits>

namespace tpu::sim {

namespace sc_detail {

// The sc_signal type that binds to a Verilator SystemC port.
template <class Port>
using SignalFor = sc_core::sc_signal<typename std::remove_reference_t<Port>::data_type>;

template <class T>
T ToScValue(const uint32_t* words) {
  if constexpr (std::is_integral_v<T>) {
    uint64_t v = words[0];
    if constexpr (sizeof(T) > 4) v |= static_cast<uint64_t>(words[1]) << 32;
    return static_cast<T>(v);
  } else {
    T v;
    for (int i = 0; i < (v.length() + 31) / 32; ++i) v.set_word(i, words[i]);
    return v;
  }
}

template <class T>
void FromScValue(const T& v, uint32_t* words) {
  if constexpr (std::is_integral_v<T>) {
    const uint64_t x = static_cast<uint64_t>(v);
    words[0] = static_cast<uint32_t>(x);
    if constexpr (sizeof(T) > 4) words[1] = static_cast<uint32_t>(x >> 32);
  } else {
    for (int i = 0; i < (v.length() + 31) / 32; ++i) words[i] = v.get_word(i);
  }
}

}  // namespace sc_detail

}  // namespace tpu::sim
