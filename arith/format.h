// The chip's number formats as types: what an operand is, how wide, what the accumulators
// hold, how a channel's vector-unit parameters are laid out, and the reference product, with
// the contract's enum of it. Code that works in either format takes the format's element
// (or the format) as a template parameter, instead of an X / XBf16 pair; a new format
// (float32 rows for training state) is a new entry here.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "arith/int8_gemm.h"
#include "arith/vpu_tables.h"
#include "contract/tpu_contract.h"

namespace tpu::arith {

// int8 operands, int32 accumulators, requantized by the vector unit (docs/quantization.md).
struct Int8Format {
  using Element = int8_t;
  using Accumulator = int32_t;
  static constexpr hw::Dtype kDtype = hw::Dtype::kInt8;
  static constexpr int kElementBytes = 1;

  // One output channel's vector-unit parameters (docs/isa.md, "Parameter sets"): the bias
  // added to the accumulator, then the requantization's multiplier and shift. A lane beyond
  // the channels takes Channel{}: output 0.
  struct Channel {
    int32_t bias = 0, multiplier = 0, shift = 1;
  };
  // The channel that gives each value back (bias 0, multiplier 2^30, shift 30).
  static constexpr Channel Identity() { return {0, int32_t{1} << 30, 30}; }
  // Writes channel c as lane `lane` of a parameter set of n lanes.
  static void Pack(const Channel& c, int64_t lane, int n, uint8_t* set) {
    std::memcpy(set + hw::kParamBiasRow * n + 4 * lane, &c.bias, 4);
    std::memcpy(set + hw::kParamMultiplierRow * n + 4 * lane, &c.multiplier, 4);
    set[hw::kParamShiftRow * n + lane] = static_cast<uint8_t>(c.shift);
  }
  // Lane `lane` of a parameter set of n lanes, as Pack wrote it.
  static Channel Unpack(const uint8_t* set, int64_t lane, int n) {
    Channel c;
    std::memcpy(&c.bias, set + hw::kParamBiasRow * n + 4 * lane, 4);
    std::memcpy(&c.multiplier, set + hw::kParamMultiplierRow * n + 4 * lane, 4);
    c.shift = set[hw::kParamShiftRow * n + lane];
    return c;
  }

  // The vector unit's activate of one accumulator through channel c (docs/quantization.md):
  // the bias added (wrapping), requantized, clamped at zero with ReLU, then the function
  // table `fn` (docs/vpu.md).
  static Element Activate(Accumulator acc, const Channel& c, bool relu,
                          VpuFunction fn = VpuFunction::kNone) {
    return ApplyVpuFunction(fn, Requantize(static_cast<int32_t>(static_cast<uint32_t>(acc) +
                                                                static_cast<uint32_t>(c.bias)),
                                           static_cast<uint32_t>(c.multiplier),
                                           static_cast<uint32_t>(c.shift), relu ? 0 : -128));
  }
  // 2 x 2 pooling of four activated values: the average (rounding half up) or the maximum.
  static Element Pool(const Element v[4], bool avg) {
    if (avg) return AveragePool(int32_t{v[0]} + v[1] + v[2] + v[3], 4);
    Element m = v[0];
    for (int q = 1; q < 4; ++q) m = Larger(m, v[q]);
    return m;
  }
  static Element Larger(Element a, Element b) { return a > b ? a : b; }
  // The residual stage: y and the residual r to a common scale, added (multipliers mul_a,
  // mul_b) or multiplied (mul_a), shifted, clamped at zero with ReLU (docs/quantization.md).
  static Element Residual(Element y, Element r, bool product, uint32_t mul_a, uint32_t mul_b,
                          uint32_t shift, bool relu) {
    const int32_t lo = relu ? 0 : -128;
    return product ? MulRequantize(y, r, mul_a, shift, lo)
                   : AddRequantize(y, r, mul_a, mul_b, shift, lo);
  }

