// The VPU RTL (rtl/tpu_vpu.sv) against the int8 arithmetic of docs/quantization.md
// (host/nn/int8_ops.h), on random rows with random per-lane parameters, with and without
// ReLU, with average, max and no pooling.
#include <gtest/gtest.h>
#include <verilated.h>

#include <random>
#include <vector>

#include "Vtpu_vpu_n8.h"
#include "host/nn/int8_ops.h"
#include "sim/port_packing.h"

namespace tpu {
namespace {

constexpr int kLanes = 8;
enum Pool { kNone = 0, kAvg = 1, kMax = 2 };

struct Params {
  int32_t bias[kLanes], multiplier[kLanes], shift[kLanes];
  bool relu = false;
  Pool pool = kNone;
};

class VpuHarness {
 public:
  VpuHarness() : vpu_(&context_) {
    vpu_.rst_ni = 0;
    vpu_.clk_i = 0;
    vpu_.eval();
    vpu_.rst_ni = 1;
    vpu_.eval();
  }

  void Configure(const Params& p) {
    uint32_t words[kLanes];
    sim::PackLanes(p.bias, kLanes, words);
    sim::WritePort(vpu_.bias_i, words);
    sim::PackLanes(p.multiplier, kLanes, words);
    sim::WritePort(vpu_.multiplier_i, words);
    uint64_t shifts = 0;
    for (int l = 0; l < kLanes; ++l) shifts |= static_cast<uint64_t>(p.shift[l] & 63) << (6 * l);
    vpu_.shift_i = shifts;
    vpu_.relu_i = p.relu;
    vpu_.pool_i = p.pool;
  }

  // One clock cycle with `row` (or nothing) at the input; returns the output row if valid.
  bool Cycle(const int32_t* row, std::vector<int8_t>* out) {
    vpu_.in_valid_i = row != nullptr;
    if (row) {
      uint32_t words[kLanes];
      sim::PackLanes(row, kLanes, words);
      sim::WritePort(vpu_.in_data_i, words);
    }
    vpu_.clk_i = 0;
    vpu_.eval();
    vpu_.clk_i = 1;
    vpu_.eval();
    if (!vpu_.out_valid_o) return false;
    uint32_t words[2];
    sim::ReadPort(vpu_.out_data_o, words);
    out->resize(kLanes);
    sim::UnpackLanes(words, kLanes, out->data());
    return true;
  }

 private:
  VerilatedContext context_;
  Vtpu_vpu_n8 vpu_;
};

Params RandomParams(std::mt19937_64& rng, bool relu, Pool pool) {
  Params p;
  p.relu = relu;
  p.pool = pool;
  for (int l = 0; l < kLanes; ++l) {
    p.bias[l] = static_cast<int32_t>(rng() % 2000001) - 1000000;
    p.multiplier[l] = static_cast<int32_t>((1u << 30) + rng() % (1u << 30));
    p.shift[l] = 31 + static_cast<int>(rng() % 20);
  }
  // Extremes: a zero multiplier, the smallest and largest shifts.
  p.multiplier[0] = 0;
  p.shift[1] = 1;
  p.multiplier[1] = static_cast<int32_t>(rng() % 3);
  p.shift[2] = 62;
  p.multiplier[3] = INT32_MAX;
  return p;
}

void RunCase(bool relu, Pool pool, uint64_t seed) {
  std::mt19937_64 rng(seed);
  VpuHarness vpu;
  const Params p = RandomParams(rng, relu, pool);
  vpu.Configure(p);
  constexpr int kRows = 400;  // a multiple of the 4-row pooling window
  std::vector<std::vector<int32_t>> rows(kRows, std::vector<int32_t>(kLanes));
  std::vector<std::vector<int8_t>> requant(kRows, std::vector<int8_t>(kLanes));
  for (int r = 0; r < kRows; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      // Mostly values near the requantized range, sometimes large ones that saturate.
      const int32_t span = (rng() % 4 == 0) ? (1 << 30) : (1 << 22);
      rows[r][l] = static_cast<int32_t>(rng() % (2u * span + 1)) - span;
      requant[r][l] =
          nn::Requantize(rows[r][l] + p.bias[l], p.multiplier[l], p.shift[l], relu ? 0 : -128);
    }
  }
  std::vector<std::vector<int8_t>> expected;
  if (pool == kNone) {
    expected = requant;
  } else {
    for (int r = 0; r < kRows; r += 4) {
      std::vector<int8_t> out(kLanes);
      for (int l = 0; l < kLanes; ++l) {
        int32_t sum = 0, mx = -128;
        for (int k = 0; k < 4; ++k) {
          sum += requant[r + k][l];
          mx = std::max<int32_t>(mx, requant[r + k][l]);
        }
        out[l] = pool == kAvg ? nn::AveragePool(sum, 4) : static_cast<int8_t>(mx);
      }
      expected.push_back(out);
    }
  }
  std::vector<std::vector<int8_t>> got;
  std::vector<int8_t> out;
  for (int r = 0; r < kRows; ++r) {
    // A gap every 7 rows: the pipeline must carry valid rows, not cycles.
    if (r % 7 == 3 && vpu.Cycle(nullptr, &out)) got.push_back(out);
    if (vpu.Cycle(rows[r].data(), &out)) got.push_back(out);
  }
  for (int i = 0; i < 4; ++i)
    if (vpu.Cycle(nullptr, &out)) got.push_back(out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "output row " << i;
  }
}

TEST(TpuVpuTest, RequantizeMatchesSpec) { RunCase(false, kNone, 1); }
TEST(TpuVpuTest, RequantizeWithReluMatchesSpec) { RunCase(true, kNone, 2); }
TEST(TpuVpuTest, AveragePoolMatchesSpec) { RunCase(true, kAvg, 3); }
TEST(TpuVpuTest, AveragePoolWithoutReluMatchesSpec) { RunCase(false, kAvg, 4); }
TEST(TpuVpuTest, MaxPoolMatchesSpec) { RunCase(true, kMax, 5); }

TEST(TpuVpuTest, LatencyIsTwoCycles) {
  VpuHarness vpu;
  std::mt19937_64 rng(6);
  vpu.Configure(RandomParams(rng, false, kNone));
  const std::vector<int32_t> row(kLanes, 1000);
  std::vector<int8_t> out;
  EXPECT_FALSE(vpu.Cycle(row.data(), &out));  // edge 1: the row enters stage 1
  EXPECT_TRUE(vpu.Cycle(nullptr, &out));      // edge 2: out of stage 2
  EXPECT_FALSE(vpu.Cycle(nullptr, &out));
}

}  // namespace
}  // namespace tpu
