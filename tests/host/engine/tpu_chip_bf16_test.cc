// The bfloat16 chip (docs/bf16.md, "The chip in bf16") on both engines: rows of 2N bytes
// through the DMA engines and the unified buffer, the bf16 matrix unit, the float32 vector
// unit (bias, ReLU, the upper bound, rounding, pooling), pad_min in bf16, and the format
// checks (set_format, wrong-format). Each result is compared with arith/bf16.h computed
// here in the chip's order. Each test is its own process (one SystemC system per process).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "arith/bf16.h"
#include "tests/host/engine/chip_test_util.h"

namespace tpu::test {
namespace {

using arith::Bf16OfFp32;
using arith::BitsOfFloat;

constexpr int kN = 4;

// The bf16 chip of the tests: small-16's buffers (the RTL model of a size without a preset
// has them), 4 x 4, bfloat16.
config::TpuConfig Bf16Chip() {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.array_dim = kN;
  c.dtype = hw::Dtype::kBf16;
  return c;
}

std::vector<uint8_t> Bytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint16_t> Elements(const std::vector<uint8_t>& b) {
  std::vector<uint16_t> v(b.size() / 2);
  std::memcpy(v.data(), b.data(), v.size() * 2);
  return v;
}

std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = Bf16OfFp32(BitsOfFloat(d(rng)));
  return v;
}

// A parameter set of the bf16 chip: N float32 biases, N float32 upper bounds, N unused
// bytes, padded to its 5 rows of 2N bytes.
std::vector<uint8_t> ParamSet(const std::vector<float>& bias, const std::vector<float>& hi) {
  std::vector<uint8_t> set(static_cast<size_t>(hw::ParamRows(2) * 2 * kN), 0);
  for (int l = 0; l < kN; ++l) {
    const uint32_t b = BitsOfFloat(bias[l]), h = BitsOfFloat(hi[l]);
    std::memcpy(&set[static_cast<size_t>(hw::kParamBiasByte * kN + 4 * l)], &b, 4);
    std::memcpy(&set[static_cast<size_t>(hw::kParamMultiplierByte * kN + 4 * l)], &h, 4);
  }
  return set;
}

class Bf16ChipTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  engine::ExecResult Run(const config::TpuConfig& c, const std::string& text,
                         std::vector<uint8_t> host = {}, std::vector<uint8_t> weights = {},
                         uint64_t out_addr = 0, uint64_t out_bytes = 0) {
    return engine::MakeChipEngine(GetParam(), c, {})
        ->Run(Job(text, std::move(host), std::move(weights), out_addr, out_bytes));
  }
};

// Where a GEMM's weight tiles come from: weight memory (read_weights), or unified-buffer
// rows (load_weights), as the tiles' rows or, with `transpose`, as their columns.
enum class WeightsFrom { kWeightMemory, kRows, kColumns };

