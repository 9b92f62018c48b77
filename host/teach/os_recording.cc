// Output-stationary teaching: the recording and how it is shown (see os_recording.h).
#include "host/teach/os_recording.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/common/text.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/teach_text.h"
#include "sim/teach/teach_registry.h"

namespace tpu::teach {
namespace {

using namespace text;  // NOLINT(google-build-using-namespace): the frame vocabulary

// Counts the work and data of one sampled cycle, and adds the row draining out, if any, to
// C (tile by tile over C, row-major in tiles of dim x dim).
void Tally(const sim::OsArrayState& s, int dim, int64_t m_rows, int64_t n_cols, uint64_t& rows_out,
           OsRecording& run, CProgress& c) {
  Movement& m = run.moved;
  const auto n = static_cast<uint64_t>(dim);
  for (bool v : s.in_valid) m.reads_in += 2 * v;  // row r's A and column r's B
  for (int r = 0; r < dim; ++r) {
    for (int col = 0; col < dim; ++col) {
      if (!s.pe[static_cast<size_t>(r * dim + col)].valid) continue;
      ++run.macs;             // the edge that filled these registers also did the MAC
      m.operand_writes += 2;  // its A and B registers
      ++m.sum_writes;         // its accumulator
      m.passes += (col + 1 < dim) + (r + 1 < dim);  // A goes right, B goes down
    }
  }
  if (!s.draining) return;
  m.sum_writes += n * n;  // every accumulator takes the one above
  m.passes += n * (n - 1);
  m.writes_out += n;
  const int64_t tiles_n = (n_cols + dim - 1) / dim;
  const int64_t tile = static_cast<int64_t>(rows_out / n);
  const int64_t row = (tile / tiles_n) * dim + s.out_row;
  const int64_t col0 = (tile % tiles_n) * dim;
  for (int col = 0; col < dim && row < m_rows && col0 + col < n_cols; ++col) {
    c.Add(static_cast<size_t>(row * n_cols + col0 + col), s.out[col], true);
  }
  ++rows_out;
}

}  // namespace

OsRecording RecordOutputStationary(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim) {
  const auto engine = TeachingModel([&] { return sim::MakeOsTeachEngine(dim); });
  OsRecording run(a, b, dim);
  std::optional<sim::OsProbe> probe;
  uint64_t beats = 0, rows_out = 0;
  CProgress c(a.rows, b.cols);
  auto on_cycle = [&](uint64_t cycle) {
    if (!probe) probe.emplace(dim);
    OsCycle t;
    t.cycle = cycle;
    t.state = probe->Sample();
    beats += t.state.fire;
    Tally(t.state, dim, a.rows, b.cols, rows_out, run, c);
    t.beats_in = beats;
    t.macs = run.macs;
    t.results_out = rows_out;
    t.c = c;
    run.frames.push_back(std::move(t));
  };
  const sim::OsRunResult r = engine->Run({a.rows, a.cols, b.cols, a.data, b.data}, on_cycle);
  run.c = {a.rows, b.cols, r.c};
  run.matches_reference = gemm::ReferenceGemm(a, b).data == r.c;
  run.counters = r.counters;
  run.predicted = gemm::PredictOsCycles(a.rows, a.cols, b.cols, dim);
  run.rtl_cycles = r.counters.cycles;
  run.formula_cycles = run.predicted.total;
  return run;
}

std::string OsRecording::Intro(bool color) const {
  const Paint p{color};
  std::string s;
  s += p(fmt::format("tpusim teach: C = A x B, A {} x {}, B {} x {}, on a {} x {} "
                     "output-stationary systolic array (the RTL, cycle by cycle)\n",
                     a.rows, a.cols, b.rows, b.cols, dim, dim),
         kBold);
  s += MatrixText("A: enters from the left, one column per cycle", a);
  s += MatrixText("B: enters from the top, one row per cycle", b);
  s += fmt::format(
      "Mapping: {} tile(s) of C, each up to {} x {}; PE (r, c) keeps C[i0 + r][j0 + c] in its\n"
      "accumulator. Each cycle one column of A enters the rows and one row of B the columns,\n"
      "skewed by one cycle per lane, so A[r][k] meets B[k][c] in PE (r, c) at cycle k + r + c.\n"
      "After the last k the wavefront crosses the array (flush, {} cycles), then the\n"
      "accumulators drain down and out of the bottom row, one row per cycle ({} cycles).\n",
      predicted.tiles, dim, dim, 2 * (dim - 1), dim);
  s += "Each cell during the cycle: " + p("a", kGreen) + " the A value passing right, " +
       p("b", kMagenta) + " the B value passing down, " + p("c", kCyan) +
       " the accumulator; a bright cell did a multiply-accumulate at the last edge.\n"
       "Left and top: the A and B values entering at the end of the cycle; bottom: the row of C\n"
       "leaving while the array drains.\n\n";
  return s;
}

namespace {

// One row of PEs: the A and B values passing, the accumulator; A entering on the left.
std::string PeRow(const sim::OsArrayState& st, int r, int n, const Paint& p) {
  const std::string in = fmt::format("r{:<2}{:>5}  > ", r, st.a_in[r]);
  std::vector<std::string> lines = {st.in_valid[r] ? p(in, kGreen) : p(in, kDim), Margin()};
  for (int c = 0; c < n; ++c) {
    const sim::OsPeState& pe = st.pe[static_cast<size_t>(r * n + c)];
    const std::string ab = fmt::format("a{:>4} b{:>4}", pe.a, pe.b);
    lines[0] += Cell(pe.valid ? p(ab, kYellow) : ab, 11);
    const std::string acc = fmt::format("c{:>11}", pe.acc);
    lines[1] += Cell(pe.acc != 0 ? p(acc, kCyan) : acc, 12);
  }
  return LinesOfCells(lines, n);
}

}  // namespace

std::string OsRecording::Frame(size_t index, bool color) const {
  const Paint p{color};
  const OsCycle& t = frames[index];
  const sim::OsArrayState& st = t.state;
  const int n = dim;
  std::string s = FrameTitle(t.cycle, frames.size(),
                             fmt::format("   beats in {}   MACs done {}   result rows out {}{}",
                                         t.beats_in, Grouped(static_cast<int64_t>(t.macs)),
                                         t.results_out, st.draining ? "   (draining)" : ""),
                             p);
  s += ColumnHeads(
      n, [&](int c) { return st.in_valid[c] ? fmt::format("v b {}", st.b_in[c]) : std::string(); },
      p, kMagenta);
  for (int r = 0; r < n; ++r) s += PeRow(st, r, n, p);
  if (st.draining) {
    std::string row;
    for (int c = 0; c < n; ++c) row += fmt::format(" {}", st.out[c]);
    s += p(fmt::format("  tile row {} out (the bottom row; each row moves down one):{}", st.out_row,
                       row),
           kCyan) +
         "\n";
  }
  return s + "\n";
}

SummaryParts OsRecording::Summary() const {
  return {fmt::format("formula tiles x (K + 3 x {} - 2) = {} x {} = {}", dim, predicted.tiles,
                      a.cols + 3 * dim - 2, predicted.total),
          fmt::format("beats {}  flush {}  drain {}", counters.beat_cycles, counters.flush_cycles,
                      counters.drain_cycles),
          fmt::format("{} done by the PEs", macs)};
}

nlohmann::json OsRecording::FramesJson() const {
  using nlohmann::json;
  json out = json::array();
  for (const OsCycle& t : frames) {
    const sim::OsArrayState& st = t.state;
    json pe = json::array();
    for (const sim::OsPeState& e : st.pe) pe.push_back({e.a, e.b, e.acc, e.valid ? 1 : 0});
    json valid = json::array();
    for (bool v : st.in_valid) valid.push_back(v ? 1 : 0);
    out.push_back({{"cycle", t.cycle + 1},
                   {"fire", st.fire ? 1 : 0},
                   {"beats_in", t.beats_in},
                   {"macs", t.macs},
                   {"results_out", t.results_out},
                   {"pe", pe},
                   {"a_in", st.a_in},
                   {"b_in", st.b_in},
                   {"in_valid", valid},
                   {"out", st.draining ? json(st.out) : json(nullptr)},
                   {"out_row", st.draining ? json(st.out_row) : json(nullptr)},
                   {"c", t.c.Json()}});
  }
  return out;
}

}  // namespace tpu::teach
