// The VPU RTL (rtl/tpu_vpu.sv) against the int8 arithmetic of docs/quantization.md
// (arith/int8.h), on random rows with random per-lane parameters, with and without
// ReLU, with average, max and no pooling over rows and max pooling over lanes, with the
// sigmoid and tanh tables, and the residual's sum and product.
#include <gtest/gtest.h>
#include <verilated.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "Vtpu_vpu_n8.h"
#include "arith/int8.h"
#include "arith/vpu_tables.h"
#include "sim/mxu/port_packing.h"

namespace tpu {
namespace {

constexpr int kLanes = 8;
enum Pool { kNone = 0, kAvg = 1, kMax = 2, kOverLanes = 3 };  // rtl/tpu_pkg.sv vpu_pool_e

struct Params {
  int32_t bias[kLanes], multiplier[kLanes], shift[kLanes];
  bool relu = false;
  Pool pool = kNone;
  arith::VpuFunction fn = arith::VpuFunction::kNone;  // rtl/tpu_pkg.sv vpu_fn_e has the same order
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
    vpu_.fn_i = static_cast<uint8_t>(p.fn);
  }

  // The residual stage: on, with multipliers, shift, ReLU and product (rtl/tpu_pkg.sv
  // residual_t: ub, mul_b, mul_a, then shift, product, relu and valid in the top word).
  void Residual(uint32_t mul_a, uint32_t mul_b, uint32_t shift, bool relu, bool product = false) {
    const uint32_t words[4] = {0, mul_b, mul_a,
                               shift | uint32_t{product} << 6 | uint32_t{relu} << 7 | 1u << 8};
    sim::WritePort(vpu_.res_i, words);
    vpu_.residual_i = 1;
  }

