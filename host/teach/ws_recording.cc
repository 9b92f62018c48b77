// Weight-stationary teaching: the recording and how it is shown (see ws_recording.h).
#include "host/teach/ws_recording.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "arith/format.h"
#include "host/common/errors.h"
#include "host/common/text.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/teach_text.h"
#include "sim/teach/teach_registry.h"

namespace tpu::teach {
namespace {

using namespace text;  // NOLINT(google-build-using-namespace): the frame vocabulary

// Where each streamed row's results go, in streaming order (the plan's nesting: chunks of
// M, then column tiles of N, then folds of K): its row of C, first column, and whether it
// is the last fold (the sum is final).
struct RowTarget {
  int64_t row, col0;
  bool last_fold;
};
std::vector<RowTarget> RowTargets(const gemm::GemmPlan& p) {
  std::vector<RowTarget> t;
  for (int64_t chunk = 0; chunk < p.m_chunks; ++chunk) {
    for (int64_t nt = 0; nt < p.n_tiles; ++nt) {
      for (int64_t kt = 0; kt < p.k_tiles; ++kt) {
        for (int64_t r = 0; r < p.RowsInChunk(chunk); ++r) {
          t.push_back({chunk * p.m_chunk + r, nt * p.array_dim, kt == p.k_tiles - 1});
        }
      }
    }
  }
  return t;
}

// The running counts a recording keeps while the model runs.
struct WsTally {
  std::vector<bool> fired;  // a_fire, cycle by cycle
  uint64_t rows_in = 0, tiles = 0, results = 0, weight_writes = 0;
};

// The weight-stationary PE carries no valid bit (idle cycles move zeros): a row that fired
// at cycle f is in PE (r, c)'s activation register during cycle f + r + c + 2 (lane r is
// skewed by r cycles, the array's left-edge register takes one, then one PE per cycle).
std::vector<uint8_t> Wavefront(uint64_t cycle, int dim, const std::vector<bool>& fired) {
  std::vector<uint8_t> active(static_cast<size_t>(dim * dim), 0);
  for (int r = 0; r < dim; ++r) {
    for (int col = 0; col < dim; ++col) {
      const int64_t f = static_cast<int64_t>(cycle) - r - col - 2;
      active[static_cast<size_t>(r * dim + col)] = f >= 0 && fired[static_cast<size_t>(f)];
    }
  }
  return active;
}

// Counts one sampled cycle and adds the row that left the array, if any, to C.
void Tally(const sim::ArrayState& s, const std::vector<RowTarget>& targets, int dim, int64_t n_cols,
           WsTally& t, CProgress& c) {
  t.fired.push_back(s.a_fire);
  t.rows_in += s.a_fire;
  // The switch bit enters with the first row of a tile.
  t.tiles += s.a_fire && !s.switch_in.empty() && s.switch_in[0];
  for (bool w : s.w_write) t.weight_writes += w;
  if (!s.out_valid) return;
  if (t.results >= targets.size()) throw std::runtime_error("more result rows than rows in");
  const RowTarget& to = targets[t.results];
  for (int col = 0; col < dim && to.col0 + col < n_cols; ++col) {
    c.Add(static_cast<size_t>(to.row * n_cols + to.col0 + col), s.out[col], to.last_fold);
  }
  ++t.results;
}

// Every fired row moves n activations through n PEs each and n partial sums down n PEs
// each; weights arrive on the column buses into the shadow registers and are copied to the
// active ones once per tile.
Movement Moved(const WsTally& t, uint64_t n) {
  Movement m;
  m.reads_in = t.weight_writes + t.rows_in * n;
  m.operand_writes = t.weight_writes + t.tiles * n * n + t.rows_in * n * n;
  m.sum_writes = t.rows_in * n * n;
  m.passes = 2 * t.rows_in * n * (n - 1);
  m.writes_out = t.results * n;
  return m;
}

// The run on the teaching model of T's format: int8_t, or uint16_t for bfloat16.
template <class T>
WsRecording Record(const Matrix<T>& a, const Matrix<T>& b, int dim) {
  const hw::Dtype dtype = arith::FormatOf<T>::kDtype;
  const auto engine = TeachingModel([&] { return sim::MakeTeachEngine(dim, dtype); });
  WsRecording run(a, b, dim, dtype);
  run.plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, dim, engine->Params().acc_depth);
  const std::vector<RowTarget> targets = RowTargets(run.plan);
  std::optional<sim::MxuProbe> probe;  // the model exists only while it runs
  WsTally tally;
  CProgress c(a.rows, b.cols, run.values);
  sim::RunOptions options;
  options.on_cycle = [&](uint64_t cycle) {
    if (!probe) probe.emplace(dim, 8 * static_cast<int>(sizeof(T)));
    WsCycle t;
    t.cycle = cycle;
    t.state = probe->Sample();
    t.active = Wavefront(cycle, dim, tally.fired);
    Tally(t.state, targets, dim, b.cols, tally, c);
    t.rows_in = tally.rows_in;
    t.tiles = tally.tiles;
    t.results_out = tally.results;
    t.c = c;
    run.frames.push_back(std::move(t));
  };
  const gemm::GemmRunResult r = gemm::RunGemm(run.plan, a, b, *engine, options);
  run.c = r.c;
  run.matches_reference = r.matches_reference;
  run.predicted = r.predicted;
  run.counters = r.counters;
  run.rtl_cycles = r.counters.cycles;
  run.formula_cycles = r.predicted.total;
  run.moved = Moved(tally, static_cast<uint64_t>(dim));
  return run;
}

}  // namespace

