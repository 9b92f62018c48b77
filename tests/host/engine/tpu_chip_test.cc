// The whole chip on both engines (rtl: rtl/tpu_top.sv in the SystemC system, driven through
// the TLM socket; fast: the C++ model of fast/): every instruction, a tiled GEMM against
// Eigen and the matrix-subsystem path, the VPU against the CPU int8 reference, overlap,
// errors and the watchdog. Each test is its own process (the SystemC kernel elaborates
// once per process).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/engine/engine_factory.h"
#include "host/engine/rtl_engine.h"
#include "host/gemm/gemm_runner.h"
#include "host/isa/program_builder.h"
#include "tests/host/engine/chip_test_util.h"
#include "tests/test_util.h"

namespace tpu::test {
namespace {

class ChipTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  std::unique_ptr<engine::ChipEngine> Make(const config::TpuConfig& c,
                                           engine::EngineOptions o = {}) {
    return engine::MakeChipEngine(GetParam(), c, o);
  }
};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST_P(ChipTest, NopSyncHaltRetireInOrder) {
  const auto r = RunChip(GetParam(), "teach-4", "nop\nnop\nsync\nhalt\n");
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.state, engine::RunEnd::kHalted);
  EXPECT_EQ(r.chip_status, hw::Status::kOk);
  EXPECT_EQ(r.counters.instructions, 4u);
  EXPECT_EQ(r.counters.macs, 0u);
  EXPECT_GT(r.cycles, 0u);
}

TEST_P(ChipTest, ReadHostThenWriteHostCopiesRowsThroughTheUnifiedBuffer) {
  const std::vector<uint8_t> data = RandomBytes(4 * 37, 1);
  const auto r = RunChip(GetParam(), "teach-4",
                         "read_host host=0 ub=100 rows=37\n"
                         "write_host ub=100 host=0x1000 rows=37\nhalt\n",
                         data, {}, 0x1000, data.size());
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.host_out, data);
  EXPECT_EQ(r.counters.host_bytes_read, data.size());
  EXPECT_EQ(r.counters.host_bytes_written, data.size());
  EXPECT_EQ(r.counters.ub_writes, 37u);
  EXPECT_EQ(r.counters.ub_reads, 37u);
  // write_host waited for read_host (same DMA engine, same rows).
  EXPECT_GT(r.counters.issue_stall_unit_busy, 0u);
}

TEST_P(ChipTest, ReadWeightsStreamsTilesIntoTheFifo) {
  const auto r = RunChip(GetParam(), "teach-4", "read_weights addr=0x40 tiles=3\nhalt\n", {},
                         RandomBytes(0x40 + 3 * 16, 2));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.counters.weight_bytes_read, 3u * 16u);
  EXPECT_EQ(r.counters.weight_fifo_pushes, 12u);
  // The matrix unit pulls one tile into its shadow registers; no matmul switched it in.
  EXPECT_EQ(r.counters.weight_fifo_pops, 4u);
  EXPECT_EQ(r.counters.weight_tiles, 0u);
}

TEST_P(ChipTest, HostMemoryLatencyAndBandwidthShowInCycles) {
  // 64 rows of 4 bytes: at 1 byte per cycle each row holds the channel 4 cycles.
  auto run = [this](int bytes_per_cycle, int latency) {
    config::TpuConfig c = config::LoadConfig("teach-4");
    c.host_mem_bytes_per_cycle = bytes_per_cycle;
    c.host_mem_latency_cycles = latency;
    return Make(c)->Run(Job("read_host host=0 ub=0 rows=64\nhalt\n", RandomBytes(256, 3)));
  };
  // One system per process: compare against the cycle count the timing model implies.
  const auto r = run(1, 30);
  ASSERT_TRUE(r.ok) << r.message;
  // 64 rows x 4 cycles of channel time, the last row's latency, and a few cycles of
  // issue and write-back.
  EXPECT_GE(r.cycles, 64u * 4u + 30u);
  EXPECT_LE(r.cycles, 64u * 4u + 30u + 8u);
  EXPECT_GE(r.counters.host_mem_stall, 63u * 3u);  // every row after the first waits
}

TEST_P(ChipTest, TiledGemmProgramEqualsEigenAndTheMatrixSubsystemPath) {
  const int n = 16;
  const Matrix<int8_t> a = gemm::RandomInt8(40, 37, 11);
  const Matrix<int8_t> b = gemm::RandomInt8(37, 35, 12);
  const GemmProgram g = MakeGemmProgram(a.rows, b, config::LoadConfig("small-16"));
  const auto chip = Make(config::LoadConfig("small-16"));
  const compiler::GemmRun<int8_t> run = LoadAndRun(*chip, g, a);
  const engine::ExecResult& r = run.result;
  ASSERT_TRUE(r.ok) << r.message;
  const Matrix<int8_t>& got = run.c;
  const Matrix<int8_t> want = g.Expected(gemm::ReferenceGemm(a, b));
  EXPECT_EQ(got.data, want.data);
  // The same product on the matrix-subsystem model (`tpusim gemm`), requantized alike.
  const gemm::GemmRunResult mxu = RunOnRtl(a, b, n);
  ASSERT_TRUE(mxu.matches_reference);
  EXPECT_EQ(got.data, g.Expected(mxu.c).data);
  EXPECT_EQ(r.counters.macs, static_cast<uint64_t>(g.kt * g.nt * 40 * n * n));
  EXPECT_EQ(r.counters.weight_tiles, static_cast<uint64_t>(g.kt * g.nt));
  // Some outputs are neither saturated nor zero, so the comparison means something.
  const auto mid = std::count_if(got.data.begin(), got.data.end(),
                                 [](int8_t v) { return v > -128 && v < 127 && v != 0; });
  EXPECT_GT(mid, static_cast<long>(got.data.size() / 4));
}

TEST_P(ChipTest, TiledGemmOnTheFourByFourChip) {
  const Matrix<int8_t> a = gemm::RandomInt8(9, 10, 21);
  const Matrix<int8_t> b = gemm::RandomInt8(10, 7, 22);
  const GemmProgram g = MakeGemmProgram(a.rows, b, config::LoadConfig("teach-4"));
  const auto chip = Make(config::LoadConfig("teach-4"));
  const compiler::GemmRun<int8_t> run = LoadAndRun(*chip, g, a);
  ASSERT_TRUE(run.result.ok) << run.result.message;
  EXPECT_EQ(run.c.data, g.Expected(gemm::ReferenceGemm(a, b)).data);
  // Compiled and loaded once: a second A is all the next run writes (B and the parameter
  // sets stay in the chip's memories), in the same cycles.
  const Matrix<int8_t> a2 = gemm::RandomInt8(9, 10, 23);
  const compiler::GemmRun<int8_t> again = g.Run(*chip, a2);
  ASSERT_TRUE(again.result.ok) << again.result.message;
  EXPECT_EQ(again.c.data, g.Expected(gemm::ReferenceGemm(a2, b)).data);
  EXPECT_NE(again.c.data, run.c.data);
  EXPECT_EQ(again.result.cycles, run.result.cycles);
  EXPECT_THROW(g.Run(*chip, b), UsageError);  // not 9 x 10
}

