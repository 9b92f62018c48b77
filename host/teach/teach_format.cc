// What every dataflow's recording shares (see teach.h, teach_text.h): C as it fills in,
// the frame's grid, the summary, the comparison, the answers and the data.
#include <fmt/format.h>

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "arith/bf16.h"
#include "host/common/text.h"
#include "host/teach/teach.h"
#include "host/teach/teach_text.h"

namespace tpu::teach {

namespace {

bool Bf16(const Values& v) { return v.dtype == hw::Dtype::kBf16; }

}  // namespace

std::string Values::Operand(int32_t raw) const {
  if (!Bf16(*this)) return fmt::format("{}", raw);
  // As a float32: the shortest decimal that reads back as that float, exact for the values
  // a lesson uses (3.625, not the 3.62 that would also round to it in bfloat16).
  return fmt::format("{}", arith::FloatOfBits(arith::Fp32OfBf16(static_cast<uint16_t>(raw))));
}

std::string Values::Sum(int32_t raw) const {
  if (!Bf16(*this)) return fmt::format("{}", raw);
  return fmt::format("{}", arith::FloatOfBits(static_cast<uint32_t>(raw)));  // shortest, exact
}

nlohmann::json Values::OperandJson(int32_t raw) const {
  return Bf16(*this) ? nlohmann::json(std::stod(Operand(raw))) : nlohmann::json(raw);
}

nlohmann::json Values::SumJson(int32_t raw) const {
  return Bf16(*this) ? nlohmann::json(std::stod(Sum(raw))) : nlohmann::json(raw);
}

CProgress::CProgress(int64_t m, int64_t n, Values v)
    : value(static_cast<size_t>(m * n), 0), seen(static_cast<size_t>(m * n), 0), values(v) {}

void CProgress::Add(size_t at, int32_t v, bool final) {
  if (Bf16(values)) {
    value[at] = seen[at] ? static_cast<int32_t>(arith::Fp32Add(static_cast<uint32_t>(value[at]),
                                                               static_cast<uint32_t>(v)))
                         : v;
  } else {
    value[at] = static_cast<int32_t>(static_cast<uint32_t>(value[at]) + static_cast<uint32_t>(v));
  }
  seen[at] = final ? 2 : 1;
}

nlohmann::json CProgress::Json() const {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < value.size(); ++i) {
    out.push_back(seen[i] ? nlohmann::json{values.SumJson(value[i]), seen[i] == 2 ? 1 : 0}
                          : nlohmann::json(nullptr));
  }
  return out;
}

namespace text {

std::string MatrixText(const std::string& name, int64_t rows, int64_t cols,
                       const std::function<std::string(int64_t, int64_t)>& at) {
  std::string s = fmt::format("  {} ({} x {}):\n", name, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    s += "    ";
    for (int64_t c = 0; c < cols; ++c) s += fmt::format("{:>7}", at(r, c));
    s += "\n";
  }
  return s;
}

std::string Border(int dim) {
  std::string s = Margin();
  for (int c = 0; c < dim; ++c) s += "+" + std::string(kCell - 1, '-');
  return s + "+\n";
}

std::string Margin() { return std::string(kMargin - 1, ' '); }

std::string ColumnHeads(int dim, const std::function<std::string(int)>& entering, const Paint& p,
                        const char* code) {
  std::string head = Margin(), top = Margin();
  for (int c = 0; c < dim; ++c) {
    head += fmt::format(" {:<{}}", fmt::format("col {}", c), kCell - 1);
    const std::string e = entering(c);
    top += " " +
           (e.empty() ? std::string(kCell - 1, ' ') : p(fmt::format("{:<{}}", e, kCell - 1), code));
  }
  return head + "\n" + top + "\n" + Border(dim);
}

std::string Cell(const std::string& painted, size_t width) {
  const size_t room = kCell - 1;
  return "|" + painted + std::string(width < room ? room - width : 0, ' ');
}

std::string LinesOfCells(const std::vector<std::string>& lines, int dim) {
  std::string s;
  for (const std::string& l : lines) s += l + "|\n";
  return s + Border(dim);
}

std::string FrameTitle(uint64_t cycle, size_t frames, const std::string& counts, const Paint& p) {
  return p(fmt::format("cycle {} of {}", cycle + 1, frames), kBold) + counts + "\n";
}

}  // namespace text