// C = relu(min(A x W + bias, hi)) for A: 10 x 8, W: 8 x 4 (two K tiles), in the chip's
// order: each tile's column sums, added tile by tile, then the vector unit.
void GemmAndVectorUnit(EngineKind kind, WeightsFrom from) {
  const int m = 10, k = 8;
  std::vector<uint16_t> a = RandomBf16(static_cast<size_t>(m * k), 1);
  const std::vector<uint16_t> w = RandomBf16(static_cast<size_t>(k * kN), 2);
  a[3] = 0x8000;  // a -0 and a subnormal among the activations
  a[5] = 0x0001;
  const std::vector<float> bias = {0.5f, -0.25f, 1.0f, 0.0f};
  const std::vector<float> hi = {1.5f, INFINITY, 6.0f, 0.75f};
  // A's two K tiles are rows of the unified buffer: tile t of row i at row t x m + i.
  std::vector<uint16_t> rows(static_cast<size_t>(2 * m * kN));
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < m; ++i)
      for (int l = 0; l < kN; ++l)
        rows[static_cast<size_t>((t * m + i) * kN + l)] =
            a[static_cast<size_t>(i * k + t * kN + l)];
  std::vector<uint8_t> host = Bytes(rows);
  Put(&host, 0x400, ParamSet(bias, hi));
  // From the unified buffer: W's 8 rows at row 60, or each tile's transpose (row j of tile
  // t lane r: W's row 4t + r, lane j) for load_weights transpose to undo.
  std::vector<uint16_t> w_rows = w;
  if (from == WeightsFrom::kColumns)
    for (int t = 0; t < 2; ++t)
      for (int j = 0; j < kN; ++j)
        for (int r = 0; r < kN; ++r)
          w_rows[static_cast<size_t>((t * kN + j) * kN + r)] =
              w[static_cast<size_t>((t * kN + r) * kN + j)];
  Put(&host, 0x600, Bytes(w_rows));
  const std::string bring = from == WeightsFrom::kWeightMemory ? "read_weights addr=0 tiles=2\n"
                            : from == WeightsFrom::kRows
                                ? "read_host host=0x600 ub=60 rows=8\nload_weights ub=60 tiles=2\n"
                                : "read_host host=0x600 ub=60 rows=8\n"
                                  "load_weights ub=60 tiles=2 transpose\n";
  const std::string text = fmt::format(
      "set_format dtype=bf16\n"
      "read_host host=0 ub=0 rows={0}\nread_host host=0x400 params=1 rows=1\n{2}"
      "matmul ub=0 acc=0 rows={1} switch\nmatmul ub={1} acc=0 rows={1} accumulate switch\n"
      "activate acc=0 ub=100 rows={1} params=1 relu\nwrite_host ub=100 host=0x1000 rows={1}\n"
      "halt\n",
      2 * m, m, bring);
  const auto r =
      engine::MakeChipEngine(kind, Bf16Chip(), {})
          ->Run(Job(text, host,
                    from == WeightsFrom::kWeightMemory ? Bytes(w) : std::vector<uint8_t>{}, 0x1000,
                    static_cast<uint64_t>(m * kN * 2)));
  ASSERT_TRUE(r.ok) << r.message;
  std::vector<uint32_t> acc(static_cast<size_t>(m * kN));
  arith::Bf16Gemm(m, kN, k, kN, a.data(), w.data(), acc.data());
  const std::vector<uint16_t> got = Elements(r.host_out);
  int clamped = 0;
  for (int i = 0; i < m; ++i)
    for (int l = 0; l < kN; ++l) {
      const size_t j = static_cast<size_t>(i * kN + l);
      const uint16_t want = arith::Bf16Activate(arith::Fp32Add(acc[j], BitsOfFloat(bias[l])), true,
                                                BitsOfFloat(hi[l]));
      EXPECT_EQ(got[j], want) << "row " << i << " lane " << l;
      clamped += want == Bf16OfFp32(BitsOfFloat(hi[l]));
    }
  EXPECT_GT(clamped, 0);  // the upper bound took part
  const bool rows_in = from != WeightsFrom::kWeightMemory;
  EXPECT_EQ(r.counters.host_bytes_read,
            static_cast<uint64_t>(2 * m * kN * 2 + hw::ParamRows(2) * 2 * kN +
                                  (rows_in ? k * kN * 2 : 0)));
  EXPECT_EQ(r.counters.host_bytes_written, static_cast<uint64_t>(m * kN * 2));
  EXPECT_EQ(r.counters.weight_bytes_read, rows_in ? 0u : static_cast<uint64_t>(2 * kN * kN * 2));
  EXPECT_EQ(r.counters.weight_fifo_pushes, static_cast<uint64_t>(2 * kN));
  EXPECT_EQ(r.counters.param_writes, static_cast<uint64_t>(hw::ParamRows(2)));
  EXPECT_EQ(r.counters.macs, static_cast<uint64_t>(2 * m * kN * kN));
}

TEST_P(Bf16ChipTest, GemmAndVectorUnitEqualTheReference) {
  GemmAndVectorUnit(GetParam(), WeightsFrom::kWeightMemory);
}

// The same GEMM with W from unified-buffer rows (load_weights), as rows and transposed.
TEST_P(Bf16ChipTest, WeightsFromUnifiedBufferRowsEqualTheReference) {
  GemmAndVectorUnit(GetParam(), WeightsFrom::kRows);
}

TEST_P(Bf16ChipTest, TransposedWeightsFromUnifiedBufferRowsEqualTheReference) {
  GemmAndVectorUnit(GetParam(), WeightsFrom::kColumns);
}

