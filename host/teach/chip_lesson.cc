// A Cloud TPU core's instruction, cycle by cycle from its RTL's waveform (see chip_lesson.h).
#include "host/teach/chip_lesson.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <set>

#include "arith/bf16.h"
#include "contract/tpu_contract.h"
#include "contract/tpu_signals.h"
#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/engine/engine_factory.h"
#include "host/isa/assembler.h"
#include "sim/wave/vcd_signals.h"

namespace tpu::teach {
namespace {

constexpr int kN = 4;                       // the lesson chip's array: teach-4
constexpr uint64_t kCycleTime = 10;         // ns a cycle in the trace; cycle c sampled at 10c
constexpr uint64_t kOut = 0x100;            // where the vector lesson's result goes in host memory
namespace probe = hw::signals::probe_chip;  // the signals read, by name (tpu_signals.toml)

// teach-4 as a bf16 chip of one sublane.
config::TpuConfig LessonConfig() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.dtype = hw::Dtype::kBf16;
  c.vector_sublanes = 1;
  return c;
}

// bfloat16 element e (16 bits from bit 16e) of a signal's bits, as a number.
float Element(const std::string& bits, size_t e) {
  const size_t at = bits.size() - 16 * (e + 1);
  return arith::FloatOfBits(
      uint32_t{static_cast<uint16_t>(std::stoul(bits.substr(at, 16), nullptr, 2))} << 16);
}

// kN numbers as a row: "[ v0 v1 ... ]".
std::string Cells(const float* v) {
  std::string s = "[";
  for (size_t l = 0; l < kN; ++l) s += fmt::format(" {:>8g}", v[l]);
  return s + " ]";
}

// Elements [first, first + kN) of a signal as a row of numbers.
std::string Row(const std::string& bits, size_t first) {
  float v[kN];
  for (size_t l = 0; l < kN; ++l) v[l] = Element(bits, first + l);
  return Cells(v);
}

uint64_t Field(const std::string& bits, size_t lsb, size_t width) {
  return std::stoull(bits.substr(bits.size() - lsb - width, width), nullptr, 2);
}

uint16_t Bf16(float f) { return arith::Bf16OfFp32(arith::BitsOfFloat(f)); }

void PutRows(std::vector<uint8_t>* image, const std::vector<float>& values) {
  for (const float v : values) {
    const uint16_t b = Bf16(v);
    image->push_back(static_cast<uint8_t>(b));
    image->push_back(static_cast<uint8_t>(b >> 8));
  }
}

// The rows of `values` (kN a row) as the lesson's data listing.
std::string Listing(const std::string& name, int64_t first_row, const std::vector<float>& values) {
  std::string s;
  for (size_t r = 0; r * kN < values.size(); ++r)
    s += fmt::format("  {:<3} row {:>2}  {}\n", r == 0 ? name : "",
                     first_row + static_cast<int64_t>(r), Cells(&values[r * kN]));
  return s;
}

struct Lesson {
  std::string instruction, program, data;
  engine::ExecJob job;
  bool vector = false;  // the vector unit's lesson (else the weight DMA's)
  uint64_t rule = 0;
  std::string op;       // the vector operation
  bool uses_b = false;  // ... and whether it reads b
};

Lesson TransposeLesson(std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-9, 9);
  std::vector<float> k(kN * kN);
  for (float& v : k) v = static_cast<float>(d(rng));
  Lesson l;
  l.instruction = "load_weights ub=0 tiles=1 transpose";
  l.program =
      "set_format dtype=bf16\nread_host host=0x0 ub=0 rows=4\n" + l.instruction + "\nhalt\n";
  l.data = Listing("K", 0, k);
  PutRows(&l.job.host_image, k);
  l.rule = 2 * kN + 1;  // a tile through the tile buffer (docs/timing.md)
  return l;
}