// Every dependency through on-chip memory is an interlock: the matmul waits for the rows
// the host DMA is still bringing (slow memory), the activate for the matmul's last row,
// the write_host for the activate's output. Wrong ordering would read stale rows.
TEST_P(ChipTest, InterlocksKeepDependentInstructionsInOrder) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.host_mem_latency_cycles = 200;
  const auto d = Make(c);
  const int n = 4;
  const Matrix<int8_t> a = gemm::RandomInt8(8, n, 71);
  const Matrix<int8_t> b = gemm::RandomInt8(n, n, 72);
  std::mt19937 rng(73);
  const GemmParams p = RandomGemmParams(n, rng, 36, 40);
  engine::ExecJob job;
  job.program = isa::Assemble(
      "read_weights addr=0 tiles=1\nread_host host=0x100 params=0 rows=1\n"
      "read_host host=0 ub=0 rows=8\nmatmul ub=0 acc=0 rows=8 switch\n"
      "activate acc=0 ub=100 rows=8 params=0\nwrite_host ub=100 host=0x200 rows=8\nhalt\n",
      "t");
  Put(&job.host_image, 0, std::vector<uint8_t>(a.data.begin(), a.data.end()));
  Put(&job.host_image, 0x100, ParamBytes(p, n));
  job.weight_image.assign(b.data.begin(), b.data.end());
  job.host_out_addr = 0x200;
  job.host_out_bytes = 8 * n;
  const auto r = d->Run(job);
  ASSERT_TRUE(r.ok) << r.message;
  const Matrix<int32_t> cc = gemm::ReferenceGemm(a, b);
  for (int i = 0; i < 8; ++i) {
    for (int l = 0; l < n; ++l) {
      EXPECT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>(i * n + l)]),
                arith::Requantize(cc.at(i, l) + p.bias[l], p.multiplier[l], p.shift[l], -128))
          << i << "," << l;
    }
  }
  EXPECT_GT(r.counters.issue_stall_ub_hazard, 200u);     // matmul and write_host waited
  EXPECT_GT(r.counters.issue_stall_acc_hazard, 2u * n);  // activate waited for the drain
}

// The operands of C = A B requantized on teach-4, A 8 x 4 and B 4 x 4, from seeds s, s + 1
// and s + 2.
struct SmallGemm {
  Matrix<int8_t> a, b;
  GemmParams p;
};
SmallGemm MakeSmallGemm(uint32_t s) {
  std::mt19937 rng(s + 2);
  return {gemm::RandomInt8(8, 4, s), gemm::RandomInt8(4, 4, s + 1),
          RandomGemmParams(4, rng, 36, 40)};
}

// The job of program `text` on g: A at host byte 0, B at weight byte 0x80, the parameter
// set at byte 0x100 of host memory (of weight memory with `set_in_hbm`), 8 output rows of
// N = 4 read back from host byte 0x200.
engine::ExecJob SmallGemmJob(const std::string& text, const SmallGemm& g, bool set_in_hbm) {
  engine::ExecJob job;
  job.program = isa::Assemble(text, "t");
  Put(&job.host_image, 0, std::vector<uint8_t>(g.a.data.begin(), g.a.data.end()));
  Put(set_in_hbm ? &job.weight_image : &job.host_image, 0x100, ParamBytes(g.p, 4));
  Put(&job.weight_image, 0x80, std::vector<uint8_t>(g.b.data.begin(), g.b.data.end()));
  job.host_out_addr = 0x200;
  job.host_out_bytes = 8 * 4;
  return job;
}

// load_weights: B's tile from unified-buffer rows, as its rows or (transpose) as the rows
// of Bᵀ, multiplies as B from weight memory does: C = A B requantized, A 8 x 4, B 4 x 4.
TEST_P(ChipTest, LoadWeightsTakesTilesFromUnifiedBufferRows) {
  const int n = 4;
  const auto [a, b, p] = MakeSmallGemm(81);
  std::vector<uint8_t> bt(static_cast<size_t>(n * n));  // row j, lane k: B's row k, lane j
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < n; ++k)
      bt[static_cast<size_t>(j * n + k)] = static_cast<uint8_t>(b.at(k, j));
  const Matrix<int32_t> cc = gemm::ReferenceGemm(a, b);
  const auto chip = Make(config::LoadConfig("teach-4"));  // one system per process
  for (const bool transpose : {false, true}) {
    engine::ExecJob job;
    job.program = isa::Assemble(
        fmt::format("read_host host=0x100 params=0 rows=1\nread_host host=0 ub=0 rows=8\n"
                    "read_host host=0x80 ub=20 rows=4\nload_weights ub=20 tiles=1{}\n"
                    "matmul ub=0 acc=0 rows=8 switch\nactivate acc=0 ub=100 rows=8 params=0\n"
                    "write_host ub=100 host=0x200 rows=8\nhalt\n",
                    transpose ? " transpose" : ""),
        "t");
    Put(&job.host_image, 0, std::vector<uint8_t>(a.data.begin(), a.data.end()));
    Put(&job.host_image, 0x80, transpose ? bt : std::vector<uint8_t>(b.data.begin(), b.data.end()));
    Put(&job.host_image, 0x100, ParamBytes(p, n));
    job.host_out_addr = 0x200;
    job.host_out_bytes = 8 * n;
    const auto r = chip->Run(job);
    ASSERT_TRUE(r.ok) << r.message;
    for (int i = 0; i < 8; ++i)
      for (int l = 0; l < n; ++l)
        EXPECT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>(i * n + l)]),
                  arith::Requantize(cc.at(i, l) + p.bias[l], p.multiplier[l], p.shift[l], -128))
            << "transpose " << transpose << ", row " << i << ", lane " << l;
    EXPECT_EQ(r.counters.weight_bytes_read, 0u);
    EXPECT_EQ(r.counters.weight_fifo_pushes, static_cast<uint64_t>(n));
    EXPECT_EQ(r.counters.weight_tiles, 1u);
  }
}

// The timing rules (docs/timing.md): with room in the FIFO a tile takes N cycles, or
// 2N + 1 through the transposing tile buffer; each read is a unified-buffer read.
TEST_P(ChipTest, LoadWeightsTakesNCyclesATileOrTwoNPlusOneTransposed) {
  const uint64_t n = 4;
  const auto chip = Make(config::LoadConfig("teach-4"));
  for (const bool transpose : {false, true}) {
    uint64_t cycles[2] = {}, reads[2] = {};
    for (int i = 0; i < 2; ++i) {
      const int tiles = 1 + 2 * i;  // 1, then 3 (the FIFO holds 4, the shadow registers 1)
      const auto r = chip->Run(Job(fmt::format("read_host host=0 ub=0 rows=12\nsync\n"
                                               "load_weights ub=0 tiles={}{}\nhalt\n",
                                               tiles, transpose ? " transpose" : ""),
                                   RandomBytes(48, 84)));
      ASSERT_TRUE(r.ok) << r.message;
      cycles[i] = r.cycles;
      reads[i] = r.counters.ub_reads;
      EXPECT_EQ(r.counters.weight_fifo_pushes, tiles * n);
    }
    EXPECT_EQ(cycles[1] - cycles[0], 2 * (transpose ? 2 * n + 1 : n)) << "transpose " << transpose;
    EXPECT_EQ(reads[1] - reads[0], 2 * n);
  }
}

// A load_weights waits for the rows a read_host still writes (slow host memory), and an
// activate writing rows a load_weights still reads waits for it.
TEST_P(ChipTest, LoadWeightsWaitsForItsRowsAndKeepsWritersOff) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.host_mem_latency_cycles = 200;
  const auto chip = Make(c);  // one system per process
  const auto r = chip->Run(
      Job("read_host host=0 ub=0 rows=4\nload_weights ub=0 tiles=1\nhalt\n", RandomBytes(16, 85)));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_GT(r.counters.issue_stall_ub_hazard, 190u);
  // An activate onto the last of 5 tiles' rows waits until the DMA has read them (without
  // the footprint it would issue at once).
  const auto w =
      chip->Run(Job("read_host host=0 ub=0 rows=20\nsync\nload_weights ub=0 tiles=5\n"
                    "activate acc=0 ub=16 rows=4 params=0\nmatmul ub=0 acc=8 rows=4 switch\nhalt\n",
                    RandomBytes(80, 86)));
  ASSERT_TRUE(w.ok) << w.message;
  EXPECT_GT(w.counters.issue_stall_ub_hazard, 0u);
}

