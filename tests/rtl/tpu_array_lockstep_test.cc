// Proof that the compact array form (rtl/tpu_systolic_array_compact.sv, and the ring-buffer
// skews and tag line it comes with in rtl/tpu_mxu.sv) is the per-PE array in every cycle:
// tests/rtl/tpu_array_lockstep.sv feeds both the same random stimulus (weights written to
// random rows, switch bits, activations with gaps, handshakes, resets at random moments,
// stretches with the inputs held still, in which the compact array skips its settled loop)
// and every output is compared after every edge, for several array sizes, odd ones too, in
// both number formats (int8, and bfloat16 with float32 sums: docs/bf16.md).
#include <gtest/gtest.h>
#include <verilated.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "Vtpu_array_lockstep_bf16_n3.h"
#include "Vtpu_array_lockstep_bf16_n8.h"
#include "Vtpu_array_lockstep_n16.h"
#include "Vtpu_array_lockstep_n2.h"
#include "Vtpu_array_lockstep_n3.h"
#include "Vtpu_array_lockstep_n5.h"
#include "Vtpu_array_lockstep_n8.h"
#include "sim/mxu/port_packing.h"

namespace tpu::test {
namespace {

// Packs fields of given widths, least significant first, into 32-bit words.
class Bits {
 public:
  void Add(uint64_t value, int width) {
    for (int i = 0; i < width; ++i, ++pos_) {
      if (pos_ / 32 >= static_cast<int>(words_.size())) words_.push_back(0);
      if ((value >> i) & 1) words_[static_cast<size_t>(pos_ / 32)] |= 1u << (pos_ % 32);
    }
  }
  const uint32_t* Words() {
    words_.resize(words_.size() + 2, 0);  // room for ports read as 64 bits
    return words_.data();
  }