Lesson VectorLesson(std::mt19937& rng, const std::string& op) {
  const auto it = std::find_if(hw::kVectorOps.begin(), hw::kVectorOps.end(),
                               [&](const hw::VectorOpInfo& i) { return op == i.name; });
  const hw::VectorOpInfo& info = *it;
  const bool b = info.kind == hw::VectorKind::kBinary || info.kind == hw::VectorKind::kSelect;
  std::uniform_int_distribution<int> quarter(1, 16), half(-4, 4), bit(0, 1);
  std::vector<float> a(kN * kN), bv(kN * kN), old(kN * kN);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] =
        info.kind == hw::VectorKind::kSelect ? static_cast<float>(bit(rng)) : quarter(rng) / 4.0f;
    bv[i] = half(rng) / 2.0f;
    old[i] = static_cast<float>(i);
  }
  Lesson l;
  const int out_rows = info.kind == hw::VectorKind::kRows ? 1 : kN;
  l.instruction = fmt::format("vector op={} a=0{} out=8 rows=4", op, b ? " b=4" : "");
  l.program = fmt::format(
      "set_format dtype=bf16\nread_host host=0x0 ub=0 rows=12\n{}\nwrite_host ub=8 host={:#x} "
      "rows={}\nhalt\n",
      l.instruction, kOut, out_rows);
  l.data = Listing("a", 0, a) + (b ? Listing("b", 4, bv) : "") +
           (info.kind == hw::VectorKind::kSelect ? Listing("out", 8, old) : "");
  PutRows(&l.job.host_image, a);
  PutRows(&l.job.host_image, bv);
  PutRows(&l.job.host_image, old);
  l.job.host_out_addr = kOut;
  l.job.host_out_bytes = static_cast<uint64_t>(out_rows * kN * 2);
  l.vector = true;
  l.op = op;
  l.uses_b = b;
  l.rule = kN + static_cast<uint64_t>(info.latency) + 1;  // rows + latency + 1 (docs/timing.md)
  return l;
}

// One signal at cycle c: its bits, or as a number (`path`: the probe's, below its scope).
struct At {
  const sim::VcdSignals& t;
  uint64_t c;
  static std::string Name(std::string_view path) {
    return std::string(probe::kScope) + std::string(path);
  }
  std::string Bits(std::string_view path) const { return t.BitsAt(Name(path), c * kCycleTime); }
  uint64_t U(std::string_view path) const { return t.At(Name(path), c * kCycleTime); }
};

// The signals the lessons read.
std::set<std::string> Wanted() {
  std::set<std::string> names;
  for (std::string_view p :
       {probe::kDmaStart,    probe::kDmaBusy,      probe::kDmaUbRdEn,   probe::kDmaUbRdAddr,
        probe::kDmaUbRdData, probe::kDmaUbPending, probe::kDmaTile,     probe::kDmaTileRows,
        probe::kDmaTileCol,  probe::kDmaFifoPush,  probe::kDmaFifoData, probe::kDmaFifoCount,
        probe::kVecStart,    probe::kVecBusy,      probe::kVecRdEn,     probe::kVecRdAddr,
        probe::kVecRdData,   probe::kVecVld,       probe::kVecOutRows,  probe::kVecLineValid,
        probe::kVecLineAddr, probe::kVecLat,       probe::kVecWrEn,     probe::kVecWrAddr,
        probe::kVecWrData})
    names.insert(At::Name(p));
  return names;
}

