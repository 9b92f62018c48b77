// The chip's number formats as types: what an operand is, how wide, what the accumulators
// hold, and the contract's enum of it. Code that works in either format takes the format's
// element (or the format) as a template parameter, instead of an X / XBf16 pair; a new
// format (float32 rows for training state) is a new entry here.
#pragma once

#include <cstdint>
#include <string>

#include "contract/tpu_contract.h"

namespace tpu::arith {

// int8 operands, int32 accumulators, requantized by the vector unit (docs/quantization.md).
struct Int8Format {
  using Element = int8_t;
  using Accumulator = int32_t;
  static constexpr hw::Dtype kDtype = hw::Dtype::kInt8;
};

// bfloat16 operands (bit patterns), float32 accumulators (bit patterns), docs/bf16.md.
struct Bf16Format {
  using Element = uint16_t;
  using Accumulator = uint32_t;
  static constexpr hw::Dtype kDtype = hw::Dtype::kBf16;
};

// The format whose operands are T.
template <class T>
struct FormatOf;
template <>
struct FormatOf<int8_t> : Int8Format {};
template <>
struct FormatOf<uint16_t> : Bf16Format {};

// Throws E (an error type taking a message) unless a chip of format `chip` takes operands T.
template <class E, class T>
void RequireFormat(hw::Dtype chip) {
  if (chip != FormatOf<T>::kDtype) {
    throw E(std::string(hw::Name(FormatOf<T>::kDtype)) + " inputs for a " + hw::Name(chip) +
            " chip");
  }
}

}  // namespace tpu::arith