// Pooled activates: four rows in, one out; the maximum and the float32 average; and over
// lanes (pool=lanes), a row per row, lane 0 the maximum of the four, the others 0.
TEST_P(Bf16ChipTest, PoolingEqualsTheReference) {
  std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(16 * kN), 3);
  x[7] = 0x7f80;           // +infinity in one window
  x[5 * kN + 3] = 0x4780;  // 65,536: lane 3 the largest of row 5 (pool=lanes)
  std::vector<uint16_t> identity(static_cast<size_t>(kN * kN), 0);
  for (int i = 0; i < kN; ++i) identity[static_cast<size_t>(i * kN + i)] = 0x3f80;  // 1.0
  std::vector<uint8_t> host = Bytes(x);
  Put(&host, 0x400, ParamSet({0, 0, 0, 0}, {INFINITY, INFINITY, INFINITY, INFINITY}));
  const auto r = Run(Bf16Chip(),
                     "set_format dtype=bf16\nread_host host=0 ub=0 rows=16\n"
                     "read_host host=0x400 params=0 rows=1\nread_weights addr=0 tiles=1\n"
                     "matmul ub=0 acc=0 rows=16 switch\n"
                     "activate acc=0 ub=40 rows=16 params=0 pool=max\n"
                     "activate acc=0 ub=44 rows=16 params=0 pool=avg\n"
                     "activate acc=0 ub=48 rows=16 params=0 pool=lanes\n"
                     "write_host ub=40 host=0x1000 rows=24\nhalt\n",
                     host, Bytes(identity), 0x1000, 24 * kN * 2);
  ASSERT_TRUE(r.ok) << r.message;
  const std::vector<uint16_t> got = Elements(r.host_out);
  // Through the identity each value passes exactly (-0 becomes +0), but the infinity's row
  // is NaN in the other lanes (infinity x 0).
  std::vector<uint32_t> acc(static_cast<size_t>(16 * kN));
  arith::Bf16TileProduct(16, kN, kN, kN, x.data(), kN, identity.data(), kN, acc.data(), kN, false);
  for (int win = 0; win < 4; ++win)
    for (int l = 0; l < kN; ++l) {
      uint16_t v[4];
      for (int q = 0; q < 4; ++q)
        v[q] =
            arith::Bf16Activate(arith::Fp32Add(acc[static_cast<size_t>((4 * win + q) * kN + l)], 0),
                                false, arith::kFp32Inf);
      EXPECT_EQ(got[static_cast<size_t>(win * kN + l)], arith::Bf16Pool(v, false)) << "max " << win;
      EXPECT_EQ(got[static_cast<size_t>((4 + win) * kN + l)], arith::Bf16Pool(v, true))
          << "avg " << win;
    }
  for (int row = 0; row < 16; ++row) {
    uint16_t v[4];
    for (int l = 0; l < 4; ++l)
      v[l] = arith::Bf16Activate(arith::Fp32Add(acc[static_cast<size_t>(row * kN + l)], 0), false,
                                 arith::kFp32Inf);
    for (int l = 0; l < kN; ++l)
      EXPECT_EQ(got[static_cast<size_t>((8 + row) * kN + l)],
                l == 0 ? arith::Bf16Pool(v, false) : 0)
          << "lanes " << row << " lane " << l;
  }
}