std::string TransposeFrame(const At& s) {
  std::string f;
  if (s.U(probe::kDmaStart))
    f += "  issue         the weight DMA takes the instruction at this cycle's edge\n";
  if (s.U(probe::kDmaUbRdEn))
    f += fmt::format("  buffer read   row {} (its values arrive next cycle)\n",
                     s.U(probe::kDmaUbRdAddr));
  const uint64_t rows = s.U(probe::kDmaTileRows), col = s.U(probe::kDmaTileCol);
  if (s.U(probe::kDmaUbPending))
    f += fmt::format("  row arrives   {} -> tile buffer row {}\n",
                     Row(s.Bits(probe::kDmaUbRdData), 0), rows);
  const std::string tile = s.Bits(probe::kDmaTile);
  f += fmt::format("  tile buffer   {} of {} rows in\n", rows, kN);
  for (uint64_t r = 0; r < rows; ++r)
    f += fmt::format("                row {} {}\n", r, Row(tile, static_cast<size_t>(r * kN)));
  const bool push = s.U(probe::kDmaFifoPush) != 0;
  if (push) {  // lane k of the FIFO row is lane `col` of tile row k
    f += std::string(static_cast<size_t>(24 + 9 * col), ' ') + "^^^^^^^^ column " +
         std::to_string(col) + "\n";
    f +=
        fmt::format("  weight FIFO   <- column {}: {}\n", col, Row(s.Bits(probe::kDmaFifoData), 0));
  }
  f += fmt::format("  weight FIFO   {} rows held\n", s.U(probe::kDmaFifoCount));
  return f;
}

// `op`: the operation's name; `uses_b`: whether it reads b.
std::string VectorFrame(const At& s, const std::string& op, bool uses_b) {
  std::string f;
  if (s.U(probe::kVecStart))
    f += "  issue         the vector unit takes the instruction at this cycle's edge\n";
  const uint64_t rd = s.U(probe::kVecRdEn), addr = s.U(probe::kVecRdAddr);
  const int w = s.t.Width(At::Name(probe::kVecRdAddr)) / 3;  // a port's address bits
  const uint64_t mask = (uint64_t{1} << w) - 1;
  if (rd & 1) {
    f += fmt::format("  read          a row {}", addr & mask);
    if (rd & 2) f += fmt::format(", b row {}", addr >> w & mask);
    f += " (the rows arrive next cycle)\n";
  }
  if (s.U(probe::kVecVld)) {
    const std::string in = s.Bits(probe::kVecRdData);
    f += fmt::format("  compute       a {}\n", Row(in, 0));
    if (uses_b) f += fmt::format("                b {}\n", Row(in, 2 * kN));
    f += fmt::format("  {:>15} {}\n", op + " ->", Row(s.Bits(probe::kVecOutRows), 0));
  }
  const uint64_t valid = s.U(probe::kVecLineValid), lat = s.U(probe::kVecLat);
  const std::string lines = s.Bits(probe::kVecLineAddr);  // a stage's row address each
  const size_t aw = lines.size() / static_cast<size_t>(hw::kVectorMaxLatency);
  std::string held;
  for (uint64_t i = 0; i + 1 < lat; ++i)
    if (valid >> i & 1) held += fmt::format(" stage {}: row {};", i, Field(lines, i * aw, aw));
  if (!held.empty()) f += "  delay line   " + held.substr(0, held.size() - 1) + "\n";
  if (s.U(probe::kVecWrEn))
    f += fmt::format("  write         row {} <- {}\n", s.U(probe::kVecWrAddr),
                     Row(s.Bits(probe::kVecWrData), 0));
  return f;
}

}  // namespace

std::vector<std::string> LessonOps() {
  std::vector<std::string> ops;
  for (const hw::VectorOpInfo& i : hw::kVectorOps) ops.push_back(i.name);
  return ops;
}

}  // namespace tpu::teach

