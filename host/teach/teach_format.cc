// Terminal frames, data and the HTML page of `tpusim teach` (see teach.h).
#include <fmt/format.h>

#include <functional>
#include <nlohmann/json.hpp>

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
  s += MatrixText("C = A x B from the RTL", run.c.rows, run.c.cols,
                  [&](int64_t r, int64_t c) { return run.c.at(r, c); });
  s += run.matches_reference ? "  bit-exact with the Eigen int32 reference\n"
                             : p("  DIFFERS from the Eigen reference\n", "1;31");
  return s;
}

nlohmann::json TeachJson(const TeachRun& run) {
  using nlohmann::json;
  auto mat = [](const auto& m) {
    json rows = json::array();
    for (int64_t r = 0; r < m.rows; ++r) {
      json row = json::array();
      for (int64_t c = 0; c < m.cols; ++c) row.push_back(static_cast<int64_t>(m.at(r, c)));
      rows.push_back(row);
    }
    return rows;
  };
  json frames = json::array();
  for (const TeachCycle& t : run.cycles) {
    const sim::ArrayState& st = t.state;
    json pe = json::array();
    for (const sim::PeState& e : st.pe)
      pe.push_back({e.weight, e.shadow, e.act, e.psum, e.sw ? 1 : 0});
    json in = json::array(), sw = json::array(), wr = json::array();
    for (size_t r = 0; r < st.act_in.size(); ++r) {
      in.push_back(st.act_in[r]);
      sw.push_back(st.switch_in[r] ? 1 : 0);
      wr.push_back(st.w_write[r] ? json{st.w_row[r], st.w_data[r]} : json(nullptr));
    }
    frames.push_back({{"cycle", t.cycle + 1},
                      {"rows_in", t.rows_in},
                      {"tiles", t.tiles},
                      {"results_out", t.results_out},
                      {"pe", pe},
                      {"act_in", in},
                      {"switch_in", sw},
                      {"w_write", wr},
                      {"out", st.out_valid ? json(st.out) : json(nullptr)}});
  }
  return {{"dim", run.dim},
          {"m", run.plan.shape.m},
          {"k", run.plan.shape.k},
          {"n", run.plan.shape.n},
          {"a", mat(run.a)},
          {"b", mat(run.b)},
          {"c", mat(run.c)},
          {"bit_exact", run.matches_reference},
          {"cycles", run.counters.cycles},
          {"formula_cycles", run.predicted.total},
          {"frames", frames}};
}

}  // namespace tpu::teach