// C = A x B (A 64 x 64, B 64 x 32) on small-16 as a hand-written schedule: A in column
// blocks of 16 (block kb's row i at unified-buffer row 64 kb + i), each output column tile
// j accumulated over the 4 K tiles into accumulator buffer j % 2 and activated by parameter
// set j. `overlap`: one read_weights of all 8 tiles first, so the weight DMA runs ahead
// through the FIFO; otherwise each tile fetched and used with a sync on either side.
engine::ExecJob SerializedOrOverlappedGemm(const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                                           const GemmParams& p, bool overlap) {
  const int n = 16;
  const int64_t m = a.rows, kt = a.cols / n, nt = b.cols / n, out_ub = kt * m;
  engine::ExecJob job;
  for (int64_t kb = 0; kb < kt; ++kb)  // A's column blocks, then the parameter sets
    for (int64_t i = 0; i < m; ++i)
      job.host_image.insert(job.host_image.end(), a.data.begin() + i * a.cols + kb * n,
                            a.data.begin() + i * a.cols + (kb + 1) * n);
  const uint64_t params = job.host_image.size();
  Put(&job.host_image, params, ParamBytes(p, n));
  job.host_out_addr = job.host_image.size();
  job.host_out_bytes = static_cast<uint64_t>(nt * m * n);
  job.weight_image = compiler::PackWeightTiles(b.data.data(), b.rows, b.cols, n);
  isa::ProgramBuilder q;
  q.ReadHost(0, 0, static_cast<uint64_t>(kt * m));
  q.ReadParams(params, 0, static_cast<uint64_t>(nt));
  if (overlap) q.ReadWeights(0, static_cast<uint64_t>(kt * nt));
  for (int64_t j = 0; j < nt; ++j) {
    const auto acc = static_cast<uint64_t>((j % 2) * m);
    for (int64_t kb = 0; kb < kt; ++kb) {
      if (!overlap) {
        q.ReadWeights(static_cast<uint64_t>((j * kt + kb) * n * n), 1);
        q.Sync();
      }
      q.Matmul(static_cast<uint64_t>(kb * m), acc, static_cast<uint64_t>(m), true,
               isa::AddIf(kb > 0));
      if (!overlap) q.Sync();
    }
    q.Activate(acc, static_cast<uint64_t>(out_ub + j * m), static_cast<uint64_t>(m),
               static_cast<uint64_t>(j), false, isa::Pool::kNone);
  }
  q.WriteHost(static_cast<uint64_t>(out_ub), job.host_out_addr, static_cast<uint64_t>(nt * m));
  q.Halt();
  job.program = q.Take();
  return job;
}

// Serialized: each tile fetched, then used, with syncs between. Overlapped: the weight DMA
// runs ahead through the FIFO while the matrix unit streams. Same results, fewer cycles.
TEST_P(ChipTest, OverlappedWeightLoadingBeatsSerialized) {
  const Matrix<int8_t> a = gemm::RandomInt8(64, 64, 31);
  const Matrix<int8_t> b = gemm::RandomInt8(64, 32, 32);
  std::mt19937 rng(33);
  const GemmParams p = RandomGemmParams(b.cols, rng, 39, 43);
  const Matrix<int32_t> c = gemm::ReferenceGemm(a, b);
  std::vector<uint8_t> want;  // tile j's row i at row j m + i
  for (int64_t j = 0; j < b.cols / 16; ++j)
    for (int64_t i = 0; i < a.rows; ++i)
      for (int64_t l = j * 16; l < (j + 1) * 16; ++l)
        want.push_back(static_cast<uint8_t>(
            arith::Requantize(c.at(i, l) + p.bias[l], p.multiplier[l], p.shift[l], -128)));
  const auto d = Make(config::LoadConfig("small-16"));
  engine::ExecResult runs[2];
  for (int overlap = 0; overlap < 2; ++overlap) {
    runs[overlap] = d->Run(SerializedOrOverlappedGemm(a, b, p, overlap == 1));
    ASSERT_TRUE(runs[overlap].ok) << runs[overlap].message;
    EXPECT_EQ(runs[overlap].host_out, want);
  }
  const uint64_t serialized = runs[0].cycles, overlapped = runs[1].cycles;
  // Not a marginal win: the weight fetches hide behind the matrix unit's streaming.
  EXPECT_LT(overlapped * 10, serialized * 9) << overlapped << " vs " << serialized;
  // Serialized, the matrix unit never has a tile waiting in the FIFO when a matmul starts.
  EXPECT_GT(runs[0].counters.busy_weight_dma, 0u);
  EXPECT_EQ(runs[0].counters.macs, runs[1].counters.macs);
}

// ------------------------------------------------------------------ VPU through the chip

enum class Mode { kPlain, kRelu, kAvg, kMax, kReluMax, kLanes };

class ActivateTest : public ::testing::TestWithParam<std::tuple<Mode, EngineKind>> {};

TEST_P(ActivateTest, MatchesTheCpuInt8ReferenceFunctions) {
  const Mode mode = std::get<0>(GetParam());
  const int n = 8;
  const int64_t m = 48;  // accumulator rows; with pooling, 12 windows of 4
  const Matrix<int8_t> a = gemm::RandomInt8(m, n, 41 + static_cast<int>(mode));
  const Matrix<int8_t> b = gemm::RandomInt8(n, n, 51 + static_cast<int>(mode));
  std::mt19937 rng(61 + static_cast<uint32_t>(mode));
  const GemmParams p = RandomGemmParams(n, rng, 38, 42);
  std::vector<uint8_t> host;
  Put(&host, 0, std::vector<uint8_t>(a.data.begin(), a.data.end()));
  Put(&host, 0x1000, ParamBytes(p, n));
  const bool relu = mode == Mode::kRelu || mode == Mode::kReluMax;
  const bool avg = mode == Mode::kAvg;
  const bool max = mode == Mode::kMax || mode == Mode::kReluMax;
  const bool lanes = mode == Mode::kLanes;  // a row per row, lanes 0 and 1 the rest 0
  const int64_t out_rows = (avg || max) ? m / 4 : m, live = lanes ? n / 4 : n;
  const std::string text = fmt::format(
      "read_host host=0 ub=0 rows={m}\nread_host host=0x1000 params=3 rows=1\n"
      "read_weights addr=0 tiles=1\nmatmul ub=0 acc=0 rows={m} switch\n"
      "activate acc=0 ub=200 rows={m} params=3{flags}\n"
      "write_host ub=200 host=0x2000 rows={out}\nhalt\n",
      fmt::arg("m", m), fmt::arg("out", out_rows),
      fmt::arg("flags", std::string(relu ? " relu" : "") + (avg ? " pool=avg" : "") +
                            (max ? " pool=max" : "") + (lanes ? " pool=lanes" : "")));
  const auto r = RunChip(std::get<1>(GetParam()), "lab-8", text, host,
                         std::vector<uint8_t>(b.data.begin(), b.data.end()), 0x2000,
                         static_cast<uint64_t>(out_rows * n));
  ASSERT_TRUE(r.ok) << r.message;
  const Matrix<int32_t> c = gemm::ReferenceGemm(a, b);
  for (int64_t o = 0; o < out_rows; ++o) {
    for (int l = 0; l < n; ++l) {
      auto q = [&](int64_t row) {
        return arith::Requantize(c.at(row, l) + p.bias[l], p.multiplier[l], p.shift[l],
                                 relu ? 0 : -128);
      };
      int32_t want;
      if (avg) {
        want = arith::AveragePool(q(4 * o) + q(4 * o + 1) + q(4 * o + 2) + q(4 * o + 3), 4);
      } else if (max) {
        want = std::max({q(4 * o), q(4 * o + 1), q(4 * o + 2), q(4 * o + 3)});
      } else if (lanes) {
        want = 0;
        for (int k = 0; l < live && k < 4; ++k) {
          const int32_t v = arith::Requantize(c.at(o, 4 * l + k) + p.bias[4 * l + k],
                                              p.multiplier[4 * l + k], p.shift[4 * l + k], -128);
          want = k == 0 ? v : std::max(want, v);
        }
      } else {
        want = q(o);
      }
      ASSERT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>(o * n + l)]), want)
          << "row " << o << " lane " << l;
    }
  }
  // Most outputs are neither clamped nor zero, so the comparison means something.
  int mid = 0;
  for (int64_t i = 0; i < out_rows * n; ++i) {
    const auto v = static_cast<int8_t>(r.host_out[static_cast<size_t>(i)]);
    mid += i % n < live && v > -128 && v < 127 && v != 0;
  }
  EXPECT_GT(mid, out_rows * live / 3);
  EXPECT_EQ(r.counters.vpu_rows_in, static_cast<uint64_t>(m));
  EXPECT_EQ(r.counters.vpu_rows_out, static_cast<uint64_t>(out_rows));
  EXPECT_EQ(r.counters.param_writes, 9u);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ActivateTest,
    ::testing::Combine(::testing::Values(Mode::kPlain, Mode::kRelu, Mode::kAvg, Mode::kMax,
                                         Mode::kReluMax, Mode::kLanes),
                       ::testing::Values(EngineKind::kRtl, EngineKind::kFast)));