// activate residual in float32 (arith::Bf16ResidualAdd): the vector unit's value y of each
// accumulator row plus the residual row, set_residual's ReLU, one rounding. A y of -0 (a
// subnormal sum, flushed) plus a residual -0 is +0: PlusZero. The second activate writes
// onto its own residual rows (each read before it is written).
TEST_P(Bf16ChipTest, ResidualAddEqualsTheReference) {
  const int m = 8;
  std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(m * kN), 4);
  const std::vector<uint16_t> res = RandomBf16(static_cast<size_t>(m * kN), 5);
  x[0] = 0x80c0;  // -1.5 x 2^-126: plus the bias 2^-126 a subnormal, flushed to -0
  std::vector<uint16_t> rows = x;
  rows.insert(rows.end(), res.begin(), res.end());
  rows[static_cast<size_t>(m * kN)] = 0x8000;  // the residual of lane 0, row 0: -0
  std::vector<uint16_t> identity(static_cast<size_t>(kN * kN), 0);
  for (int i = 0; i < kN; ++i) identity[static_cast<size_t>(i * kN + i)] = 0x3f80;
  const std::vector<float> bias = {0x1p-126f, 0.25f, -0.5f, 0.0f};
  std::vector<uint8_t> host = Bytes(rows);
  Put(&host, 0x400, ParamSet(bias, {INFINITY, INFINITY, INFINITY, INFINITY}));
  const auto r = Run(Bf16Chip(),
                     fmt::format("set_format dtype=bf16\nread_host host=0 ub=0 rows={0}\n"
                                 "read_host host={2} ub=60 rows={1}\n"
                                 "read_host host=0x400 params=0 rows=1\n"
                                 "read_weights addr=0 tiles=1\nmatmul ub=0 acc=0 rows={1} switch\n"
                                 "set_residual ub={1} mul_a=1 mul_b=1 shift=1\n"
                                 "activate acc=0 ub=40 rows={1} params=0 residual\n"
                                 "set_residual ub=60 mul_a=1 mul_b=1 shift=1 relu\n"
                                 "activate acc=0 ub=60 rows={1} params=0 residual\n"
                                 "write_host ub=40 host=0x1000 rows={1}\n"
                                 "write_host ub=60 host={3} rows={1}\nhalt\n",
                                 2 * m, m, m * kN * 2, 0x1000 + m * kN * 2),
                     host, Bytes(identity), 0x1000, static_cast<uint64_t>(2 * m * kN * 2));
  ASSERT_TRUE(r.ok) << r.message;
  std::vector<uint32_t> acc(static_cast<size_t>(m * kN));
  arith::Bf16TileProduct(m, kN, kN, kN, x.data(), kN, identity.data(), kN, acc.data(), kN, false);
  const std::vector<uint16_t> got = Elements(r.host_out);
  for (int relu = 0; relu < 2; ++relu)
    for (int i = 0; i < m * kN; ++i) {
      const size_t j = static_cast<size_t>(i);
      const uint16_t y = arith::Bf16Activate(arith::Fp32Add(acc[j], BitsOfFloat(bias[j % kN])),
                                             false, arith::kFp32Inf);
      EXPECT_EQ(got[static_cast<size_t>(relu * m * kN) + j],
                arith::Bf16ResidualAdd(y, rows[static_cast<size_t>(m * kN) + j], relu == 1))
          << "relu " << relu << " value " << i;
    }
  EXPECT_EQ(got[0], 0x0000);  // -0 + -0 as +0, not -0
}

// Max pooling through the accumulators with pad_min: the padding reads the most negative
// finite bf16, so a window of negative values keeps its own maximum (an -infinity padding
// would make NaN of its products with the identity's zeros).
TEST_P(Bf16ChipTest, PadMinPadsWithTheMostNegativeFiniteValue) {
  std::vector<uint16_t> map(static_cast<size_t>(4 * kN));
  for (size_t i = 0; i < map.size(); ++i)
    map[i] = Bf16OfFp32(BitsOfFloat(-1.0f - static_cast<float>(i)));
  std::vector<uint16_t> identity(static_cast<size_t>(kN * kN), 0);
  for (int i = 0; i < kN; ++i) identity[static_cast<size_t>(i * kN + i)] = 0x3f80;
  std::vector<uint8_t> host = Bytes(map);
  Put(&host, 0x400, ParamSet({0, 0, 0, 0}, {INFINITY, INFINITY, INFINITY, INFINITY}));
  // A 2 x 2 map of 4 channels, 3 x 3 windows with padding 1: one output pixel.
  std::string text =
      "set_format dtype=bf16\nread_host host=0 ub=0 rows=4\nread_host host=0x400 params=0 rows=1\n"
      "read_weights addr=0 tiles=1\n"
      "set_window in_h=2 in_w=2 kh=3 kw=3 out_h=1 out_w=1 stride_y=1 stride_x=1 channels=4 "
      "pad_top=1 pad_left=1 pixel_bytes=4 pad_min\n";
  for (int tap = 0; tap < 9; ++tap)
    text += fmt::format("matmul ub=0 acc=0 rows=1 ktile={} window{}\n", tap,
                        tap == 0 ? " switch" : " max");
  text += "activate acc=0 ub=8 rows=1 params=0\nwrite_host ub=8 host=0x1000 rows=1\nhalt\n";
  const auto r = Run(Bf16Chip(), text, host, Bytes(identity), 0x1000, kN * 2);
  ASSERT_TRUE(r.ok) << r.message;
  const std::vector<uint16_t> got = Elements(r.host_out);
  for (int c = 0; c < kN; ++c)
    EXPECT_EQ(got[static_cast<size_t>(c)], map[static_cast<size_t>(c)]) << "channel " << c;
}

