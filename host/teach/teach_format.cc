// Terminal frames, data and the HTML page of `tpusim teach` (see teach.h).
#include <fmt/format.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "host/common/text.h"
#include "host/teach/teach.h"

namespace tpu::teach {
namespace {

constexpr int kMargin = 13;  // "k0   -12 * >" before the first column
constexpr int kCell = 14;    // "| w-128 s-128 " etc.

// ANSI colours, or nothing in plain text.
struct Paint {
  bool on;
  std::string operator()(const std::string& s, const char* code) const {
    return on ? fmt::format("\033[{}m{}\033[0m", code, s) : s;
  }
};
constexpr const char* kGreen = "1;32";
constexpr const char* kYellow = "1;33";
constexpr const char* kCyan = "36";
constexpr const char* kMagenta = "35";
constexpr const char* kBold = "1";
constexpr const char* kDim = "2";

std::string MatrixText(const std::string& name, int64_t rows, int64_t cols,
                       const std::function<int64_t(int64_t, int64_t)>& at) {
  std::string s = fmt::format("  {} ({} x {}):\n", name, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    s += "    ";
    for (int64_t c = 0; c < cols; ++c) s += fmt::format("{:>7}", at(r, c));
    s += "\n";
  }
  return s;
}

std::string Border(int dim) {
  std::string s(kMargin - 1, ' ');
  for (int c = 0; c < dim; ++c) s += "+" + std::string(kCell - 1, '-');
  return s + "+\n";
}

// C as the RTL computed it, and whether it equals Eigen's.
std::string ResultText(const Matrix<int32_t>& c, bool exact, const Paint& p) {
  return MatrixText("C = A x B from the RTL", c.rows, c.cols,
                    [&](int64_t r, int64_t col) { return c.at(r, col); }) +
         (exact ? "  bit-exact with the Eigen int32 reference\n"
                : p("  DIFFERS from the Eigen reference\n", "1;31"));
}

std::string MovementText(const Movement& m) {
  return fmt::format(
      "  data moved: {} values read in, {} operand register writes, {} partial-sum writes,\n"
      "              {} passed between PEs, {} results written out\n",
      m.reads_in, m.operand_writes, m.sum_writes, m.passes, m.writes_out);
}

double Utilization(uint64_t useful, uint64_t cycles, int dim) {
  return cycles ? 100.0 * static_cast<double>(useful) / (static_cast<double>(cycles) * dim * dim)
                : 0.0;
}

template <class M>
nlohmann::json MatJson(const M& m) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r = 0; r < m.rows; ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t c = 0; c < m.cols; ++c) row.push_back(static_cast<int64_t>(m.at(r, c)));
    rows.push_back(row);
  }
  return rows;
}

// C so far: null where nothing has left the array yet, else [value, final].
nlohmann::json ProgressJson(const CProgress& p) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < p.value.size(); ++i) {
    out.push_back(p.seen[i] ? nlohmann::json{p.value[i], p.seen[i] == 2 ? 1 : 0}
                            : nlohmann::json(nullptr));
  }
  return out;
}

nlohmann::json MovementJson(const Movement& m) {
  return {{"reads_in", m.reads_in},
          {"operand_writes", m.operand_writes},
          {"sum_writes", m.sum_writes},
          {"passes", m.passes},
          {"writes_out", m.writes_out}};
}

}  // namespace

int TeachFrameWidth(int dim) { return kMargin - 1 + dim * kCell + 1; }