namespace {

using namespace text;  // NOLINT(google-build-using-namespace): the frame vocabulary

// The teaching models' accumulators hold at least this many rows: enough to predict a
// lesson's length before building its model.
constexpr int kTeachAccDepth = 1024;

double Utilization(int64_t useful, uint64_t cycles, int dim) {
  return cycles ? 100.0 * static_cast<double>(useful) / (static_cast<double>(cycles) * dim * dim)
                : 0.0;
}

std::string MovementText(const Movement& m) {
  return fmt::format(
      "  data moved: {} values read in, {} operand register writes, {} partial-sum writes,\n"
      "              {} passed between PEs, {} results written out\n",
      m.reads_in, m.operand_writes, m.sum_writes, m.passes, m.writes_out);
}

// C as the RTL computed it, and whether it equals the reference's.
std::string ResultText(const Recording& run, const Paint& p) {
  const bool bf16 = run.values.dtype == hw::Dtype::kBf16;
  const std::string ref =
      bf16 ? "the CPU bf16 reference (arith::Bf16Gemm, docs/bf16.md)" : "the Eigen int32 reference";
  return MatrixText("C = A x B from the RTL", run.c.rows, run.c.cols,
                    [&](int64_t r, int64_t c) { return run.values.Sum(run.c.at(r, c)); }) +
         (run.matches_reference ? "  bit-exact with " + ref + "\n"
                                : p("  DIFFERS from " + ref + "\n", "1;31"));
}

nlohmann::json MatJson(const Matrix<int32_t>& m,
                       const std::function<nlohmann::json(int32_t)>& value) {
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r = 0; r < m.rows; ++r) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t c = 0; c < m.cols; ++c) row.push_back(value(m.at(r, c)));
    rows.push_back(row);
  }
  return rows;
}

nlohmann::json MovementJson(const Movement& m) {
  return {{"reads_in", m.reads_in},
          {"operand_writes", m.operand_writes},
          {"sum_writes", m.sum_writes},
          {"passes", m.passes},
          {"writes_out", m.writes_out}};
}

}  // namespace

std::unique_ptr<Recording> Record(Dataflow d, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                                  int dim) {
  if (d == Dataflow::kWeightStationary) {
    return std::make_unique<WsRecording>(RecordWeightStationary(a, b, dim));
  }
  return std::make_unique<OsRecording>(RecordOutputStationary(a, b, dim));
}

std::unique_ptr<Recording> Record(Dataflow d, const Matrix<uint16_t>& a, const Matrix<uint16_t>& b,
                                  int dim) {
  if (d != Dataflow::kWeightStationary) {
    throw UsageError(
        "the output-stationary teaching array is int8 only; --dtype bf16 shows the chip's "
        "weight-stationary array (--dataflow ws)");
  }
  return std::make_unique<WsRecording>(RecordWeightStationary(a, b, dim));
}

uint64_t PredictTeachCycles(Dataflow d, int64_t m, int64_t k, int64_t n, int dim) {
  if (d == Dataflow::kWeightStationary) {
    return gemm::PredictCycles(gemm::PlanGemm({m, k, n}, dim, kTeachAccDepth)).total;
  }
  return gemm::PredictOsCycles(m, k, n, dim).total;
}

int TeachFrameWidth(int dim) { return kMargin - 1 + dim * kCell + 1; }

std::string FormatSummary(const Recording& run, bool color) {
  const Paint p{color};
  std::string s = p("Summary\n", kBold);
  const SummaryParts own = run.Summary();
  s += fmt::format("  cycles {} (counted by the RTL; {})\n", run.rtl_cycles, own.formula);
  s += "  " + own.phases + "\n";
  s += fmt::format("  MACs: {} useful (M x K x N), {}; utilization {:.1f} %\n", run.UsefulMacs(),
                   own.macs, Utilization(run.UsefulMacs(), run.rtl_cycles, run.dim));
  s += MovementText(run.moved);
  return s + ResultText(run, p);
}