// The format checks: the chip's own status, at the instruction that broke the rule. (One
// engine per test: the rtl engine's SystemC system is one per process, and runs job after
// job.)
struct FormatCase {
  const char* text;
  const char* status;
  uint64_t pc;
};

void ExpectStatus(engine::ChipEngine& chip, const FormatCase& c) {
  const auto r = chip.Run(Job(c.text, std::vector<uint8_t>(64, 0)));
  EXPECT_STREQ(hw::Name(r.chip_status), c.status) << c.text;
  if (std::string(c.status) == "ok") return;
  EXPECT_EQ(r.state, engine::RunEnd::kError) << c.text;
  EXPECT_EQ(r.error_pc, c.pc) << c.text;
  EXPECT_EQ(r.counters.host_bytes_read, 0u) << c.text;
  if (std::string(c.status) == "wrong-format") {  // the message says what a program needs
    EXPECT_NE(r.message.find("start with set_format dtype=bf16"), std::string::npos) << r.message;
  }
}

TEST_P(Bf16ChipTest, ProgramsOfTheOtherFormatStopWithWrongFormat) {
  const FormatCase cases[] = {
      {"nop\nread_host host=0 ub=0 rows=1\nhalt\n", "wrong-format", 1},
      {"set_format\nhalt\n", "wrong-format", 0},
      {"set_format dtype=bf16\nactivate acc=0 ub=0 rows=1 params=0 fn=tanh\nhalt\n", "wrong-format",
       1},
      {"set_format dtype=bf16\nset_residual ub=0 mul_a=1 mul_b=0 shift=1 product\nhalt\n",
       "wrong-format", 1},
      {"set_format dtype=bf16\nset_residual ub=0 mul_a=1 mul_b=1 shift=1\nhalt\n", "ok", 0},
      {"set_format dtype=bf16\nnop\nsync\nread_host host=0 ub=0 rows=1\nhalt\n", "ok", 0},
  };
  const auto chip = engine::MakeChipEngine(GetParam(), Bf16Chip(), {});
  for (const FormatCase& c : cases) ExpectStatus(*chip, c);
}

TEST_P(Bf16ChipTest, TheInt8ChipRefusesBf16Programs) {
  const auto chip = engine::MakeChipEngine(GetParam(), config::LoadConfig("teach-4"), {});
  ExpectStatus(*chip, {"set_format dtype=bf16\nhalt\n", "wrong-format", 0});
  ExpectStatus(*chip, {"set_format\nread_host host=0 ub=0 rows=1\nhalt\n", "ok", 0});
}

// Rows of 2N bytes in the range checks: a read that fits N-byte rows but not 2N-byte ones.
TEST_P(Bf16ChipTest, HostRangesCountRowsOfTwoNBytes) {
  config::TpuConfig c = Bf16Chip();
  c.host_mem_bytes = 4096;
  const auto chip = engine::MakeChipEngine(GetParam(), c, {});
  ExpectStatus(*chip, {"set_format dtype=bf16\nread_host host=0 ub=0 rows=512\nhalt\n", "ok", 0});
  ExpectStatus(*chip, {"set_format dtype=bf16\nread_host host=8 ub=0 rows=512\nhalt\n",
                       "buffer-overflow", 1});
}

INSTANTIATE_TEST_SUITE_P(Engines, Bf16ChipTest,
                         ::testing::Values(EngineKind::kRtl, EngineKind::kFast), EngineParamName);

}  // namespace
}  // namespace tpu::test