// ------------------------------------------------------------------ residual, max, pad_min

// activate residual: each output row becomes AddRequantize(its value, the residual row's,
// mul_a, mul_b, shift), ReLU from set_residual; also written onto the residual rows
// themselves. One more unified-buffer read per row, and the rows land a cycle later.
class ResidualTest : public ::testing::TestWithParam<std::tuple<bool, EngineKind>> {};

TEST_P(ResidualTest, ActivateAddsTheResidualRows) {
  const bool in_place = std::get<0>(GetParam());
  const int n = 8;
  const int64_t m = 40;
  const Matrix<int8_t> a = gemm::RandomInt8(m, n, 71);
  const Matrix<int8_t> b = gemm::RandomInt8(n, n, 72);
  const std::vector<uint8_t> res = RandomBytes(static_cast<size_t>(2 * m * n), 73);
  std::mt19937 rng(74);
  const GemmParams p = RandomGemmParams(n, rng, 38, 42);
  std::vector<uint8_t> host;
  Put(&host, 0, std::vector<uint8_t>(a.data.begin(), a.data.end()));
  Put(&host, 0x400, res);
  Put(&host, 0x1000, ParamBytes(p, n));
  const uint32_t ma = 1342177280u, mb = 805306368u, shift = 30;  // 1.25 and 0.75
  const int64_t dst = in_place ? 100 : 300;
  const std::string text = fmt::format(
      "read_host host=0 ub=0 rows={m}\nread_host host=0x400 ub=100 rows={r}\n"
      "read_host host=0x1000 params=1 rows=1\nread_weights addr=0 tiles=1\n"
      "matmul ub=0 acc=0 rows={m} switch\n"
      "set_residual ub=100 mul_a={ma} mul_b={mb} shift={s} relu\n"
      "activate acc=0 ub={dst} rows={m} params=1 stride=2 residual\n"
      "write_host ub={dst} host=0x2000 rows={r}\nhalt\n",
      fmt::arg("m", m), fmt::arg("r", 2 * m), fmt::arg("ma", ma), fmt::arg("mb", mb),
      fmt::arg("s", shift), fmt::arg("dst", dst));
  const auto r = RunChip(std::get<1>(GetParam()), "lab-8", text, host,
                         std::vector<uint8_t>(b.data.begin(), b.data.end()), 0x2000,
                         static_cast<uint64_t>(2 * m * n));
  ASSERT_TRUE(r.ok) << r.message;
  const Matrix<int32_t> c = gemm::ReferenceGemm(a, b);
  int mid = 0;
  for (int64_t o = 0; o < m; ++o) {
    for (int l = 0; l < n; ++l) {
      const int8_t y = arith::Requantize(c.at(o, l) + p.bias[l], p.multiplier[l], p.shift[l], -128);
      const auto rr = static_cast<int8_t>(res[static_cast<size_t>(2 * o * n + l)]);
      const int8_t want = arith::AddRequantize(y, rr, ma, mb, shift, 0);
      ASSERT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>(2 * o * n + l)]), want)
          << "row " << o << " lane " << l;
      mid += want > 0 && want < 127;
      // Rows between the stride's rows keep what they held.
      const size_t gap = static_cast<size_t>((2 * o + 1) * n + l);
      if (in_place) {
        EXPECT_EQ(r.host_out[gap], res[gap]);
      }
    }
  }
  EXPECT_GT(mid, m * n / 4);
  EXPECT_EQ(r.counters.ub_reads, static_cast<uint64_t>(m + m + 2 * m));  // matmul, residual, out
  EXPECT_EQ(r.counters.vpu_rows_out, static_cast<uint64_t>(m));
}

INSTANTIATE_TEST_SUITE_P(
    InPlace, ResidualTest,
    ::testing::Combine(::testing::Bool(), ::testing::Values(EngineKind::kRtl, EngineKind::kFast)));

// `count` int8 operands from -range to range, drawn with `seed`.
std::vector<uint8_t> RandomInt8(size_t count, int range, uint32_t seed) {
  std::vector<uint8_t> v(count);
  std::mt19937 rng(seed);
  for (auto& x : v)
    x = static_cast<uint8_t>(
        static_cast<int8_t>(static_cast<int>(rng() % (2 * range + 1)) - range));
  return v;
}

// The n x n int8 identity tile.
std::vector<uint8_t> IdentityTile(int n) {
  std::vector<uint8_t> w(static_cast<size_t>(n * n), 0);
  for (int i = 0; i < n; ++i) w[static_cast<size_t>(i * n + i)] = 1;
  return w;
}

// A parameter set that passes each sum through (bias 0, multiplier 2^30, shift 30), clamped.
GemmParams PassThrough(int n) {
  GemmParams p;
  p.bias.assign(static_cast<size_t>(n), 0);
  p.multiplier.assign(static_cast<size_t>(n), 1 << 30);
  p.shift.assign(static_cast<size_t>(n), 30);
  return p;
}