  // C = A x B (row-major: m x k times k x n) as the array sums it: exact, modulo 2^32, which
  // any order of the sums gives (so `tile` is unused).
  static void Gemm(int64_t m, int64_t n, int64_t k, int64_t /*tile*/, const Element* a,
                   const Element* b, Accumulator* c) {
    GemmInt8(m, n, k, a, k, b, n, c, n, false);
  }
};

// bfloat16 operands (bit patterns), float32 accumulators (bit patterns), docs/bf16.md.
struct Bf16Format {
  using Element = uint16_t;
  using Accumulator = uint32_t;
  static constexpr hw::Dtype kDtype = hw::Dtype::kBf16;
  static constexpr int kElementBytes = 2;

  using Channel = Bf16Channel;  // the float32 bias and upper bound (bf16.h)
  // The channel that gives each value back (bias +0, no bound).
  static constexpr Channel Identity() { return {0, kFp32Inf}; }
  static void Pack(const Channel& c, int64_t lane, int n, uint8_t* set) {
    std::memcpy(set + hw::kParamBiasByte * n + 4 * lane, &c.bias, 4);
    std::memcpy(set + hw::kParamMultiplierByte * n + 4 * lane, &c.hi, 4);
  }
  static Channel Unpack(const uint8_t* set, int64_t lane, int n) {
    Channel c;
    std::memcpy(&c.bias, set + hw::kParamBiasByte * n + 4 * lane, 4);
    std::memcpy(&c.hi, set + hw::kParamMultiplierByte * n + 4 * lane, 4);
    return c;
  }

  // The activate of one accumulator (docs/bf16.md): the bias added in float32, ReLU, the
  // upper bound, rounded to bfloat16. (No function tables: the controller refuses them on a
  // bf16 chip.)
  static Element Activate(Accumulator acc, const Channel& c, bool relu,
                          VpuFunction /*fn*/ = VpuFunction::kNone) {
    return Bf16Activate(Fp32Add(acc, c.bias), relu, c.hi);
  }
  static Element Pool(const Element v[4], bool avg) { return Bf16Pool(v, avg); }
  static Element Larger(Element a, Element b) {
    return Bf16OfFp32(Fp32Max(Fp32OfBf16(a), Fp32OfBf16(b)));
  }
  // The float32 residual add (Bf16ResidualAdd); the multipliers and shift are unused, and
  // the controller refuses the product on a bf16 chip.
  static Element Residual(Element y, Element r, bool /*product*/, uint32_t /*mul_a*/,
                          uint32_t /*mul_b*/, uint32_t /*shift*/, bool relu) {
    return Bf16ResidualAdd(y, r, relu);
  }

  // C = A x B as an array of `tile` rows sums it: float32, in K blocks of `tile`
  // (Bf16Gemm, docs/bf16.md), so the order of the sums is the array's.
  static void Gemm(int64_t m, int64_t n, int64_t k, int64_t tile, const Element* a,
                   const Element* b, Accumulator* c) {
    Bf16Gemm(m, n, k, tile, a, b, c);
  }
};

// The format whose operands are T.
template <class T>
struct FormatOf;
template <>
struct FormatOf<int8_t> : Int8Format {};
template <>
struct FormatOf<uint16_t> : Bf16Format {};

// Activate of a row of n lanes in format F: lane l through channel ch[l]. The bfloat16
// activate is written with masks, so that its loop runs on the CPU's vector unit.
template <class F>
void ActivateRow(const typename F::Accumulator* __restrict acc,
                 const typename F::Channel* __restrict ch, bool relu, VpuFunction fn,
                 typename F::Element* __restrict y, int64_t n) {
  if constexpr (std::is_same_v<F, Bf16Format>) {
    Bf16ActivateRow(acc, ch, relu, y, n);  // the same, compiled for the wider vector units
  } else {
    for (int64_t l = 0; l < n; ++l) y[l] = F::Activate(acc[l], ch[l], relu, fn);
  }
}

// A parameter set's bytes in format F on an array of n lanes.
template <class F>
constexpr int64_t ParamSetBytes(int n) {
  return int64_t{hw::ParamRows(F::kElementBytes)} * F::kElementBytes * n;
}

// Throws E (an error type taking a message) unless a chip of format `chip` takes operands T.
template <class E, class T>
void RequireFormat(hw::Dtype chip) {
  if (chip != FormatOf<T>::kDtype) {
    throw E(std::string(hw::Name(FormatOf<T>::kDtype)) + " inputs for a " + hw::Name(chip) +
            " chip");
  }
}

}  // namespace tpu::arith