std::string FormatTeachIntro(const TeachRun& run, bool color) {
  const Paint p{color};
  const gemm::GemmPlan& plan = run.plan;
  std::string s;
  s +=
      p(fmt::format("tpusim teach: C = A x B, A {} x {}, B {} x {}, on a {} x {} weight-stationary "
                    "systolic array (the RTL, cycle by cycle)\n",
                    plan.shape.m, plan.shape.k, plan.shape.k, plan.shape.n, run.dim, run.dim),
        kBold);
  s += MatrixText("A: activations, one row per cycle", run.a.rows, run.a.cols,
                  [&](int64_t r, int64_t c) { return run.a.at(r, c); });
  s += MatrixText("B: weights, held still in the PEs", run.b.rows, run.b.cols,
                  [&](int64_t r, int64_t c) { return run.b.at(r, c); });
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

std::string FormatTeachCycle(const TeachRun& run, size_t index, bool color) {
  const Paint p{color};
  const TeachCycle& t = run.cycles[index];
  const sim::ArrayState& st = t.state;
  const int n = run.dim;
  std::string s;
  s += p(fmt::format("cycle {} of {}", t.cycle + 1, run.cycles.size()), kBold);
  s += fmt::format("   rows in {}   tiles {}   MACs issued {}   result rows out {}\n", t.rows_in,
                   t.tiles, Grouped(static_cast<int64_t>(t.rows_in) * n * n), t.results_out);
  // column headers and weight writes
  std::string head(kMargin - 1, ' ');
  std::string writes(kMargin - 1, ' ');
  for (int c = 0; c < n; ++c) {
    head += fmt::format(" {:<{}}", fmt::format("col {}", c), kCell - 1);
    const std::string w =
        st.w_write[c] ? fmt::format("v w{}:{}", st.w_row[c], st.w_data[c]) : std::string("");
    writes += " " + (w.empty() ? std::string(kCell - 1, ' ')
                               : p(fmt::format("{:<{}}", w, kCell - 1), kMagenta));
  }
  s += head + "\n" + writes + "\n" + Border(n);
  for (int r = 0; r < n; ++r) {
    std::string lines[3];
    const bool in_sw = st.switch_in[r];
    const std::string in = fmt::format("k{:<2}{:>5}{} > ", r, st.act_in[r], in_sw ? "*" : " ");
    lines[0] = (st.act_in[r] != 0 || in_sw) ? p(in, kGreen) : p(in, kDim);
    lines[1] = std::string(kMargin - 1, ' ');
    lines[2] = std::string(kMargin - 1, ' ');
    for (int c = 0; c < n; ++c) {
      const sim::PeState& pe = st.pe[static_cast<size_t>(r * n + c)];
      const std::string w = fmt::format("w{:>4}", pe.weight);
      const std::string sh = fmt::format(" s{:>4} ", pe.shadow);
      lines[0] += "|" + p(w, kBold) + (st.w_write[c] && st.w_row[c] == r ? p(sh, kMagenta) : sh) +
                  std::string(kCell - 1 - 12, ' ');
      const std::string a = fmt::format("a{:>4}{}", pe.act, pe.sw ? "*" : " ");
      lines[1] += "|" + (pe.act != 0 || pe.sw ? p(a, pe.sw ? kYellow : kGreen) : a) +
                  std::string(kCell - 1 - 6, ' ');
      const std::string ps = fmt::format("p{:>11}", pe.psum);
      lines[2] += "|" + (pe.psum != 0 ? p(ps, kCyan) : ps) + std::string(kCell - 1 - 12, ' ');
    }
    for (auto& l : lines) s += l + "|\n";
    s += Border(n);
  }
  std::string bottom(kMargin - 1, ' ');
  for (int c = 0; c < n; ++c) {
    const int32_t v = st.pe[static_cast<size_t>((n - 1) * n + c)].psum;
    bottom += " " + fmt::format("{:<{}}", fmt::format("v {}", v), kCell - 1);
  }
  s += bottom + "\n";
  if (st.out_valid) {
    std::string row;
    for (int c = 0; c < n; ++c) row += fmt::format(" {}", st.out[c]);
    s += p("  result row out (de-skewed, to the accumulators):" + row, kCyan) + "\n";
  }
  return s + "\n";
}

std::string FormatTeachSummary(const TeachRun& run, bool color) {
  const Paint p{color};
  const gemm::GemmPlan& plan = run.plan;
  const int64_t useful = plan.shape.m * plan.shape.k * plan.shape.n;
  const uint64_t issued = run.counters.stream_cycles * run.dim * run.dim;
  std::string s;
  s += p("Summary\n", kBold);
  s += fmt::format("  cycles {} (counted by the RTL; docs/mxu.md formula 3n + 1 + ... = {})\n",
                   run.counters.cycles, run.predicted.total);
  s += fmt::format("  stream {}  weight load {}  stall {}  drain {}\n", run.counters.stream_cycles,
                   run.counters.load_cycles, run.counters.stall_cycles, run.counters.drain_cycles);
  s += fmt::format(
      "  MACs: {} useful (M x K x N), {} issued (rows x N x N); utilization {:.1f} %\n", useful,
      issued,
      run.counters.cycles ? 100.0 * static_cast<double>(useful) /
                                (static_cast<double>(run.counters.cycles) * run.dim * run.dim)
                          : 0.0);
  s += MovementText(run.moved);
  return s + ResultText(run.c, run.matches_reference, p);
}

nlohmann::json TeachJson(const TeachRun& run) {
  using nlohmann::json;
  json frames = json::array();
  for (const TeachCycle& t : run.cycles) {
    const sim::ArrayState& st = t.state;
    json pe = json::array();
    for (size_t i = 0; i < st.pe.size(); ++i) {
      const sim::PeState& e = st.pe[i];
      pe.push_back({e.weight, e.shadow, e.act, e.psum, e.sw ? 1 : 0, t.active[i]});
    }
    json in = json::array(), sw = json::array(), wr = json::array();
    for (size_t r = 0; r < st.act_in.size(); ++r) {
      in.push_back(st.act_in[r]);
      sw.push_back(st.switch_in[r] ? 1 : 0);
      wr.push_back(st.w_write[r] ? json{st.w_row[r], st.w_data[r]} : json(nullptr));
    }
    frames.push_back({{"cycle", t.cycle + 1},
                      {"fire", st.a_fire ? 1 : 0},
                      {"rows_in", t.rows_in},
                      {"tiles", t.tiles},
                      {"results_out", t.results_out},
                      {"pe", pe},
                      {"act_in", in},
                      {"switch_in", sw},
                      {"w_write", wr},
                      {"out", st.out_valid ? json(st.out) : json(nullptr)},
                      {"c", ProgressJson(t.c)}});
  }
  const int64_t useful = run.plan.UsefulMacs();
  return {{"dataflow", DataflowName(Dataflow::kWeightStationary)},
          {"dim", run.dim},
          {"m", run.plan.shape.m},
          {"k", run.plan.shape.k},
          {"n", run.plan.shape.n},
          {"a", MatJson(run.a)},
          {"b", MatJson(run.b)},
          {"c", MatJson(run.c)},
          {"bit_exact", run.matches_reference},
          {"cycles", run.counters.cycles},
          {"formula_cycles", run.predicted.total},
          {"macs", useful},
          {"utilization", Utilization(static_cast<uint64_t>(useful), run.counters.cycles, run.dim)},
          {"moved", MovementJson(run.moved)},
          {"frames", frames}};
}

nlohmann::json OsTeachJson(const OsTeachRun& run) {
  using nlohmann::json;
  json frames = json::array();
  for (const OsTeachCycle& t : run.cycles) {
    const sim::OsArrayState& st = t.state;
    json pe = json::array();
    for (const sim::OsPeState& e : st.pe) pe.push_back({e.a, e.b, e.acc, e.valid ? 1 : 0});
    json valid = json::array();
    for (bool v : st.in_valid) valid.push_back(v ? 1 : 0);
    frames.push_back({{"cycle", t.cycle + 1},
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
                      {"c", ProgressJson(t.c)}});
  }
  const uint64_t useful = static_cast<uint64_t>(run.a.rows * run.a.cols * run.b.cols);
  return {{"dataflow", DataflowName(Dataflow::kOutputStationary)},
          {"dim", run.dim},
          {"m", run.a.rows},
          {"k", run.a.cols},
          {"n", run.b.cols},
          {"a", MatJson(run.a)},
          {"b", MatJson(run.b)},
          {"c", MatJson(run.c)},
          {"bit_exact", run.matches_reference},
          {"cycles", run.counters.cycles},
          {"formula_cycles", run.predicted.total},
          {"macs", useful},
          {"utilization", Utilization(useful, run.counters.cycles, run.dim)},
          {"moved", MovementJson(run.moved)},
          {"frames", frames}};
}

std::string FormatOsIntro(const OsTeachRun& run, bool color) {
  const Paint p{color};
  std::string s;
  s += p(fmt::format("tpusim teach: C = A x B, A {} x {}, B {} x {}, on a {} x {} "
                     "output-stationary systolic array (the RTL, cycle by cycle)\n",
                     run.a.rows, run.a.cols, run.b.rows, run.b.cols, run.dim, run.dim),
         kBold);
  s += MatrixText("A: enters from the left, one column per cycle", run.a.rows, run.a.cols,
                  [&](int64_t r, int64_t c) { return run.a.at(r, c); });
  s += MatrixText("B: enters from the top, one row per cycle", run.b.rows, run.b.cols,
                  [&](int64_t r, int64_t c) { return run.b.at(r, c); });
  s += fmt::format(
      "Mapping: {} tile(s) of C, each up to {} x {}; PE (r, c) keeps C[i0 + r][j0 + c] in its\n"
      "accumulator. Each cycle one column of A enters the rows and one row of B the columns,\n"
      "skewed by one cycle per lane, so A[r][k] meets B[k][c] in PE (r, c) at cycle k + r + c.\n"
      "After the last k the wavefront crosses the array (flush, {} cycles), then the\n"
      "accumulators drain down and out of the bottom row, one row per cycle ({} cycles).\n",
      run.predicted.tiles, run.dim, run.dim, 2 * (run.dim - 1), run.dim);
  s += "Each cell during the cycle: " + p("a", kGreen) + " the A value passing right, " +
       p("b", kMagenta) + " the B value passing down, " + p("c", kCyan) +
       " the accumulator; a bright cell did a multiply-accumulate at the last edge.\n"
       "Left and top: the A and B values entering at the end of the cycle; bottom: the row of C\n"
       "leaving while the array drains.\n\n";
  return s;
}

std::string FormatOsCycle(const OsTeachRun& run, size_t index, bool color) {
  const Paint p{color};
  const OsTeachCycle& t = run.cycles[index];
  const sim::OsArrayState& st = t.state;
  const int n = run.dim;
  std::string s;
  s += p(fmt::format("cycle {} of {}", t.cycle + 1, run.cycles.size()), kBold);
  s += fmt::format("   beats in {}   MACs done {}   result rows out {}{}\n", t.beats_in,
                   Grouped(static_cast<int64_t>(t.macs)), t.results_out,
                   st.draining ? "   (draining)" : "");
  std::string head(kMargin - 1, ' '), top(kMargin - 1, ' ');
  for (int c = 0; c < n; ++c) {
    head += fmt::format(" {:<{}}", fmt::format("col {}", c), kCell - 1);
    const std::string b = st.in_valid[c] ? fmt::format("v b {}", st.b_in[c]) : std::string("");
    top += " " + (b.empty() ? std::string(kCell - 1, ' ')
                            : p(fmt::format("{:<{}}", b, kCell - 1), kMagenta));
  }
  s += head + "\n" + top + "\n" + Border(n);
  for (int r = 0; r < n; ++r) {
    std::string lines[2];
    const std::string in = fmt::format("r{:<2}{:>5}  > ", r, st.a_in[r]);
    lines[0] = st.in_valid[r] ? p(in, kGreen) : p(in, kDim);
    lines[1] = std::string(kMargin - 1, ' ');
    for (int c = 0; c < n; ++c) {
      const sim::OsPeState& pe = st.pe[static_cast<size_t>(r * n + c)];
      const std::string ab = fmt::format("a{:>4} b{:>4}", pe.a, pe.b);
      lines[0] += "|" + (pe.valid ? p(ab, kYellow) : ab) + std::string(kCell - 1 - 11, ' ');
      const std::string acc = fmt::format("c{:>11}", pe.acc);
      lines[1] += "|" + (pe.acc != 0 ? p(acc, kCyan) : acc) + std::string(kCell - 1 - 12, ' ');
    }
    for (auto& l : lines) s += l + "|\n";
    s += Border(n);
  }
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

std::string FormatOsSummary(const OsTeachRun& run, bool color) {
  const Paint p{color};
  const uint64_t useful = static_cast<uint64_t>(run.a.rows * run.a.cols * run.b.cols);
  std::string s;
  s += p("Summary\n", kBold);
  s += fmt::format(
      "  cycles {} (counted by the RTL; formula tiles x (K + 3 x {} - 2) = {} x {} = {})\n",
      run.counters.cycles, run.dim, run.predicted.tiles, run.a.cols + 3 * run.dim - 2,
      run.predicted.total);
  s += fmt::format("  beats {}  flush {}  drain {}\n", run.counters.beat_cycles,
                   run.counters.flush_cycles, run.counters.drain_cycles);
  s += fmt::format("  MACs: {} useful (M x K x N), {} done by the PEs; utilization {:.1f} %\n",
                   useful, run.macs, Utilization(useful, run.counters.cycles, run.dim));
  s += MovementText(run.moved);
  return s + ResultText(run.c, run.matches_reference, p);
}

std::string FormatComparison(const TeachRun& ws, const OsTeachRun& os, bool color) {
  const Paint p{color};
  std::string s = p(fmt::format("Weight-stationary and output-stationary, the same A ({} x {}) "
                                "and B ({} x {}) on {} x {} arrays\n",
                                ws.a.rows, ws.a.cols, ws.b.rows, ws.b.cols, ws.dim, ws.dim),
                    kBold);
  s += fmt::format("  {:<34}{:>18}{:>18}\n", "", "weight-stationary", "output-stationary");
  for (const std::string& key : AnswerKeys()) {
    const double a = AnswerValue(ws, key), b = AnswerValue(os, key);
    if (key == "utilization") {
      s += fmt::format("  {:<34}{:>16.1f} %{:>16.1f} %\n", "utilization", a, b);
    } else {
      static const std::map<std::string, std::string> kLabel = {
          {"cycles", "cycles"},
          {"macs", "useful MACs"},
          {"reads_in", "values read in"},
          {"operand_writes", "operand register writes"},
          {"sum_writes", "partial-sum/accumulator writes"},
          {"passes", "values passed between PEs"},
          {"writes_out", "results written out"}};
      s += fmt::format("  {:<34}{:>18}{:>18}\n", kLabel.at(key), Grouped(static_cast<int64_t>(a)),
                       Grouped(static_cast<int64_t>(b)));
    }
  }
  s += fmt::format("  C bit-exact with Eigen: {} and {}\n", ws.matches_reference ? "yes" : "NO",
                   os.matches_reference ? "yes" : "NO");
  return s;
}

std::vector<std::string> AnswerKeys() {
  return {"cycles",         "macs",       "utilization", "reads_in",
          "operand_writes", "sum_writes", "passes",      "writes_out"};
}

namespace {
double Answer(const std::string& key, uint64_t cycles, uint64_t useful, int dim,
              const Movement& m) {
  if (key == "cycles") return static_cast<double>(cycles);
  if (key == "macs") return static_cast<double>(useful);
  if (key == "utilization") return Utilization(useful, cycles, dim);
  if (key == "reads_in") return static_cast<double>(m.reads_in);
  if (key == "operand_writes") return static_cast<double>(m.operand_writes);
  if (key == "sum_writes") return static_cast<double>(m.sum_writes);
  if (key == "passes") return static_cast<double>(m.passes);
  if (key == "writes_out") return static_cast<double>(m.writes_out);
  throw std::invalid_argument("no answer named " + key);
}
}  // namespace

double AnswerValue(const TeachRun& run, const std::string& key) {
  return Answer(key, run.counters.cycles, static_cast<uint64_t>(run.plan.UsefulMacs()), run.dim,
                run.moved);
}

double AnswerValue(const OsTeachRun& run, const std::string& key) {
  return Answer(key, run.counters.cycles,
                static_cast<uint64_t>(run.a.rows * run.a.cols * run.b.cols), run.dim, run.moved);
}

}  // namespace tpu::teach