// matmul max: each accumulator keeps the larger of its value and the product (max pooling
// through the identity tile); with the window's pad_min, positions outside the map read
// -128, which a maximum ignores.
TEST_P(ChipTest, MatmulMaxAndPadMinPoolThroughTheAccumulators) {
  const int n = 4;
  // A 4 x 4 map of 4 channels (one row per pixel), values from -100 to 100.
  const std::vector<uint8_t> map = RandomInt8(16 * n, 100, 81);
  const std::vector<uint8_t> weights = IdentityTile(n);
  const GemmParams p = PassThrough(n);
  std::vector<uint8_t> host = map;
  Put(&host, 0x200, ParamBytes(p, n));
  // 3 x 3 windows of stride 2 with padding 1: 2 x 2 outputs; one matmul per tap.
  std::string text =
      "read_host host=0 ub=0 rows=16\nread_host host=0x200 params=0 rows=1\n"
      "read_weights addr=0 tiles=1\n"
      "set_window in_h=4 in_w=4 kh=3 kw=3 out_h=2 out_w=2 stride_y=2 stride_x=2 channels=4 "
      "pad_top=1 pad_left=1 pixel_bytes=4 pad_min\n";
  for (int tap = 0; tap < 9; ++tap) {
    text += fmt::format("matmul ub=0 acc=0 rows=4 ktile={} window{}\n", tap,
                        tap == 0 ? " switch" : " max");
  }
  text += "activate acc=0 ub=32 rows=4 params=0\nwrite_host ub=32 host=0x400 rows=4\nhalt\n";
  const auto r = Make(config::LoadConfig("teach-4"))->Run(Job(text, host, weights, 0x400, 16));
  ASSERT_TRUE(r.ok) << r.message;
  for (int oy = 0; oy < 2; ++oy)
    for (int ox = 0; ox < 2; ++ox)
      for (int c = 0; c < n; ++c) {
        int want = -128;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            const int y = oy * 2 + ky - 1, x = ox * 2 + kx - 1;
            if (y < 0 || y >= 4 || x < 0 || x >= 4) continue;
            want = std::max<int>(
                want, static_cast<int8_t>(map[static_cast<size_t>((y * 4 + x) * n + c)]));
          }
        EXPECT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>((oy * 2 + ox) * n + c)]), want)
            << oy << "," << ox << " channel " << c;
      }
  EXPECT_EQ(r.counters.mxu_stream_cycles, 9u * 4u);
}

// set_window dilated: the map is read with a zero between neighbouring pixels. Through the
// identity tile, one matmul per K-tile of the field (a tap's four channels) added in the
// accumulators, each output is the sum of the pixels its window meets: with a 2 x 2 kernel,
// padding 1 and stride 1 exactly one (a 2 x 2 average pooling's gradient, spread back);
// with a 3 x 3 kernel, padding 2 and stride 2, up to four (a stride-2 convolution's).
TEST_P(ChipTest, DilatedWindowReadsZerosBetweenThePixels) {
  const int n = 4, in = 3;
  const std::vector<uint8_t> map = RandomInt8(in * in * n, 30, 83);
  const std::vector<uint8_t> weights = IdentityTile(n);
  const GemmParams p = PassThrough(n);
  struct Geometry {
    int k, pad, stride, out;
  };
  const auto chip = Make(config::LoadConfig("teach-4"));  // one chip: one SystemC system
  for (const Geometry g : {Geometry{2, 1, 1, 6}, Geometry{3, 2, 2, 3}}) {
    SCOPED_TRACE(fmt::format("kernel {} padding {} stride {}", g.k, g.pad, g.stride));
    std::vector<uint8_t> host = map;
    Put(&host, 0x200, ParamBytes(p, n));
    std::string text = fmt::format(
        "read_host host=0 ub=0 rows={}\nread_host host=0x200 params=0 rows=1\n"
        "read_weights addr=0 tiles=1\n"
        "set_window in_h={} in_w={} kh={} kw={} out_h={} out_w={} stride_y={} stride_x={} "
        "channels=4 pad_top={} pad_left={} pixel_bytes=4 dilated\n",
        in * in, in, in, g.k, g.k, g.out, g.out, g.stride, g.stride, g.pad, g.pad);
    const int pixels = g.out * g.out;
    for (int tap = 0; tap < g.k * g.k; ++tap) {
      text += fmt::format("matmul ub=0 acc=0 rows={} ktile={} window{}\n", pixels, tap,
                          tap == 0 ? " switch" : " accumulate");
    }
    text += fmt::format(
        "activate acc=0 ub=32 rows={0} params=0\n"
        "write_host ub=32 host=0x400 rows={0}\nhalt\n",
        pixels);
    const auto r = chip->Run(Job(text, host, weights, 0x400, pixels * n));
    ASSERT_TRUE(r.ok) << r.message;
    for (int oy = 0; oy < g.out; ++oy)
      for (int ox = 0; ox < g.out; ++ox)
        for (int c = 0; c < n; ++c) {
          int want = 0;
          for (int ky = 0; ky < g.k; ++ky)
            for (int kx = 0; kx < g.k; ++kx) {
              const int yv = oy * g.stride + ky - g.pad, xv = ox * g.stride + kx - g.pad;
              if (yv < 0 || xv < 0 || yv % 2 || xv % 2 || yv / 2 >= in || xv / 2 >= in) continue;
              want += static_cast<int8_t>(map[static_cast<size_t>((yv / 2 * in + xv / 2) * n + c)]);
            }
          want = std::clamp(want, -128, 127);
          EXPECT_EQ(static_cast<int8_t>(r.host_out[static_cast<size_t>((oy * g.out + ox) * n + c)]),
                    want)
              << oy << "," << ox << " channel " << c;
        }
  }
}

// Weights above 4 GiB (tpu-v1 has 8 GiB of weight memory): the address's bits 32-47 in aux.
TEST_P(ChipTest, ReadWeightsFromAboveFourGiB) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_bytes = int64_t{8} << 30;
  const Matrix<int8_t> a = gemm::RandomInt8(6, 4, 91);
  const Matrix<int8_t> b = gemm::RandomInt8(4, 4, 92);
  engine::ExecJob job =
      Job("read_host host=0 ub=0 rows=6\nread_weights addr=0x140000010 tiles=1\n"
          "matmul ub=0 acc=0 rows=6 switch\nhalt\n",
          std::vector<uint8_t>(a.data.begin(), a.data.end()),
          std::vector<uint8_t>(b.data.begin(), b.data.end()));
  job.weight_image_addr = 0x140000010ull;
  const auto chip = Make(c);  // one chip: the SystemC kernel elaborates once per process
  const auto r = chip->Run(job);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.counters.weight_bytes_read, 16u);
  EXPECT_EQ(r.counters.weight_tiles, 1u);
  // Past the end of the memory: the range check sees all 48 bits.
  const auto bad = chip->Run(Job("read_weights addr=0x200000000 tiles=1\nhalt\n"));
  EXPECT_EQ(bad.chip_status, hw::Status::kAddressOutOfRange);
}

// read_hbm: weight-memory (HBM) rows into the unified buffer on the host DMA's own port,
// counted as weight bytes; the rows come back out unchanged.
TEST_P(ChipTest, ReadHbmCopiesWeightMemoryRowsIntoTheUnifiedBuffer) {
  const std::vector<uint8_t> w = RandomBytes(0x40 + 4 * 7, 95);
  const auto r = RunChip(GetParam(), "teach-4",
                         "read_hbm addr=0x40 ub=10 rows=7\n"
                         "write_host ub=10 host=0x1000 rows=7\nhalt\n",
                         {}, w, 0x1000, 4 * 7);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.host_out, std::vector<uint8_t>(w.begin() + 0x40, w.end()));
  EXPECT_EQ(r.counters.weight_bytes_read, 28u);
  EXPECT_EQ(r.counters.host_bytes_read, 0u);
  EXPECT_EQ(r.counters.ub_writes, 7u);
  EXPECT_EQ(r.counters.weight_fifo_pushes, 0u);
  EXPECT_GT(r.counters.busy_host_dma, 7u);
}