 private:
  std::vector<uint32_t> words_;
  int pos_ = 0;
};

template <class Port>
std::vector<uint32_t> Read(const Port& p) {
  std::vector<uint32_t> w(sizeof(Port) / 4 + 2, 0);
  sim::ReadPort(p, w.data());
  return w;
}

// `bits`: the operand width the model was built with, 8 (int8) or 16 (bf16).
template <class Model>
void Lockstep(int n, int cycles, uint32_t seed, int bits = 8) {
  VerilatedContext context;
  Model m(&context);
  std::mt19937 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto byte = [&] { return static_cast<uint64_t>(static_cast<uint8_t>(rng())); };
  // An operand: any int8; for bf16, mostly numbers near 1 (so sums keep their low bits and
  // cancel now and then), sometimes any bit pattern (zeros, subnormals, infinities, NaN).
  auto operand = [&]() -> uint64_t {
    if (bits == 8) return byte();
    if (chance(0.2)) return static_cast<uint16_t>(rng());
    const uint64_t exponent = 120 + rng() % 14;
    return (rng() & 1u) << 15 | exponent << 7 | (rng() & 0x7fu);
  };
  int row_bits = 0;
  while ((1 << row_bits) < n) ++row_bits;
  m.clk_i = 0;
  m.rst_ni = 0;
  m.eval();
  m.clk_i = 1;
  m.eval();
  m.rst_ni = 1;
  uint64_t compared = 0, switches = 0, results = 0, quiet_cycles = 0;
  int quiet_left = 0;  // cycles left of a stretch with the inputs held still
  for (int cycle = 0; cycle < cycles; ++cycle) {
    // Now and then the inputs stay as they are for up to 10 N cycles: long enough for the
    // compact array to skip its settled loop (tpu_systolic_array_compact.sv), which must
    // not show.
    if (quiet_left == 0 && chance(0.01)) quiet_left = static_cast<int>(rng() % (10u * n + 20));
    if (quiet_left > 0) {  // activations, rows and data as they were; nothing valid
      --quiet_left;
      ++quiet_cycles;
      Bits none;
      for (int i = 0; i < n; ++i) none.Add(0, 1);
      sim::WritePort(m.switch_i, none.Words());
      sim::WritePort(m.wr_valid_i, none.Words());
      m.w_valid_i = 0;
      m.a_valid_i = 0;
      m.a_switch_i = 0;
      m.rst_ni = 1;
    } else {
      // The arrays: any stimulus at all on their ports.
      Bits act, sw, wv, wr, wd;
      for (int i = 0; i < n; ++i) {
        act.Add(chance(0.3) ? 0 : operand(), bits);
        sw.Add(chance(0.05), 1);
        wv.Add(chance(0.3), 1);
        wr.Add(rng() % static_cast<uint32_t>(n), row_bits);
        wd.Add(operand(), bits);
      }
      sim::WritePort(m.act_i, act.Words());
      sim::WritePort(m.switch_i, sw.Words());
      sim::WritePort(m.wr_valid_i, wv.Words());
      sim::WritePort(m.wr_row_i, wr.Words());
      sim::WritePort(m.wr_data_i, wd.Words());
      // The matrix units: rows and weights offered with gaps, tiles switched now and then.
      Bits w_data, a_data;
      for (int i = 0; i < n; ++i) {
        w_data.Add(operand(), bits);
        a_data.Add(chance(0.2) ? 0 : operand(), bits);
      }
      m.w_valid_i = chance(0.6);
      sim::WritePort(m.w_data_i, w_data.Words());
      m.a_valid_i = chance(0.7);
      sim::WritePort(m.a_data_i, a_data.Words());
      m.a_switch_i = chance(0.15);
      m.a_tag_i = static_cast<uint8_t>(rng());
      m.rst_ni = chance(0.002) ? 0 : 1;
    }
    m.clk_i = 0;
    m.eval();
    auto same = [&](const char* what) {
      ASSERT_EQ(Read(m.psum_pe_o), Read(m.psum_compact_o)) << what << " psum, cycle " << cycle;
      ASSERT_EQ(m.mxu_pe_flags_o, m.mxu_compact_flags_o) << what << " flags, cycle " << cycle;
      ASSERT_EQ(Read(m.mxu_pe_data_o), Read(m.mxu_compact_data_o))
          << what << " data, cycle " << cycle;
      ASSERT_EQ(m.mxu_pe_tag_o, m.mxu_compact_tag_o) << what << " tag, cycle " << cycle;
    };
    same("before the edge");
    m.clk_i = 1;
    m.eval();
    same("after the edge");
    compared += 2;
    switches += (m.mxu_pe_flags_o & 1);
    results += (m.mxu_pe_flags_o >> 4) & 1;
  }
  // The stimulus exercised what it should: tiles switched in, results came out.
  EXPECT_GT(switches, 10u) << n;
  EXPECT_GT(results, 100u) << n;
  EXPECT_EQ(compared, 2u * static_cast<uint64_t>(cycles));
  EXPECT_GT(quiet_cycles, static_cast<uint64_t>(cycles) / 10) << n;  // still for long
  m.final();
}

TEST(ArrayLockstepTest, TwoByTwo) { Lockstep<Vtpu_array_lockstep_n2>(2, 20000, 1); }
TEST(ArrayLockstepTest, ThreeByThree) { Lockstep<Vtpu_array_lockstep_n3>(3, 20000, 2); }
TEST(ArrayLockstepTest, FiveByFive) { Lockstep<Vtpu_array_lockstep_n5>(5, 20000, 3); }
TEST(ArrayLockstepTest, EightByEight) { Lockstep<Vtpu_array_lockstep_n8>(8, 20000, 4); }
TEST(ArrayLockstepTest, SixteenBySixteen) { Lockstep<Vtpu_array_lockstep_n16>(16, 20000, 5); }
TEST(ArrayLockstepTest, Bf16ThreeByThree) {
  Lockstep<Vtpu_array_lockstep_bf16_n3>(3, 20000, 6, /*bits=*/16);
}
TEST(ArrayLockstepTest, Bf16EightByEight) {
  Lockstep<Vtpu_array_lockstep_bf16_n8>(8, 20000, 7, /*bits=*/16);
}

}  // namespace
}  // namespace tpu::test
