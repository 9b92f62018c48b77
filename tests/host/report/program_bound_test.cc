// The attainable bound of programs (host/report/program_bound.h): each term as derived by
// hand for a small program, and no run of thousands of random programs beating its bound.
#include "host/report/program_bound.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "host/cosim/program_generator.h"
#include "host/engine/engine_factory.h"
#include "host/isa/assembler.h"
#include "host/isa/program_builder.h"

namespace tpu::report {
namespace {

std::map<std::string, double> Terms(const ProgramBound& b) {
  std::map<std::string, double> m;
  for (const BoundTerm& t : b.terms) m[t.resource] = t.cycles;
  return m;
}

// teach-4: N = 4, int8, rows of 4 bytes at 4 bytes a cycle (one cycle a row) on both memories,
// latency 4 on both.
TEST(ProgramBoundTest, EachTermIsTheResourcesOwnTime) {
  const config::TpuConfig c = config::LoadConfig("teach-4");
  const isa::Program p = isa::Assemble(
      "read_host host=0 ub=0 rows=8\n"                // link 8; DMA 8 + 4
      "read_host host=0x40 params=0 rows=1\n"         // a set is 9 rows: link 9; DMA 9 + 4
      "read_weights addr=0 tiles=2\n"                 // memory 8 rows; DMA 8 + 4
      "matmul ub=0 acc=0 rows=2 switch\n"             // a run of 2 + 3 rows through tile 1: 5
      "matmul ub=2 acc=2 rows=3\n"                    //
      "matmul ub=0 acc=0 rows=3 switch accumulate\n"  // 3 rows through tile 2: max(3, 4)
      "activate acc=0 ub=8 rows=5 params=0\n"         // 5 accumulator rows
      "write_host ub=8 host=0x100 rows=5\n"           // link 5; DMA 5 (writes are posted)
      "halt\n",
      "hand");
  const ProgramBound b = BoundPrograms({p}, c);
  EXPECT_EQ(Terms(b), (std::map<std::string, double>{{"issue", 9},
                                                     {"host link", 22},
                                                     {"host DMA", 30},
                                                     {"weight memory", 8},
                                                     {"weight DMA", 12},
                                                     {"matrix unit", 9},
                                                     {"activation unit", 5},
                                                     {"vector unit", 0}}));
  EXPECT_EQ(b.Cycles(), 30);
  EXPECT_EQ(b.Binds(), "host DMA");
}

// read_hbm: its rows (a parameter set's 9 with params=) cross the weight memory's channel
// (shared with read_weights) and keep the host DMA busy (shared with read_host) until the
// last has landed, latency after; write_hbm's rows the same, without the latency (posted
// writes).
TEST(ProgramBoundTest, ReadHbmAndWriteHbmCountInTheWeightMemoryAndTheHostDma) {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.weight_mem_bytes_per_cycle = 2;  // a 4-byte row: 2 cycles of the channel
  const isa::Program p = isa::Assemble(
      "read_hbm addr=0 ub=0 rows=10\n"     // memory 10 rows; host DMA 20 + 4
      "read_host host=0 ub=20 rows=3\n"    // host DMA 3 + 4
      "read_weights addr=0 tiles=1\n"      // memory 4 rows; weight DMA 8 + 4
      "write_hbm ub=0 addr=0 rows=5\n"     // memory 5 rows; host DMA 10 (posted: no latency)
      "read_hbm addr=0 params=0 rows=2\n"  // 2 sets of 9 rows: memory 18; host DMA 36 + 4
      "halt\n",
      "hbm");
  const std::map<std::string, double> t = Terms(BoundPrograms({p}, c));
  EXPECT_EQ(t.at("weight memory"), 74);
  EXPECT_EQ(t.at("host DMA"), 81);
  EXPECT_EQ(t.at("host link"), 3);
  EXPECT_EQ(t.at("weight DMA"), 12);
}

// Both cores' read_hbm at once on tpu-v3, whose weight memory moves 957 bytes a cycle (3.7
// rows of 256): each core's host DMA moves a row a cycle, the two together two rows a
// cycle. The memory's term is the channel's time for every port's rows (2 x 2,048 rows of
// 256 bytes at 957 bytes a cycle), not a row a cycle for all of them (4,096, which the run
// beats), and the run takes no less than the bound (the host DMA's 2,048 rows and latency).
TEST(ProgramBoundTest, TheWeightMemoryTermIsTheChannelsTimeForEveryPort) {
  const config::TpuConfig c = config::LoadConfig("tpu-v3");
  engine::ExecJob job;
  for (int core = 0; core < 2; ++core) {
    const isa::Program p =
        isa::Assemble("set_format dtype=bf16\nread_hbm addr=" + std::to_string(core * 2048 * 256) +
                          " ub=0 rows=2048\nhalt\n",
                      "hbm");
    (core == 0 ? job.program : job.other_programs.emplace_back()) = p;
  }
  const ProgramBound b = BoundPrograms({job.program, job.other_programs[0]}, c);
  EXPECT_DOUBLE_EQ(Terms(b).at("weight memory"), 2 * 2048 * 256.0 / 957);
  const engine::ExecResult r = engine::MakeChipEngine(engine::EngineKind::kFast, c, {})->Run(job);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_LT(static_cast<double>(r.cycles), 4096);
  EXPECT_GE(static_cast<double>(r.cycles), b.Cycles()) << b.Text();
}

// small-16 as a bf16 chip with 2 matrix units and 8 sublanes: load_weights is T x N + 1, with
// transpose T x (2N + 1), per unit; each vector instruction ceil(rows / 8) + latency + 1.
TEST(ProgramBoundTest, TheVectorUnitAndLoadWeightsCount) {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.dtype = hw::Dtype::kBf16;
  c.mxus_per_core = 2;
  c.vector_sublanes = 8;
  const isa::Program p = isa::Assemble(
      "set_format dtype=bf16\n"
      "load_weights ub=0 tiles=2 mxu=0\n"            // 2 x 16 + 1 = 33
      "load_weights ub=0 tiles=2 transpose mxu=1\n"  // 2 x 33 = 66
      "vector op=exp a=0 out=100 rows=20 o32\n"      // 3 groups + 6 + 1 = 10
      "vector op=add a=0 b=40 out=200 rows=8\n"      // 1 + 2 + 1 = 4
      "halt\n",
      "bf16");
  const std::map<std::string, double> t = Terms(BoundPrograms({p}, c));
  EXPECT_EQ(t.at("weight DMA"), 66);
  EXPECT_EQ(t.at("vector unit"), 14);
  EXPECT_EQ(t.at("issue"), 6);
}

// The bound is a floor: no run of the co-simulation's random programs that reaches HALT takes
// fewer cycles, on chips of one and two matrix units and cores, int8 and bf16.
TEST(ProgramBoundTest, NoRunBeatsItsBound) {
  std::vector<config::TpuConfig> chips;
  for (const char* preset : {"teach-4", "small-16"}) chips.push_back(config::LoadConfig(preset));
  config::TpuConfig bf16 = config::LoadConfig("small-16");
  bf16.dtype = hw::Dtype::kBf16;
  bf16.vector_sublanes = 4;
  chips.push_back(bf16);
  config::TpuConfig wide = config::LoadConfig("teach-4");
  wide.mxus_per_core = 2;
  wide.cores = 2;
  chips.push_back(wide);
  // A weight memory of more than a row a cycle (HBM): the ports together move up to its bytes
  // a cycle, each a row a cycle at most.
  config::TpuConfig hbm = wide;
  hbm.weight_mem_bytes_per_cycle = 4 * hw::RowBytes(wide);
  hbm.name = "hbm";
  chips.push_back(hbm);
  for (const config::TpuConfig& c : chips) {
    const cosim::ProgramGenerator gen(c, 73);
    const auto chip = engine::MakeChipEngine(engine::EngineKind::kFast, c, {});
    int halted = 0;
    for (uint64_t i = 0; i < 300; ++i) {
      const cosim::GeneratedProgram g = gen.Make(i);
      const engine::ExecResult r = chip->Run(g.job);
      if (!r.ok) continue;
      ++halted;
      std::vector<isa::Program> programs = {g.job.program};
      programs.insert(programs.end(), g.job.other_programs.begin(), g.job.other_programs.end());
      const ProgramBound b = BoundPrograms(programs, c);
      ASSERT_GE(static_cast<double>(r.cycles), b.Cycles())
          << c.name << " program " << i << ": " << b.Text();
    }
    EXPECT_GT(halted, 100) << c.name;
  }
}

// The vector unit's term is each instruction's busy cycles exactly: for programs of nothing
// but `vector` instructions (random operations, 1 to 40 rows, formats, broadcasts) it equals
// the run's busy_vector counter, on 1 and 8 sublanes, and the run is longer (each
// instruction issues the cycle after the one before has written its last group).
TEST(ProgramBoundTest, TheVectorTermIsTheVectorUnitsBusyCycles) {
  for (const int sublanes : {1, 8}) {
    config::TpuConfig c = config::LoadConfig("small-16");
    c.dtype = hw::Dtype::kBf16;
    c.vector_sublanes = sublanes;
    const auto chip = engine::MakeChipEngine(engine::EngineKind::kFast, c, {});
    std::mt19937_64 rng(5);
    const auto pick = [&](int lo, int hi) {
      return std::uniform_int_distribution<int>(lo, hi)(rng);
    };
    for (int i = 0; i < 200; ++i) {
      isa::ProgramBuilder p;
      p.SetFormat(true);
      for (int k = pick(1, 12); k > 0; --k) {
        isa::VectorOperands v;
        v.op = static_cast<hw::VectorOp>(pick(0, hw::kNumVectorOps - 1));
        const hw::VectorKind kind = hw::Info(v.op).kind;
        const bool has_b = kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect;
        v.rows = static_cast<uint64_t>(pick(1, 40));
        v.a = 0;
        v.out = k % 2 ? 200 : 300;
        v.a32 = pick(0, 1) != 0;
        v.o32 = pick(0, 1) != 0;
        if (has_b) {
          v.b = 100;
          v.b32 = pick(0, 1) != 0;
          v.bcast = pick(0, 3) == 0;
        }
        p.Vector(v);
      }
      p.Halt();
      engine::ExecJob job;
      job.program = p.Take();
      const engine::ExecResult r = chip->Run(job);
      ASSERT_TRUE(r.ok) << "program " << i;
      const std::map<std::string, double> t = Terms(BoundPrograms({job.program}, c));
      EXPECT_EQ(t.at("vector unit"), static_cast<double>(r.counters.busy_vector))
          << "program " << i;
      EXPECT_GT(static_cast<double>(r.cycles), t.at("vector unit")) << "program " << i;
    }
  }
}

}  // namespace
}  // namespace tpu::report