// The weight memory's channel rule (docs/timing.md): at 1 byte a cycle each 4-byte row holds
// the channel 4 cycles; the last row lands latency cycles after its bytes.
TEST_P(ChipTest, ReadHbmTakesTheWeightMemorysBandwidthAndLatency) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_bytes_per_cycle = 1;
  c.weight_mem_latency_cycles = 30;
  const auto r =
      Make(c)->Run(Job("read_hbm addr=0 ub=0 rows=64\nhalt\n", {}, RandomBytes(256, 96)));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_GE(r.cycles, 64u * 4u + 30u);
  EXPECT_LE(r.cycles, 64u * 4u + 30u + 8u);
  EXPECT_GE(r.counters.weight_mem_stall, 63u * 3u);  // every row after the first waits
  EXPECT_EQ(r.counters.host_mem_stall, 0u);
}

// A matrix from HBM through the unified buffer into the matrix unit (read_hbm, then
// load_weights) multiplies exactly as the same matrix by read_weights; a load_weights waits
// for the rows a read_hbm still writes.
TEST_P(ChipTest, WeightsThroughTheUnifiedBufferEqualReadWeights) {
  const int n = 4;
  const SmallGemm g = MakeSmallGemm(97);
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_latency_cycles = 100;
  const auto chip = Make(c);  // one system per process
  std::vector<uint8_t> outs[2];
  for (const bool via_ub : {false, true}) {
    const auto r = chip->Run(SmallGemmJob(
        fmt::format("read_host host=0x100 params=0 rows=1\nread_host host=0 ub=0 rows=8\n{}"
                    "matmul ub=0 acc=0 rows=8 switch\nactivate acc=0 ub=100 rows=8 params=0\n"
                    "write_host ub=100 host=0x200 rows=8\nhalt\n",
                    via_ub ? "read_hbm addr=0x80 ub=20 rows=4\nload_weights ub=20 tiles=1\n"
                           : "read_weights addr=0x80 tiles=1\n"),
        g, false));
    ASSERT_TRUE(r.ok) << r.message;
    outs[via_ub] = r.host_out;
    EXPECT_EQ(r.counters.weight_bytes_read, static_cast<uint64_t>(n * n));
    EXPECT_EQ(r.counters.weight_tiles, 1u);
    if (via_ub) {
      EXPECT_GT(r.counters.issue_stall_ub_hazard, 90u);
    }
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0].size(), static_cast<size_t>(8 * n));
}

// read_hbm params=: parameter sets from weight memory (HBM), as read_host params= brings
// them from host memory: the same activates, the sets' bytes counted as weight bytes, none
// over the host link; an activate waits for the set still on its way (after a sync, the
// products landed: the weight memory's latency); the sets' range and the weight memory's are
// checked.
TEST_P(ChipTest, ReadHbmParamsEqualReadHostParams) {
  const int n = 4;
  const SmallGemm g = MakeSmallGemm(83);
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_latency_cycles = 100;
  const auto chip = Make(c);         // one system per process
  const uint64_t set_bytes = 9 * n;  // an int8 chip's set: 9 rows of N bytes
  std::vector<uint8_t> outs[2];
  for (const bool hbm : {false, true}) {
    const auto r = chip->Run(
        SmallGemmJob(fmt::format("read_host host=0 ub=0 rows=8\nread_weights addr=0x80 tiles=1\n"
                                 "matmul ub=0 acc=0 rows=8 switch\nsync\n{} params=2 rows=1\n"
                                 "activate acc=0 ub=100 rows=8 params=2\n"
                                 "write_host ub=100 host=0x200 rows=8\nhalt\n",
                                 hbm ? "read_hbm addr=0x100" : "read_host host=0x100"),
                     g, hbm));
    ASSERT_TRUE(r.ok) << r.message;
    outs[hbm] = r.host_out;
    EXPECT_EQ(r.counters.param_writes, 9u);
    EXPECT_EQ(r.counters.weight_bytes_read, n * n + (hbm ? set_bytes : 0));
    EXPECT_EQ(r.counters.host_bytes_read, 8 * n + (hbm ? 0 : set_bytes));
    if (hbm) EXPECT_GT(r.counters.issue_stall_param_hazard, 90u);  // the latency of 100
  }
  EXPECT_EQ(outs[0], outs[1]);
  const struct {
    const char* text;
    hw::Status status;
  } bad[] = {{"read_hbm addr=0 params=32 rows=1\nhalt\n", hw::Status::kAddressOutOfRange},
             {"read_hbm addr=0 params=31 rows=2\nhalt\n", hw::Status::kBufferOverflow},
             {"read_hbm addr=0xFFFF0 params=0 rows=1\nhalt\n", hw::Status::kBufferOverflow}};
  for (const auto& e : bad) {
    const auto r = chip->Run(Job(e.text));
    EXPECT_EQ(r.chip_status, e.status) << e.text;
    EXPECT_EQ(r.counters.param_writes, 0u) << e.text;
  }
}

// Addresses above 4 GiB take aux bits 32-47; the range check sees all 48 bits, and the
// buffer's rows too.
TEST_P(ChipTest, ReadHbmChecksItsAddressesAndRows) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_bytes = int64_t{8} << 30;
  engine::ExecJob job =
      Job("read_hbm addr=0x140000010 ub=3 rows=2\n"
          "write_host ub=3 host=0x100 rows=2\nhalt\n",
          {}, RandomBytes(8, 100), 0x100, 8);
  job.weight_image_addr = 0x140000010ull;
  const auto chip = Make(c);  // one system per process
  const auto r = chip->Run(job);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.host_out, job.weight_image);
  const struct {
    const char* text;
    hw::Status status;
  } bad[] = {{"read_hbm addr=0x200000000 ub=0 rows=1\nhalt\n", hw::Status::kAddressOutOfRange},
             {"read_hbm addr=0x1FFFFFFF8 ub=0 rows=4\nhalt\n", hw::Status::kBufferOverflow},
             {"read_hbm addr=0 ub=16384 rows=1\nhalt\n", hw::Status::kAddressOutOfRange},
             {"read_hbm addr=0 ub=16383 rows=2\nhalt\n", hw::Status::kBufferOverflow},
             {"raw 0x0e\nhalt\n", hw::Status::kBadOperand}};  // no rows
  for (const auto& b : bad) {
    const auto e = chip->Run(Job(b.text));
    EXPECT_EQ(e.chip_status, b.status) << b.text;
    EXPECT_EQ(e.counters.weight_bytes_read, 0u) << b.text;
    EXPECT_EQ(e.counters.ub_writes, 0u) << b.text;
  }
}

// write_hbm: unified-buffer rows into weight memory (HBM) on the host DMA's port there, as
// write_host does to host memory; read back by read_hbm they are the rows written. Above
// 4 GiB the address takes aux bits 32-47, and the range checks see all 48 bits.
TEST_P(ChipTest, WriteHbmRowsComeBackByReadHbm) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_bytes = int64_t{8} << 30;
  const std::vector<uint8_t> rows = RandomBytes(4 * 9, 101);
  const auto chip = Make(c);  // one system per process
  const auto r =
      chip->Run(Job("read_host host=0 ub=5 rows=9\n"
                    "write_hbm ub=5 addr=0x140000020 rows=9\n"
                    "read_hbm addr=0x140000020 ub=40 rows=9\n"
                    "write_host ub=40 host=0x100 rows=9\nhalt\n",
                    rows, {}, 0x100, 4 * 9));
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.host_out, rows);
  EXPECT_EQ(r.counters.weight_bytes_written, 36u);
  EXPECT_EQ(r.counters.weight_bytes_read, 36u);
  EXPECT_EQ(r.counters.ub_reads, 18u);  // write_hbm's nine, write_host's nine
  const struct {
    const char* text;
    hw::Status status;
  } bad[] = {{"write_hbm ub=0 addr=0x200000000 rows=1\nhalt\n", hw::Status::kAddressOutOfRange},
             {"write_hbm ub=0 addr=0x1FFFFFFF8 rows=4\nhalt\n", hw::Status::kBufferOverflow},
             {"write_hbm ub=16384 addr=0 rows=1\nhalt\n", hw::Status::kAddressOutOfRange},
             {"write_hbm ub=16383 addr=0 rows=2\nhalt\n", hw::Status::kBufferOverflow},
             {"raw 0x0f\nhalt\n", hw::Status::kBadOperand}};  // no rows
  for (const auto& b : bad) {
    const auto e = chip->Run(Job(b.text));
    EXPECT_EQ(e.chip_status, b.status) << b.text;
    EXPECT_EQ(e.counters.weight_bytes_written, 0u) << b.text;
  }
}