std::string FormatComparison(const Recording& left, const Recording& right, bool color) {
  const Paint p{color};
  std::string first = DataflowTitle(left.dataflow);
  first[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(first[0])));
  std::string s =
      p(fmt::format("{} and {}, the same A ({} x {}) and B ({} x {}) on {} x {} arrays\n", first,
                    DataflowTitle(right.dataflow), left.a.rows, left.a.cols, left.b.rows,
                    left.b.cols, left.dim, left.dim),
        kBold);
  s += fmt::format("  {:<34}{:>18}{:>18}\n", "", DataflowTitle(left.dataflow),
                   DataflowTitle(right.dataflow));
  static const std::map<std::string, std::string> kLabel = {
      {"cycles", "cycles"},
      {"macs", "useful MACs"},
      {"reads_in", "values read in"},
      {"operand_writes", "operand register writes"},
      {"sum_writes", "partial-sum/accumulator writes"},
      {"passes", "values passed between PEs"},
      {"writes_out", "results written out"}};
  for (const std::string& key : AnswerKeys()) {
    const double l = AnswerValue(left, key), r = AnswerValue(right, key);
    if (key == "utilization") {
      s += fmt::format("  {:<34}{:>16.1f} %{:>16.1f} %\n", "utilization", l, r);
    } else {
      s += fmt::format("  {:<34}{:>18}{:>18}\n", kLabel.at(key), Grouped(static_cast<int64_t>(l)),
                       Grouped(static_cast<int64_t>(r)));
    }
  }
  s += fmt::format("  C bit-exact with Eigen: {} and {}\n", left.matches_reference ? "yes" : "NO",
                   right.matches_reference ? "yes" : "NO");
  return s;
}

std::vector<std::string> AnswerKeys() {
  return {"cycles",         "macs",       "utilization", "reads_in",
          "operand_writes", "sum_writes", "passes",      "writes_out"};
}

double AnswerValue(const Recording& run, const std::string& key) {
  const Movement& m = run.moved;
  if (key == "cycles") return static_cast<double>(run.rtl_cycles);
  if (key == "macs") return static_cast<double>(run.UsefulMacs());
  if (key == "utilization") return Utilization(run.UsefulMacs(), run.rtl_cycles, run.dim);
  if (key == "reads_in") return static_cast<double>(m.reads_in);
  if (key == "operand_writes") return static_cast<double>(m.operand_writes);
  if (key == "sum_writes") return static_cast<double>(m.sum_writes);
  if (key == "passes") return static_cast<double>(m.passes);
  if (key == "writes_out") return static_cast<double>(m.writes_out);
  throw std::invalid_argument("no answer named " + key);
}

nlohmann::json TeachJson(const Recording& run) {
  const Values& v = run.values;
  auto op = [&](int32_t x) { return v.OperandJson(x); };
  auto sum = [&](int32_t x) { return v.SumJson(x); };
  return {{"dataflow", DataflowName(run.dataflow)},
          {"dtype", hw::kDtypeNames[static_cast<size_t>(v.dtype)]},
          {"dim", run.dim},
          {"m", run.a.rows},
          {"k", run.a.cols},
          {"n", run.b.cols},
          {"a", MatJson(run.a, op)},
          {"b", MatJson(run.b, op)},
          {"c", MatJson(run.c, sum)},
          {"bit_exact", run.matches_reference},
          {"cycles", run.rtl_cycles},
          {"formula_cycles", run.formula_cycles},
          {"macs", run.UsefulMacs()},
          {"utilization", Utilization(run.UsefulMacs(), run.rtl_cycles, run.dim)},
          {"moved", MovementJson(run.moved)},
          {"frames", run.FramesJson()}};
}

}  // namespace tpu::teach
