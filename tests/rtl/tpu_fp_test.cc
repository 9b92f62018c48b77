// The RTL's bfloat16 and float32 arithmetic (rtl/tpu_pkg.sv: Bf16Mul, Fp32Add, Fp32Max,
// Fp32Min, Fp32Quarter, Bf16Round, Bf16Activate)
// against the C++ reference (arith/bf16.h), which uses the host's IEEE float hardware:
// every special case (zeros of both signs, subnormals, infinities, NaN, overflow,
// cancellation, ties in rounding) and millions of random operands, bit for bit.
#include <gtest/gtest.h>
#include <verilated.h>

#include <cstdint>
#include <random>
#include <vector>

#include "Vtpu_fp_unit.h"
#include "arith/bf16.h"

namespace tpu::test {
namespace {

class FpUnitTest : public ::testing::Test {
 protected:
  VerilatedContext context_;
  Vtpu_fp_unit m_{&context_};

  // Checks every function of the unit on one set of operands.
  void Check(uint32_t a, uint32_t b, uint16_t x, uint16_t y) {
    m_.a_i = a;
    m_.b_i = b;
    m_.x_i = x;
    m_.y_i = y;
    const bool relu = (a ^ b ^ x) & 1u;
    m_.relu_i = relu;
    m_.eval();
    ASSERT_EQ(m_.min_o, arith::Fp32Min(a, b)) << std::hex << "min 0x" << a << ", 0x" << b;
    ASSERT_EQ(m_.quarter_o, arith::Fp32Quarter(a)) << std::hex << "quarter 0x" << a;
    ASSERT_EQ(m_.round_o, arith::Bf16OfFp32(a)) << std::hex << "round 0x" << a;
    ASSERT_EQ(m_.act_o, arith::Bf16Activate(a, relu, b))
        << std::hex << "activate 0x" << a << " relu " << relu << " hi 0x" << b;
    ASSERT_EQ(m_.add_o, arith::Fp32Add(a, b)) << std::hex << "add 0x" << a << " + 0x" << b;
    ASSERT_EQ(m_.max_o, arith::Fp32Max(a, b)) << std::hex << "max 0x" << a << ", 0x" << b;
    ASSERT_EQ(m_.mul_o, arith::Bf16Mul(x, y)) << std::hex << "mul 0x" << x << " * 0x" << y;
    ASSERT_EQ(m_.mac_o, arith::Bf16Mac(a, x, y))
        << std::hex << "mac 0x" << a << " + 0x" << x << " * 0x" << y;
  }
};

// Special values of float32 (and, their upper halves, of bfloat16).
const std::vector<uint32_t> kSpecial = {
    0x00000000, 0x80000000,  // zeros
    0x00000001, 0x807fffff,  // subnormals
    0x00800000, 0x80800000,  // smallest normals
    0x00800001, 0x01000000, 0x3f800000, 0xbf800000, 0x3f800001, 0x3fffffff,
    0x40000000, 0x4b800000, 0x4c000000, 0x33800000, 0x34000000,  // where rounding ties appear
    0x7f7fffff, 0xff7fffff,                                      // largest finite
    0x7f800000, 0xff800000,                                      // infinities
    0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff,              // NaNs
};

TEST_F(FpUnitTest, SpecialValues) {
  for (uint32_t a : kSpecial) {
    for (uint32_t b : kSpecial) {
      Check(a, b, static_cast<uint16_t>(a >> 16), static_cast<uint16_t>(b >> 16));
      Check(a, b ^ 0x80000000u, static_cast<uint16_t>(a >> 16),
            static_cast<uint16_t>((b ^ 0x80000000u) >> 16));
    }
  }
}

TEST_F(FpUnitTest, RandomBitPatterns) {
  std::mt19937 rng(1);
  for (int i = 0; i < 500000; ++i) {
    Check(rng(), rng(), static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng()));
  }
}

// Operands of nearby exponents: the additions that align, cancel and round.
TEST_F(FpUnitTest, NearbyExponents) {
  std::mt19937 rng(2);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t e = 1 + rng() % 253;
    const uint32_t d = rng() % 30;
    const uint32_t a = (rng() & 1u) << 31 | e << 23 | (rng() & 0x7fffffu);
    const uint32_t eb = e > d ? e - d : 1;
    const uint32_t b = (rng() & 1u) << 31 | eb << 23 | (rng() & 0x7fffffu);
    const auto x =
        static_cast<uint16_t>((rng() & 1u) << 15 | (1 + rng() % 253) << 7 | (rng() & 0x7fu));
    const auto y =
        static_cast<uint16_t>((rng() & 1u) << 15 | (1 + rng() % 253) << 7 | (rng() & 0x7fu));
    Check(a, b, x, y);
  }
}

// Products at the edges of float32's range: overflow to infinity, underflow to zero.
TEST_F(FpUnitTest, ProductRangeEdges) {
  for (uint32_t ex = 1; ex < 255; ++ex) {
    for (uint32_t ey : {1u, 2u, 60u, 63u, 64u, 65u, 126u, 127u, 128u, 190u, 191u, 192u, 254u}) {
      for (uint32_t frac : {0u, 1u, 0x40u, 0x7fu}) {
        Check(0x3f800000u, 0x80000000u, static_cast<uint16_t>(ex << 7 | frac),
              static_cast<uint16_t>(0x8000u | ey << 7 | (0x7fu - frac)));
      }
    }
  }
}

}  // namespace
}  // namespace tpu::test