// The weight memory is one range for the hazards: a write_hbm over a tile that read_weights
// brought waits until the weight DMA has read it, so the matmul that switches to it after
// the write still multiplies by the old tile; a read_weights after the write brings the new
// one. Both equal the same products with each tile read from a place of its own.
TEST_P(ChipTest, WriteHbmWaitsForTheWeightDmasReadAndReadWeightsForIt) {
  const int n = 4;
  const auto [a, w1, p] = MakeSmallGemm(102);
  const Matrix<int8_t> w2 = gemm::RandomInt8(n, n, 150);
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_latency_cycles = 60;
  const auto chip = Make(c);  // one system per process
  const std::string tail =
      "activate acc=0 ub=100 rows=16 params=0\nwrite_host ub=100 host=0x200 rows=16\nhalt\n";
  // w2 from the host over w1 at 0x80 between the two reads, landed before the first matmul
  const std::string over =
      "read_weights addr=0x80 tiles=1\nread_host host=0x300 ub=20 rows=4\n"
      "write_hbm ub=20 addr=0x80 rows=4\nsync\nmatmul ub=0 acc=0 rows=8 switch\n"
      "read_weights addr=0x80 tiles=1\nmatmul ub=0 acc=8 rows=8 switch\n";
  const std::string apart =
      "read_weights addr=0x80 tiles=1\nread_weights addr=0xC0 tiles=1\n"
      "matmul ub=0 acc=0 rows=8 switch\nmatmul ub=0 acc=8 rows=8 switch\n";
  std::vector<uint8_t> outs[2];
  for (const bool overwrite : {false, true}) {
    engine::ExecJob job;
    job.program =
        isa::Assemble("read_host host=0x100 params=0 rows=1\nread_host host=0 ub=0 rows=8\n" +
                          (overwrite ? over : apart) + tail,
                      "t");
    const std::vector<uint8_t> b1(w1.data.begin(), w1.data.end()),
        b2(w2.data.begin(), w2.data.end());
    Put(&job.host_image, 0, std::vector<uint8_t>(a.data.begin(), a.data.end()));
    Put(&job.host_image, 0x100, ParamBytes(p, n));
    Put(&job.host_image, 0x300, b2);
    Put(&job.weight_image, 0x80, b1);
    if (!overwrite) Put(&job.weight_image, 0xC0, b2);
    job.host_out_addr = 0x200;
    job.host_out_bytes = 16 * n;
    const auto r = chip->Run(job);
    ASSERT_TRUE(r.ok) << r.message;
    outs[overwrite] = r.host_out;
    if (overwrite) {
      EXPECT_EQ(r.counters.weight_bytes_written, 16u);
      // The write waits for the first read's latency, the second read for the write.
      EXPECT_GT(r.counters.issue_stall_unit_busy, 60u);
    }
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_NE(std::vector<uint8_t>(outs[0].begin(), outs[0].begin() + 8 * n),
            std::vector<uint8_t>(outs[0].begin() + 8 * n, outs[0].end()));
}

TEST_P(ChipTest, BadResidualsAndMaxesAreBadOperands) {
  const auto chip = Make(config::LoadConfig("teach-4"));
  for (const char* text :
       {"set_residual ub=0 mul_a=1 mul_b=1 shift=30\n"
        "activate acc=0 ub=0 rows=4 params=0 pool=max residual\nhalt\n",
        "set_residual ub=0 mul_a=1 mul_b=1 shift=30\n"
        "activate acc=0 ub=0 rows=3 params=0 pool=lanes residual\nhalt\n",
        "activate acc=0 ub=0 rows=1 params=0 residual\nhalt\n",
        "matmul ub=0 acc=0 rows=1 max accumulate\nhalt\n", "raw 0x3f0009\nhalt\n"}) {
    const auto r = chip->Run(Job(text));
    EXPECT_EQ(r.chip_status, hw::Status::kBadOperand) << text;
    EXPECT_EQ(r.error_pc, std::string(text).rfind("set_residual", 0) == 0 ? 1u : 0u) << text;
  }
}

// ------------------------------------------------------------------ bad programs

TEST_P(ChipTest, InvalidOpcodeStopsTheChipBeforeAnythingMoves) {
  // The first opcode past the contract's table.
  const auto r = RunChip(
      GetParam(), "teach-4",
      fmt::format("nop\nraw {:#x}\nread_host host=0 ub=0 rows=1\nhalt\n", hw::kMnemonics.size()),
      RandomBytes(4, 5));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.state, engine::RunEnd::kError);
  EXPECT_EQ(r.chip_status, hw::Status::kInvalidOpcode);
  EXPECT_EQ(r.error_pc, 1u);
  EXPECT_NE(r.message.find("instruction 1"), std::string::npos) << r.message;
  EXPECT_EQ(r.counters.host_bytes_read, 0u);
}

TEST_P(ChipTest, AddressOutsideTheUnifiedBufferIsReported) {
  // teach-4 has 16,384 unified-buffer rows.
  const auto r =
      RunChip(GetParam(), "teach-4", "read_host host=0 ub=16384 rows=1\nhalt\n", RandomBytes(4, 6));
  EXPECT_EQ(r.state, engine::RunEnd::kError);
  EXPECT_EQ(r.chip_status, hw::Status::kAddressOutOfRange);
  EXPECT_EQ(r.error_pc, 0u);
  EXPECT_EQ(r.counters.ub_writes, 0u);
}

TEST_P(ChipTest, AddressOutsideHostMemoryIsReported) {
  // teach-4 has 1 MiB of host memory.
  const auto r =
      RunChip(GetParam(), "teach-4", "nop\nnop\nwrite_host ub=0 host=0x100000 rows=1\nhalt\n");
  EXPECT_EQ(r.chip_status, hw::Status::kAddressOutOfRange);
  EXPECT_EQ(r.error_pc, 2u);
  EXPECT_EQ(r.counters.host_bytes_written, 0u);
}

TEST_P(ChipTest, UnifiedBufferOverflowIsReported) {
  const auto r = RunChip(GetParam(), "teach-4", "read_host host=0 ub=16380 rows=8\nhalt\n",
                         RandomBytes(32, 7));
  EXPECT_EQ(r.state, engine::RunEnd::kError);
  EXPECT_EQ(r.chip_status, hw::Status::kBufferOverflow);
  EXPECT_EQ(r.counters.ub_writes, 0u);
}

TEST_P(ChipTest, AccumulatorOverflowIsReported) {
  const auto r = RunChip(GetParam(), "teach-4", "matmul ub=0 acc=1020 rows=8\nhalt\n");
  EXPECT_EQ(r.chip_status, hw::Status::kBufferOverflow);
  EXPECT_EQ(r.counters.macs, 0u);
}