WsRecording RecordWeightStationary(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim) {
  return Record(a, b, dim);
}

WsRecording RecordWeightStationary(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b, int dim) {
  return Record(a, b, dim);
}

std::string WsRecording::Intro(bool color) const {
  const Paint p{color};
  std::string s;
  s +=
      p(fmt::format("tpusim teach: C = A x B, A {} x {}, B {} x {}, on a {} x {} weight-stationary "
                    "systolic array (the RTL, cycle by cycle)\n",
                    plan.shape.m, plan.shape.k, plan.shape.k, plan.shape.n, dim, dim),
        kBold);
  auto operands = [&](const char* name, const Matrix<int32_t>& m) {
    return MatrixText(name, m.rows, m.cols,
                      [&](int64_t r, int64_t c) { return values.Operand(m.at(r, c)); });
  };
  s += operands("A: activations, one row per cycle", a);
  s += operands("B: weights, held still in the PEs", b);
  if (values.dtype == hw::Dtype::kBf16) {
    s += "bfloat16: each PE multiplies two bfloat16 values exactly and adds the product into\n"
         "its float32 partial sum, rounding to nearest even (docs/bf16.md).\n";
  }
  s += fmt::format(
      "Mapping: {} weight tile(s) = {} K-fold(s) x {} N-tile(s); PE (r, c) holds B[k0 + r][n0 + "
      "c].\n"
      "Row i of A enters the array skewed: lane r one cycle after lane r - 1, so the rows cross\n"
      "the array as a diagonal wavefront; partial sums flow down each column and C[i][n0 + c]\n"
      "leaves the bottom of column c. The first row of each tile carries the switch bit (*),\n"
      "which makes each PE copy its shadow weight (the next tile, loaded meanwhile) to active.\n",
      plan.tiles, plan.k_tiles, plan.n_tiles);
  s += "Each cell during the cycle: " + p("w", kBold) + " active weight, " + p("s", kMagenta) +
       " shadow (next tile) weight, " + p("a", kGreen) + " activation (" + p("*", kYellow) +
       " switch), " + p("p", kCyan) + " partial sum.\n";
  s += "Left: the activation entering each row at the end of the cycle; top: weights written\n"
       "into a shadow register at the end of the cycle (row:value); bottom: the partial sums\n"
       "leaving each column, and finished result rows.\n\n";
  return s;
}

