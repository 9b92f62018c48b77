// The float32 vector unit (`vector`, docs/vpu.md "The vector unit") on both engines of the
// 4 x 4 bf16 chip: every operation in every operand format against the CPU reference
// (arith/vector.h, itself built from arith/fp32.h), the timing rule of docs/timing.md, the
// checks and the interlocks. Each test is its own process (one SystemC system per process).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "arith/bf16.h"
#include "arith/vector.h"
#include "tests/host/engine/chip_test_util.h"

namespace tpu::test {
namespace {

constexpr int kN = 4;
using hw::VectorOp;

config::TpuConfig Bf16Chip() {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.array_dim = kN;
  c.dtype = hw::Dtype::kBf16;
  return c;
}

// Buffer rows of bfloat16 bit patterns: mostly values of a normal distribution, with the
// cases the rules name (zeros of both signs, a subnormal, infinities, NaN, the extremes)
// and float32 low halves of random bits.
std::vector<uint16_t> Rows(int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x7f80, 0xff80, 0x7fc1,
                              0x7f7f, 0xff7f, 0x0080, 0x3f80, 0x42b3, 0xc2d1};
  std::vector<uint16_t> v(static_cast<size_t>(rows * kN));
  for (size_t i = 0; i < v.size(); ++i) {
    if (rng() % 8 == 0) {
      v[i] = special[rng() % std::size(special)];
    } else if ((i / kN) % 2 == 1 && rng() % 2) {
      v[i] = static_cast<uint16_t>(rng());  // a float32's low half
    } else {
      v[i] = arith::Bf16OfFp32(arith::BitsOfFloat(d(rng)));
    }
  }
  return v;
}

std::string Asm(const arith::VectorInstr& v) {
  const hw::VectorKind kind = hw::Info(v.op).kind;
  const bool b = kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect;
  return fmt::format("vector op={} a={} out={} rows={}{}{}{}{}{}\n", hw::Info(v.op).name, v.a,
                     v.out, v.rows, b ? fmt::format(" b={}", v.b) : "", v.a32 ? " a32" : "",
                     b && v.b32 ? " b32" : "", v.o32 ? " o32" : "", b && v.bcast ? " bcast" : "");
}

class VectorUnitTest : public ::testing::TestWithParam<EngineKind> {};

// Every operation with operands and results in both formats, b as rows and broadcast, in
// place and apart: the buffer after the program equals the reference's.
TEST_P(VectorUnitTest, EveryOperationEqualsTheReference) {
  constexpr int kInputs = 64, kTotal = 768;
  std::vector<uint16_t> ub(static_cast<size_t>(kTotal * kN), 0);
  const std::vector<uint16_t> in = Rows(kInputs, 7);
  std::copy(in.begin(), in.end(), ub.begin());
  std::vector<arith::VectorInstr> prog;
  uint64_t out = kInputs;
  for (int op = 0; op < hw::kNumVectorOps; ++op) {
    for (int form = 0; form < 4; ++form) {
      arith::VectorInstr v;
      v.op = static_cast<VectorOp>(op);
      v.rows = static_cast<uint32_t>(3 + form);
      v.a32 = form & 1;
      v.b32 = form & 2;
      v.o32 = form == 1 || form == 2;
      v.bcast = form == 3;
      v.a = static_cast<uint64_t>(form * 5);
      v.b = 30 + static_cast<uint64_t>(op % 4);
      v.out = out;
      out += 2 * v.rows;
      prog.push_back(v);
    }
  }
  // In place: a result over its operand a; a mask selecting over the result's old rows.
  arith::VectorInstr inplace{VectorOp::kMul, kInputs, 40, kInputs, 6, false, true, false, false};
  prog.push_back(inplace);
  prog.push_back({VectorOp::kSelect, 50, 10, kInputs + 8, 4, false, false, false, false});
  ASSERT_LT(out, static_cast<uint64_t>(kTotal));
  std::vector<uint8_t> host(ub.size() * 2);
  std::memcpy(host.data(), ub.data(), host.size());
  std::string text = fmt::format("set_format dtype=bf16\nread_host host=0 ub=0 rows={}\n", kTotal);
  for (const arith::VectorInstr& v : prog) {
    text += Asm(v);
    arith::VectorRun(v, ub.data(), kN);
  }
  text += fmt::format("write_host ub=0 host=0x10000 rows={}\nhalt\n", kTotal);
  const auto chip = engine::MakeChipEngine(GetParam(), Bf16Chip(), {});
  const auto r = chip->Run(Job(text, host, {}, 0x10000, ub.size() * 2));
  ASSERT_TRUE(r.ok) << r.message;
  std::vector<uint16_t> got(ub.size());
  std::memcpy(got.data(), r.host_out.data(), r.host_out.size());
  for (size_t i = 0; i < ub.size(); ++i)
    ASSERT_EQ(got[i], ub[i]) << "row " << i / kN << " lane " << i % kN;
  EXPECT_GT(r.counters.busy_vector, 0u);
}

// A vector instruction of R rows keeps the unit busy ceil(R / sublanes) + latency + 1
// cycles (docs/timing.md, "The vector unit"), and reads and writes the rows it names.
TEST_P(VectorUnitTest, CyclesFollowTheTimingRule) {
  const auto chip = engine::MakeChipEngine(GetParam(), Bf16Chip(), {});
  for (const VectorOp op : {VectorOp::kAdd, VectorOp::kExp, VectorOp::kRecip, VectorOp::kLaneSum,
                            VectorOp::kRowSum, VectorOp::kSelect, VectorOp::kLog}) {
    for (const uint32_t rows : {1u, 7u}) {
      arith::VectorInstr v{op, 0, 100, 200, rows, true, false, false, false};
      const auto r = chip->Run(Job("set_format dtype=bf16\n" + Asm(v) + "halt\n"));
      ASSERT_TRUE(r.ok) << r.message;
      const uint64_t latency = static_cast<uint64_t>(hw::Info(op).latency);
      EXPECT_EQ(r.counters.busy_vector, rows + latency + 1) << Asm(v);
      const hw::VectorKind kind = hw::Info(op).kind;
      const uint64_t b =
          kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect ? rows : 0;
      const uint64_t c = kind == hw::VectorKind::kSelect ? rows : 0;
      EXPECT_EQ(r.counters.ub_reads, 2 * rows + b + c) << Asm(v);
      EXPECT_EQ(r.counters.ub_writes, kind == hw::VectorKind::kRows ? 1u : rows) << Asm(v);
    }
  }
}

struct CheckCase {
  const char* text;
  const char* status;
};

// The checks: operands, ranges, a result that overlaps an operand without being it.
TEST_P(VectorUnitTest, BadOperandsStopTheChip) {
  const CheckCase cases[] = {
      {"vector op=add a=0 b=8 out=16 rows=4", "ok"},
      {"vector op=add a=0 b=8 out=0 rows=4", "ok"},               // in place
      {"vector op=add a=0 b=8 out=0 rows=4 o32", "bad-operand"},  // overlaps a, not it
      {"vector op=add a=0 b=8 out=2 rows=4", "bad-operand"},
      {"vector op=add a=0 b=16 out=16 rows=4 bcast", "bad-operand"},  // over b's one row
      {"vector op=add a=0 b=20 out=16 rows=4 bcast", "ok"},
      {"vector op=row_sum a=0 out=1 rows=4", "bad-operand"},
      {"vector op=row_sum a=0 out=4 rows=4", "ok"},
      {"vector op=add a=16380 b=0 out=100 rows=4", "ok"},
      {"vector op=add a=16380 b=0 out=100 rows=4 a32", "buffer-overflow"},
      {"vector op=add a=16384 b=0 out=100 rows=4", "address-out-of-range"},
      {"raw 0x1100000000000020000000000004000d", "bad-operand"},  // operation 17
      {"raw 0x0900000800000020000000000004000d", "bad-operand"},  // exp with b=8
      {"raw 0x0000000800000020000000000004100d", "bad-operand"},  // flag bit 4
  };
  const auto chip = engine::MakeChipEngine(GetParam(), Bf16Chip(), {});
  for (const CheckCase& c : cases) {
    const auto r = chip->Run(Job(std::string("set_format dtype=bf16\n") + c.text + "\nhalt\n"));
    EXPECT_STREQ(hw::Name(r.chip_status), c.status) << c.text;
    if (std::string(c.status) != "ok") {
      EXPECT_EQ(r.error_pc, 1u) << c.text;
    }
  }
}

// An int8 chip has no float32 vector unit.
TEST_P(VectorUnitTest, TheInt8ChipRefusesIt) {
  const auto chip = engine::MakeChipEngine(GetParam(), config::LoadConfig("teach-4"), {});
  const auto r = chip->Run(Job("vector op=add a=0 b=8 out=16 rows=4\nhalt\n"));
  EXPECT_STREQ(hw::Name(r.chip_status), "wrong-format");
  EXPECT_EQ(r.error_pc, 0u);
}

// The interlocks: a vector instruction waits for the rows a DMA still writes, and a
// write_host of its result waits for it; the result is the reference's.
TEST_P(VectorUnitTest, WaitsForTheRowsItReadsAndIsWaitedFor) {
  std::vector<uint16_t> in = Rows(8, 3);
  std::vector<uint8_t> host(in.size() * 2);
  std::memcpy(host.data(), in.data(), host.size());
  const auto chip = engine::MakeChipEngine(GetParam(), Bf16Chip(), {});
  const auto r =
      chip->Run(Job("set_format dtype=bf16\nread_host host=0 ub=0 rows=8\n"
                    "vector op=exp a=0 out=8 rows=8\n"
                    "write_host ub=8 host=0x1000 rows=8\nhalt\n",
                    host, {}, 0x1000, host.size()));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_GT(r.counters.issue_stall_ub_hazard, 0u);
  std::vector<uint16_t> ub(16 * kN, 0);
  std::copy(in.begin(), in.end(), ub.begin());
  arith::VectorRun({VectorOp::kExp, 0, 0, 8, 8, false, false, false, false}, ub.data(), kN);
  std::vector<uint16_t> got(8 * kN);
  std::memcpy(got.data(), r.host_out.data(), r.host_out.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], ub[8 * kN + i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Engines, VectorUnitTest,
                         ::testing::Values(EngineKind::kRtl, EngineKind::kFast), EngineParamName);

}  // namespace
}  // namespace tpu::test