  // One clock cycle with `row` (or nothing) at the input and `res` (or zeros) as the
  // residual row; returns the output row if valid.
  bool Cycle(const int32_t* row, std::vector<int8_t>* out, const int8_t* res = nullptr) {
    uint32_t res_words[2] = {0, 0};
    if (res) sim::PackLanes(res, kLanes, res_words);
    sim::WritePort(vpu_.res_data_i, res_words);
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

void RunCase(bool relu, Pool pool, uint64_t seed,
             arith::VpuFunction fn = arith::VpuFunction::kNone) {
  std::mt19937_64 rng(seed);
  VpuHarness vpu;
  Params p = RandomParams(rng, relu, pool);
  p.fn = fn;
  vpu.Configure(p);
  constexpr int kRows = 400;  // a multiple of the 4-row pooling window
  std::vector<std::vector<int32_t>> rows(kRows, std::vector<int32_t>(kLanes));
  std::vector<std::vector<int8_t>> requant(kRows, std::vector<int8_t>(kLanes));
  for (int r = 0; r < kRows; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      // Mostly values near the requantized range, sometimes large ones that saturate.
      const int32_t span = (rng() % 4 == 0) ? (1 << 30) : (1 << 22);
      rows[r][l] = static_cast<int32_t>(rng() % (2u * span + 1)) - span;
      requant[r][l] = arith::ApplyVpuFunction(
          fn,
          arith::Requantize(rows[r][l] + p.bias[l], p.multiplier[l], p.shift[l], relu ? 0 : -128));
    }
  }
  std::vector<std::vector<int8_t>> expected;
  if (pool == kNone) {
    expected = requant;
  } else if (pool == kOverLanes) {  // lane l < 2: the largest of lanes 4l .. 4l + 3; the rest 0
    for (const std::vector<int8_t>& row : requant) {
      std::vector<int8_t> out(kLanes, 0);
      for (int l = 0; l < kLanes / 4; ++l)
        out[l] = *std::max_element(row.begin() + 4 * l, row.begin() + 4 * l + 4);
      expected.push_back(out);
    }
  } else {
    for (int r = 0; r < kRows; r += 4) {
      std::vector<int8_t> out(kLanes);
      for (int l = 0; l < kLanes; ++l) {
        int32_t sum = 0, mx = -128;
        for (int k = 0; k < 4; ++k) {
          sum += requant[r + k][l];
          mx = std::max<int32_t>(mx, requant[r + k][l]);
        }
        out[l] = pool == kAvg ? arith::AveragePool(sum, 4) : static_cast<int8_t>(mx);
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
TEST(TpuVpuTest, MaxPoolOverLanesMatchesSpec) { RunCase(false, kOverLanes, 10); }
TEST(TpuVpuTest, SigmoidTableMatchesSpec) {
  RunCase(false, kNone, 8, arith::VpuFunction::kSigmoid);
}
TEST(TpuVpuTest, TanhTableMatchesSpec) { RunCase(false, kNone, 9, arith::VpuFunction::kTanh); }
TEST(TpuVpuTest, TanhTableThenAveragePoolMatchesSpec) {
  RunCase(false, kAvg, 10, arith::VpuFunction::kTanh);
}
TEST(TpuVpuTest, ReluThenSigmoidTableMatchesSpec) {
  RunCase(true, kNone, 11, arith::VpuFunction::kSigmoid);
}

// The tables themselves, against their definition (contract/tpu_contract.toml): x = q /
// input_step, out = floor(127 f(x) + 1/2), the ends saturated and the middle as expected.
TEST(TpuVpuTest, FunctionTablesAreTheirDefinition) {
  for (int q = -128; q < 128; ++q) {
    const double s = 1 / (1 + std::exp(-q / double{hw::kVpuTableSigmoidInputStep}));
    const double t = std::tanh(q / double{hw::kVpuTableTanhInputStep});
    EXPECT_EQ(hw::kVpuTableSigmoid[q + 128], std::floor(127 * s + 0.5)) << q;
    EXPECT_EQ(hw::kVpuTableTanh[q + 128], std::floor(127 * t + 0.5)) << q;
  }
  EXPECT_EQ(hw::kVpuTableSigmoid[128], 64);  // sigmoid(0) = 1/2: 63.5 rounds up
  EXPECT_EQ(hw::kVpuTableTanh[128], 0);
  EXPECT_EQ(hw::kVpuTableSigmoid[0], 0);
  EXPECT_EQ(hw::kVpuTableTanh[0], -127);
  EXPECT_EQ(hw::kVpuTableTanh[255], 127);
}

// Random accumulator rows and residual rows through the residual stage, each residual row
// arriving with its row in stage 2 (two cycles after the row); `combine(y, r)` is what the
// stage must make of the row's requantized (and looked-up) value y and the residual lane r.
// The result leaves a cycle later than a plain row would.
std::vector<std::pair<std::vector<int8_t>, std::vector<int8_t>>> RunResidual(
    VpuHarness& vpu, const Params& p, std::mt19937_64& rng,
    const std::function<int8_t(int8_t, int8_t)>& combine) {
  constexpr int kRows = 200;
  std::vector<std::vector<int32_t>> rows(kRows, std::vector<int32_t>(kLanes));
  std::vector<std::vector<int8_t>> res(kRows, std::vector<int8_t>(kLanes)), expected;
  for (int r = 0; r < kRows; ++r) {
    std::vector<int8_t> want(kLanes);
    for (int l = 0; l < kLanes; ++l) {
      rows[r][l] = static_cast<int32_t>(rng() % (1u << 23)) - (1 << 22);
      res[r][l] = static_cast<int8_t>(rng());
      const int8_t y =
          arith::ApplyVpuFunction(p.fn, arith::Requantize(rows[r][l] + p.bias[l], p.multiplier[l],
                                                          p.shift[l], p.relu ? 0 : -128));
      want[l] = combine(y, res[r][l]);
    }
    expected.push_back(want);
  }
  std::vector<std::vector<int8_t>> got;
  std::vector<int8_t> out;
  for (int c = 0; c < kRows + 3; ++c) {  // row c in call c, its residual in call c + 2
    const int8_t* r = c >= 2 && c - 2 < kRows ? res[c - 2].data() : nullptr;
    if (vpu.Cycle(c < kRows ? rows[c].data() : nullptr, &out, r)) got.push_back(out);
    if (c == 1) EXPECT_EQ(got.size(), 0u) << "no result before the third edge";
    if (c == 2) EXPECT_EQ(got.size(), 1u) << "the first result after the third edge";
  }
  EXPECT_EQ(got.size(), expected.size());
  std::vector<std::pair<std::vector<int8_t>, std::vector<int8_t>>> pairs;
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i)
    pairs.emplace_back(got[i], expected[i]);
  return pairs;
}

// The residual add (activate residual).
TEST(TpuVpuTest, ResidualAddMatchesSpec) {
  VpuHarness vpu;
  std::mt19937_64 rng(7);
  const Params p = RandomParams(rng, true, kNone);
  vpu.Configure(p);
  const uint32_t ma = 1518000000u, mb = 900000000u, shift = 31;
  vpu.Residual(ma, mb, shift, /*relu=*/false);
  const auto rows = RunResidual(vpu, p, rng, [&](int8_t y, int8_t r) {
    return arith::AddRequantize(y, r, ma, mb, shift, -128);
  });
  int changed = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].first, rows[i].second) << "row " << i;
    for (const int8_t v : rows[i].first) changed += v != 127 && v != -128;
  }
  EXPECT_GT(changed, static_cast<int>(rows.size()) * kLanes / 2);  // most sums are not clamped
}

// The residual product (set_residual product): y * r * mul_a, rounded and shifted, with the
// sigmoid table before it (an LSTM gate times a row); the same timing as the sum.
TEST(TpuVpuTest, ResidualProductMatchesSpec) {
  VpuHarness vpu;
  std::mt19937_64 rng(12);
  Params p = RandomParams(rng, false, kNone);
  p.fn = arith::VpuFunction::kSigmoid;
  vpu.Configure(p);
  const uint32_t ma = 1100000000u, shift = 37;
  vpu.Residual(ma, 0, shift, /*relu=*/false, /*product=*/true);
  const auto rows = RunResidual(
      vpu, p, rng, [&](int8_t y, int8_t r) { return arith::MulRequantize(y, r, ma, shift, -128); });
  int inside = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].first, rows[i].second) << "row " << i;
    for (const int8_t v : rows[i].first) inside += v > -128 && v < 127 && v;
  }
  EXPECT_GT(inside, static_cast<int>(rows.size()) * kLanes / 4);  // many neither clamped nor 0
}

// A row comes out two cycles after it goes in, three with pooling over lanes (one more
// stage).
TEST(TpuVpuTest, LatencyIsTwoCyclesThreeOverLanes) {
  for (const Pool pool : {kNone, kOverLanes}) {
    VpuHarness vpu;
    std::mt19937_64 rng(6);
    vpu.Configure(RandomParams(rng, false, pool));
    const std::vector<int32_t> row(kLanes, 1000);
    const int latency = pool == kNone ? 2 : 3;
    std::vector<int8_t> out;
    EXPECT_FALSE(vpu.Cycle(row.data(), &out));  // edge 1: the row enters stage 1
    for (int edge = 2; edge <= latency + 1; ++edge)
      EXPECT_EQ(vpu.Cycle(nullptr, &out), edge == latency) << "pool " << pool << ", edge " << edge;
  }
}

}  // namespace
}  // namespace tpu