namespace {

// One row of PEs: weights, activations, partial sums; the activation entering on the left.
std::string PeRow(const sim::ArrayState& st, int r, int n, const Values& v, const Paint& p) {
  const bool in_sw = st.switch_in[r];
  const std::string in =
      fmt::format("k{:<2}{:>5}{} > ", r, v.Operand(st.act_in[r]), in_sw ? "*" : " ");
  std::vector<std::string> lines = {(st.act_in[r] != 0 || in_sw) ? p(in, kGreen) : p(in, kDim),
                                    Margin(), Margin()};
  for (int c = 0; c < n; ++c) {
    const sim::PeState& pe = st.pe[static_cast<size_t>(r * n + c)];
    const std::string w = fmt::format("w{:>4}", v.Operand(pe.weight));
    const std::string sh = fmt::format(" s{:>4} ", v.Operand(pe.shadow));
    lines[0] += Cell(p(w, kBold) + (st.w_write[c] && st.w_row[c] == r ? p(sh, kMagenta) : sh),
                     w.size() + sh.size());
    const std::string a = fmt::format("a{:>4}{}", v.Operand(pe.act), pe.sw ? "*" : " ");
    lines[1] += Cell(pe.act != 0 || pe.sw ? p(a, pe.sw ? kYellow : kGreen) : a, a.size());
    const std::string ps = fmt::format("p{:>11}", v.Sum(pe.psum));
    lines[2] += Cell(pe.psum != 0 ? p(ps, kCyan) : ps, ps.size());
  }
  return LinesOfCells(lines, n);
}

}  // namespace

std::string WsRecording::Frame(size_t index, bool color) const {
  const Paint p{color};
  const WsCycle& t = frames[index];
  const sim::ArrayState& st = t.state;
  const int n = dim;
  std::string s = FrameTitle(
      t.cycle, frames.size(),
      fmt::format("   rows in {}   tiles {}   MACs issued {}   result rows out {}", t.rows_in,
                  t.tiles, Grouped(static_cast<int64_t>(t.rows_in) * n * n), t.results_out),
      p);
  s += ColumnHeads(
      n,
      [&](int c) {
        return st.w_write[c] ? fmt::format("v w{}:{}", st.w_row[c], values.Operand(st.w_data[c]))
                             : std::string();
      },
      p, kMagenta);
  for (int r = 0; r < n; ++r) s += PeRow(st, r, n, values, p);
  std::string bottom = Margin();
  for (int c = 0; c < n; ++c) {
    const int32_t v = st.pe[static_cast<size_t>((n - 1) * n + c)].psum;
    bottom += " " + fmt::format("{:<{}}", "v " + values.Sum(v), kCell - 1);
  }
  s += bottom + "\n";
  if (st.out_valid) {
    std::string row;
    for (int c = 0; c < n; ++c) row += " " + values.Sum(st.out[c]);
    s += p("  result row out (de-skewed, to the accumulators):" + row, kCyan) + "\n";
  }
  return s + "\n";
}

SummaryParts WsRecording::Summary() const {
  return {fmt::format("docs/mxu.md formula 3n + 1 + ... = {}", predicted.total),
          fmt::format("stream {}  weight load {}  stall {}  drain {}", counters.stream_cycles,
                      counters.load_cycles, counters.stall_cycles, counters.drain_cycles),
          fmt::format("{} issued (rows x N x N)", counters.stream_cycles * dim * dim)};
}

nlohmann::json WsRecording::FramesJson() const {
  using nlohmann::json;
  auto Outs = [&](const std::vector<int32_t>& out) {
    json o = json::array();
    for (int32_t v : out) o.push_back(values.SumJson(v));
    return o;
  };
  json out = json::array();
  for (const WsCycle& t : frames) {
    const sim::ArrayState& st = t.state;
    json pe = json::array();
    for (size_t i = 0; i < st.pe.size(); ++i) {
      const sim::PeState& e = st.pe[i];
      pe.push_back({values.OperandJson(e.weight), values.OperandJson(e.shadow),
                    values.OperandJson(e.act), values.SumJson(e.psum), e.sw ? 1 : 0, t.active[i]});
    }
    json in = json::array(), sw = json::array(), wr = json::array();
    for (size_t r = 0; r < st.act_in.size(); ++r) {
      in.push_back(values.OperandJson(st.act_in[r]));
      sw.push_back(st.switch_in[r] ? 1 : 0);
      wr.push_back(st.w_write[r] ? json{st.w_row[r], values.OperandJson(st.w_data[r])}
                                 : json(nullptr));
    }
    out.push_back({{"cycle", t.cycle + 1},
                   {"fire", st.a_fire ? 1 : 0},
                   {"rows_in", t.rows_in},
                   {"tiles", t.tiles},
                   {"results_out", t.results_out},
                   {"pe", pe},
                   {"act_in", in},
                   {"switch_in", sw},
                   {"w_write", wr},
                   {"out", st.out_valid ? Outs(st.out) : json(nullptr)},
                   {"c", t.c.Json()}});
  }
  return out;
}

}  // namespace tpu::teach
