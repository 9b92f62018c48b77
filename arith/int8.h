// The integer arithmetic of the int8 network, shared by every int8 implementation (the
// scalar reference, the Eigen backend, and the TPU's VPU must agree with these bit for bit).
// docs/quantization.md is the specification.
#pragma once

#include <cstdint>

// The same functions run on CUDA devices (host/cuda/): host and device alike.
#ifdef __CUDACC__
#define TPU_HOST_DEVICE __host__ __device__
#else
#define TPU_HOST_DEVICE
#endif

namespace tpu::arith {

// Input pixel (0..255) to int8 with scale 1/127: round(p * 127 / 255), ties down.
TPU_HOST_DEVICE inline int8_t QuantizePixel(uint8_t p) {
  return static_cast<int8_t>((int32_t{p} * 127 + 127) / 255);
}

// An fp32 input value to int8 with the model's input scale (preprocess none): x / scale
// rounded to the nearest integer, halves away from zero, clamped to [-128, 127]. In double
// precision, so every compiler gives the same value. Values far outside the range are
// clamped before rounding (a cast of a double beyond int64 is undefined behaviour).
TPU_HOST_DEVICE inline int8_t QuantizeInput(float x, float scale) {
  const double v = static_cast<double>(x) / static_cast<double>(scale);
  const double q = v < -129 ? -129 : v > 128 ? 128 : v;
  const double r = q < 0 ? -static_cast<double>(static_cast<int64_t>(-q + 0.5))
                         : static_cast<double>(static_cast<int64_t>(q + 0.5));
  return static_cast<int8_t>(r < -128 ? -128 : r > 127 ? 127 : r);
}

// Requantization of an int32 accumulator: (acc * multiplier + 2^(shift-1)) >> shift in
// 64-bit arithmetic (>> rounds toward minus infinity, so ties round up), then clamp to
// [lo, 127]: lo = 0 fuses ReLU, lo = -128 is a plain int8. This is also exactly what the
// VPU computes (rtl/tpu_vpu.sv) for every value a parameter set can hold: any 32-bit
// multiplier, and the low 6 bits of the shift, where shift 0 adds 2^63 (the 6-bit wrap of
// shift - 1) and every sum wraps modulo 2^64. The documented range (multiplier < 2^31,
// shift 1..62, docs/quantization.md) never wraps.
TPU_HOST_DEVICE inline int8_t Requantize(int32_t acc, uint32_t multiplier, uint32_t shift,
                                         int32_t lo) {
  const uint32_t s = shift & 63u;
  const auto product = static_cast<uint64_t>(int64_t{acc} * int64_t{multiplier});  // < 2^63
  const auto rounded = static_cast<int64_t>(product + (uint64_t{1} << ((s - 1u) & 63u)));
  const int64_t scaled = rounded >> s;
  return static_cast<int8_t>(scaled < lo ? lo : scaled > 127 ? 127 : scaled);
}

// The residual add of two int8 activations a and b to a common scale (docs/quantization.md):
// (a * ma + b * mb + 2^(shift-1)) >> shift in 64-bit arithmetic, clamped to [lo, 127];
// ma, mb in [0, 2^31), shift in [1, 62]. Exactly what the VPU's residual stage computes
// (rtl/tpu_vpu.sv), with a the value its requantization stage made.
TPU_HOST_DEVICE inline int8_t AddRequantize(int8_t a, int8_t b, uint32_t ma, uint32_t mb,
                                            uint32_t shift, int32_t lo) {
  const int64_t sum = int64_t{a} * ma + int64_t{b} * mb + (int64_t{1} << (shift - 1));
  const int64_t scaled = sum >> shift;
  return static_cast<int8_t>(scaled < lo ? lo : scaled > 127 ? 127 : scaled);
}

// The residual product of two int8 activations (activate residual after a set_residual
// with `product`, docs/isa.md): (a * b * m + 2^(shift-1)) >> shift in 64-bit arithmetic,
// clamped to [lo, 127]; m in [0, 2^31), shift in [1, 62]. The elementwise products of an
// LSTM cell (docs/quantization.md).
TPU_HOST_DEVICE inline int8_t MulRequantize(int8_t a, int8_t b, uint32_t m, uint32_t shift,
                                            int32_t lo) {
  const int64_t sum = int64_t{a} * int64_t{b} * m + (int64_t{1} << (shift - 1));
  const int64_t scaled = sum >> shift;
  return static_cast<int8_t>(scaled < lo ? lo : scaled > 127 ? 127 : scaled);
}

// The requantization that averages n values: 1/n as multiplier / 2^shift, with shift =
// 30 + ceil(log2 n) and multiplier = round(2^shift / n), in [2^30, 2^31). For a power of two
// it is exact (n = 4: 2^30 / 2^32).
TPU_HOST_DEVICE inline void AverageMultiplier(int32_t n, uint32_t* multiplier, uint32_t* shift) {
  uint32_t c = 0;
  while ((int64_t{1} << c) < n) ++c;
  *shift = 30 + c;
  *multiplier = static_cast<uint32_t>(((uint64_t{1} << *shift) + uint64_t(n) / 2) / uint64_t(n));
}

// Average of a window of n int8 values (n <= 2^20) from their sum: the requantization of
// the sum by AverageMultiplier(n), so that the chip computes it exactly as a convolution
// with weights 1 (host/compiler/layer_compiler.cc). For a power of two this is
// floor((sum + n/2) / n) (ties round up), what the VPU's 2 x 2 pooling computes.
TPU_HOST_DEVICE inline int8_t AveragePool(int32_t sum, int32_t n) {
  uint32_t multiplier = 0, shift = 0;
  AverageMultiplier(n, &multiplier, &shift);
  return Requantize(sum, multiplier, shift, -128);
}

}  // namespace tpu::arith