TEST_P(ChipTest, WeightMemoryOverflowIsReported) {
  const auto r = RunChip(GetParam(), "teach-4", "read_weights addr=0xFFFF0 tiles=2\nhalt\n");
  EXPECT_EQ(r.chip_status, hw::Status::kBufferOverflow);
  EXPECT_EQ(r.counters.weight_bytes_read, 0u);
}

TEST_P(ChipTest, PoolingRowsNotAMultipleOfFourAreABadOperand) {
  const auto r =
      RunChip(GetParam(), "teach-4", "activate acc=0 ub=0 rows=6 params=0 pool=max\nhalt\n");
  EXPECT_EQ(r.chip_status, hw::Status::kBadOperand);
}

// A window whose map reaches past the unified buffer: like every other range.
TEST_P(ChipTest, WindowPastTheUnifiedBufferIsReported) {
  // teach-4: 16,384 rows of 4 bytes; a 10 x 10 map of 4-byte pixels is 100 rows.
  const std::string window =
      "set_window in_h=10 in_w=10 kh=3 kw=3 out_h=8 out_w=8 stride_y=1 stride_x=1 channels=4 "
      "pixel_bytes=4\n";
  const auto chip = Make(config::LoadConfig("teach-4"));  // one SystemC chip per process
  auto r = chip->Run(Job(window + "matmul ub=16300 acc=0 rows=4 window\nhalt\n"));
  EXPECT_EQ(r.chip_status, hw::Status::kBufferOverflow);
  EXPECT_EQ(r.error_pc, 1u);
  EXPECT_EQ(r.counters.macs, 0u);
  r = chip->Run(Job(window + "matmul ub=16384 acc=0 rows=4 window\nhalt\n"));
  EXPECT_EQ(r.chip_status, hw::Status::kAddressOutOfRange);
  r = chip->Run(Job(window + "matmul ub=16284 acc=0 rows=4 window\nhalt\n"));
  EXPECT_EQ(r.chip_status, hw::Status::kOk);  // the last 100 rows
}

// Inconsistent geometry, or a matmul outside the window, stops the chip with bad-window
// before anything moves.
TEST_P(ChipTest, InconsistentWindowsAreABadWindow) {
  const std::string ok_geometry =
      "in_h=6 in_w=6 kh=3 kw=3 stride_y=1 stride_x=1 channels=2 pixel_bytes=2";
  const std::vector<std::pair<std::string, uint64_t>> programs = {
      // padding as large as the kernel
      {"set_window " + ok_geometry + " out_h=6 out_w=6 pad_top=3\n", 0},
      // the last output window starts below the (padded) map
      {"set_window " + ok_geometry + " out_h=8 out_w=6 pad_top=1\n", 0},
      // pooling order of an odd size
      {"set_window " + ok_geometry + " out_h=4 out_w=3 pooled\n", 0},
      // a pixel shorter than its channels
      {"set_window in_h=6 in_w=6 kh=3 kw=3 stride_y=1 stride_x=1 channels=4 pixel_bytes=2 "
       "out_h=4 out_w=4\n",
       0},
      // reserved bits (aux 24-31)
      {"raw 0x1000002110040043300600600020008\n", 0},
      // a matmul window with no window set
      {"nop\nmatmul ub=0 acc=0 rows=1 window\n", 1},
      // a K-tile past the receptive field (3 x 3 x 2 = 18 values: 5 tiles of 4)
      {"set_window " + ok_geometry + " out_h=4 out_w=4\nmatmul ub=0 acc=0 rows=1 ktile=5 window\n",
       1},
      // pixels past the output (16 of them)
      {"set_window " + ok_geometry + " out_h=4 out_w=4\nmatmul ub=0 acc=0 rows=2 first=15 window\n",
       1},
  };
  const auto chip = Make(config::LoadConfig("teach-4"));  // one SystemC chip per process
  for (const auto& [program, pc] : programs) {
    const auto r = chip->Run(Job(program + "halt\n"));
    EXPECT_EQ(r.state, engine::RunEnd::kError) << program;
    EXPECT_EQ(r.chip_status, hw::Status::kBadWindow) << program;
    EXPECT_EQ(r.error_pc, pc) << program;
    EXPECT_EQ(r.counters.macs, 0u);
  }
  // The same geometry, consistent, runs.
  const auto r =
      chip->Run(Job("set_window " + ok_geometry +
                    " out_h=4 out_w=4\nmatmul ub=0 acc=0 rows=16 ktile=4 window\nhalt\n"));
  EXPECT_EQ(r.chip_status, hw::Status::kOk);
}

TEST_P(ChipTest, ParameterSetOutOfRangeIsReported) {
  const auto r = RunChip(GetParam(), "teach-4", "activate acc=0 ub=0 rows=4 params=32\nhalt\n");
  EXPECT_EQ(r.chip_status, hw::Status::kAddressOutOfRange);
}

TEST_P(ChipTest, ProgramWithoutHaltEndsWithAClearStatus) {
  const auto r =
      RunChip(GetParam(), "teach-4", "read_host host=0 ub=0 rows=2\nnop\n", RandomBytes(8, 8));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.state, engine::RunEnd::kNoHalt);
  EXPECT_EQ(r.chip_status, hw::Status::kOk);
  EXPECT_NE(r.message.find("without HALT"), std::string::npos) << r.message;
  EXPECT_EQ(r.counters.ub_writes, 2u);  // what it did run, ran
}

TEST_P(ChipTest, WatchdogNamesTheStuckUnit) {
  // A matmul that switches to a weight tile no read_weights ever brings waits forever.
  engine::EngineOptions o;
  o.watchdog_cycles = 500;
  const auto r =
      RunChip(GetParam(), "teach-4", "matmul ub=0 acc=0 rows=4 switch\nhalt\n", {}, {}, 0, 0, o);
  EXPECT_EQ(r.state, engine::RunEnd::kWatchdog);
  EXPECT_NE(r.message.find("no progress for 500 cycles"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("instruction 1 (halt)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("matrix unit (stuck: a matmul with 'switch' waits for a weight tile"),
            std::string::npos)
      << r.message;
  EXPECT_LT(r.cycles, 600u);
}

TEST(TpuChipTest, BuiltParametersAreCheckedAgainstTheConfig) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.ub_depth_rows = 1000;
  engine::RtlEngine d(c, {});
  try {
    d.Run(Job("halt\n"));
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("ub_depth_rows = 1000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("built with 16384"), std::string::npos) << e.what();
  }
}

TEST(TpuChipTest, ArraySizeWithoutAModelIsAUsageErrorThatNamesTheFastEngine) {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.array_dim = 12;  // never built
  try {
    engine::MakeChipEngine(EngineKind::kRtl, c, {});
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--engine fast"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TPUSIM_TPU_DIMS"), std::string::npos) << e.what();
  }
}

TEST_P(ChipTest, SeveralJobsRunOnOneSystem) {
  const auto d = Make(config::LoadConfig("teach-4"));
  for (int i = 0; i < 3; ++i) {
    const engine::ExecJob job =
        Job("read_host host=0 ub=0 rows=3\nwrite_host ub=0 host=64 rows=3\nhalt\n",
            RandomBytes(12, 100 + static_cast<uint32_t>(i)), {}, 64, 12);
    const auto r = d->Run(job);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.host_out, job.host_image);
    EXPECT_EQ(r.counters.host_bytes_read, 12u);  // counters restart with every run
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, ChipTest, ::testing::Values(EngineKind::kRtl, EngineKind::kFast),
                         EngineParamName);

}  // namespace
}  // namespace tpu::test