namespace tpu::teach {
namespace {

// The lesson's frames: from the cycle its instruction issues (its unit's start) to its unit's
// last busy cycle; the busy cycles counted.
void Frames(const sim::VcdSignals& t, const Lesson& l, ChipLessonRun* run) {
  const size_t cycles = static_cast<size_t>(t.LastTime() / kCycleTime + 1);
  const std::string_view start_path = l.vector ? probe::kVecStart : probe::kDmaStart;
  const std::string_view busy_path = l.vector ? probe::kVecBusy : probe::kDmaBusy;
  const std::vector<uint64_t> start = t.Sample(At::Name(start_path), 0, kCycleTime, cycles);
  const std::vector<uint64_t> busy = t.Sample(At::Name(busy_path), 0, kCycleTime, cycles);
  const auto first = std::find(start.begin(), start.end(), 1u);
  if (first == start.end())
    throw RuntimeError("the lesson's trace has no issue of its instruction");
  size_t last = static_cast<size_t>(first - start.begin());
  for (size_t c = last; c < cycles; ++c) {
    if (busy[c]) {
      last = c;
      ++run->busy_cycles;
    }
  }
  for (size_t c = static_cast<size_t>(first - start.begin()); c <= last; ++c) {
    const At at{t, c};
    run->frames.push_back({c, !l.vector ? TransposeFrame(at) : VectorFrame(at, l.op, l.uses_b)});
    if (!l.vector && at.U(probe::kDmaFifoPush))  // the FIFO's rows: Kᵀ
      run->result += fmt::format("  row {} {}\n", at.U(probe::kDmaTileCol),
                                 Row(at.Bits(probe::kDmaFifoData), 0));
  }
}

}  // namespace

ChipLessonRun RecordChipLesson(ChipLesson lesson, const std::string& op, uint64_t seed,
                               const std::string& work_dir) {
  const std::vector<std::string> ops = LessonOps();
  if (lesson == ChipLesson::kVector && std::find(ops.begin(), ops.end(), op) == ops.end()) {
    std::string known;
    for (const std::string& o : ops) known += (known.empty() ? "" : ", ") + o;
    throw UsageError("--op: '" + op + "' is not a vector operation (known: " + known + ")");
  }
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Lesson l = lesson == ChipLesson::kTranspose ? TransposeLesson(rng) : VectorLesson(rng, op);
  l.job.program = isa::Assemble(l.program, "lesson");
  engine::EngineOptions o;
  o.trace_path = work_dir + "/lesson.vcd";
  const auto chip = engine::MakeChipEngine(engine::EngineKind::kRtl, LessonConfig(), o);
  const engine::ExecResult r = chip->Run(l.job);
  chip->Finish();
  if (!r.ok) throw RuntimeError("the lesson's run failed: " + r.message);
  ChipLessonRun run;
  run.instruction = l.instruction;
  run.program = l.program;
  run.data = l.data;
  run.rule_cycles = l.rule;
  const sim::VcdSignals t = sim::VcdSignals::FromFile(o.trace_path, Wanted());
  Frames(t, l, &run);
  if (lesson == ChipLesson::kTranspose) {
    run.result = "The weight FIFO's rows (Kᵀ: row k is lane k of K's rows):\n" + run.result;
  } else {
    std::vector<float> out;
    for (size_t i = 0; i + 1 < r.host_out.size(); i += 2)
      out.push_back(arith::FloatOfBits(
          uint32_t{static_cast<uint16_t>(r.host_out[i] | r.host_out[i + 1] << 8)} << 16));
    run.result = "The rows written (read back from host memory):\n" + Listing("out", 8, out);
  }
  return run;
}

std::string ChipLessonIntro(const ChipLessonRun& run) {
  std::string s = "The program (teach-4 as a bf16 chip: 4 x 4, one sublane):\n";
  for (size_t a = 0, b; a < run.program.size(); a = b + 1) {
    b = run.program.find('\n', a);
    s += "  " + run.program.substr(a, b - a) + "\n";
  }
  return s + "\nIts operands in the unified buffer:\n" + run.data + "\n";
}

std::string ChipLessonFrame(const ChipLessonRun& run, size_t i) {
  const ChipFrame& f = run.frames[i];
  return fmt::format("cycle {}   {}\n{}\n", f.cycle, run.instruction, f.text);
}

std::string ChipLessonEnd(const ChipLessonRun& run) {
  return run.result +
         fmt::format("\n{} busy cycles of its unit; the timing rule's: {} (docs/timing.md)\n",
                     run.busy_cycles, run.rule_cycles);
}

std::string FormatChipLesson(const ChipLessonRun& run) {
  std::string s = ChipLessonIntro(run);
  for (size_t i = 0; i < run.frames.size(); ++i) s += ChipLessonFrame(run, i);
  return s + ChipLessonEnd(run);
}

}  // namespace tpu::teach
