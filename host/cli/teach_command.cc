// `tpusim teach`: a systolic matrix multiply on the RTL, shown cycle by cycle in the
// terminal (colour on a terminal, plain text otherwise) or as a self-contained HTML page.
#include "host/cli/teach_command.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "arith/bf16.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/chip_lesson.h"
#include "host/teach/teach.h"

namespace tpu::cli {
namespace {

struct TeachOptions {
  int array = 4;
  std::optional<int64_t> m, k, n;
  std::string a_path, b_path, html_path;
  std::string dataflow = "ws";  // a dataflow's name, or "both"
  std::string dtype = "int8";   // the operands' format: int8 or bf16
  std::vector<std::string> answers;
  uint64_t seed = 1;
  bool step = false;
  std::string chip;        // a Cloud TPU core lesson (teach/chip_lesson.h): transpose, vector
  std::string op = "exp";  // its vector operation
};

// The dataflows an option names: one (teach::DataflowName), or "both".
struct Dataflows {
  bool ws = false, os = false;
  bool Both() const { return ws && os; }
  bool Has(teach::Dataflow d) const { return d == teach::Dataflow::kWeightStationary ? ws : os; }
  // The dataflow when only one is named.
  teach::Dataflow One() const {
    return ws ? teach::Dataflow::kWeightStationary : teach::Dataflow::kOutputStationary;
  }
};
Dataflows ParseDataflows(const std::string& name) {
  Dataflows d;
  d.ws = name == "both" || name == teach::DataflowName(teach::Dataflow::kWeightStationary);
  d.os = name == "both" || name == teach::DataflowName(teach::Dataflow::kOutputStationary);
  return d;
}

struct Answer {
  teach::Dataflow dataflow = teach::Dataflow::kWeightStationary;
  std::string key;
  double value = 0;
  std::string text;  // as given
};

// --answer KEY=VALUE (one dataflow) or ws.KEY=VALUE / os.KEY=VALUE (--dataflow both).
Answer ParseAnswer(const std::string& text, const Dataflows& dataflows) {
  const auto keys = teach::AnswerKeys();
  std::string known;
  for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw UsageError(fmt::format("--answer '{}' is not KEY=VALUE (keys: {})", text, known));
  }
  Answer a;
  a.text = text;
  a.key = text.substr(0, eq);
  bool named = false;
  for (teach::Dataflow d : teach::kDataflows) {
    const std::string prefix = std::string(teach::DataflowName(d)) + ".";
    if (a.key.rfind(prefix, 0) == 0) {
      a.dataflow = d;
      a.key = a.key.substr(prefix.size());
      named = true;
    }
  }
  if (!named && dataflows.Both()) {
    throw UsageError(
        fmt::format("--answer '{}': with --dataflow both say which dataflow, as ws.{} or os.{}",
                    text, a.key, a.key));
  }
  if (!named) a.dataflow = dataflows.One();
  if (!dataflows.Has(a.dataflow)) {
    throw UsageError(fmt::format("--answer '{}' is about {}, but --dataflow is {}", text,
                                 teach::DataflowName(a.dataflow),
                                 teach::DataflowName(dataflows.One())));
  }
  if (std::find(keys.begin(), keys.end(), a.key) == keys.end()) {
    throw UsageError(
        fmt::format("--answer '{}': no number named '{}' (keys: {})", text, a.key, known));
  }
  const std::string v = text.substr(eq + 1);
  size_t used = 0;
  try {
    a.value = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) {
    throw UsageError(fmt::format("--answer '{}': '{}' is not a number", text, v));
  }
  return a;
}

// The terminal's width, or 0 when stdout is not a terminal.
int TerminalColumns() {
  if (!::isatty(STDOUT_FILENO)) return 0;
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) return std::atoi(c);
  return 80;
}

bool UseColour() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr &&
         !(term && std::string(term) == "dumb");
}

// The recording of a dataflow among those run.
const teach::Recording& Of(const std::vector<std::unique_ptr<teach::Recording>>& runs,
                           teach::Dataflow d) {
  for (const auto& r : runs) {
    if (r->dataflow == d) return *r;
  }
  throw std::logic_error("no recording of that dataflow");
}

// Whether every recording's C equals Eigen's.
bool AllExact(const std::vector<std::unique_ptr<teach::Recording>>& runs) {
  return std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r->matches_reference; });
}

// Says whether each answer is right; throws when one is not.
void CheckAnswers(const std::vector<Answer>& answers,
                  const std::vector<std::unique_ptr<teach::Recording>>& runs) {
  int wrong = 0;
  for (const Answer& ans : answers) {
    const double truth = teach::AnswerValue(Of(runs, ans.dataflow), ans.key);
    // Utilization is a percentage given to one decimal; the counts are exact.
    const bool right =
        ans.key == "utilization" ? std::abs(truth - ans.value) < 0.05 + 1e-9 : truth == ans.value;
    wrong += !right;
    std::cout << fmt::format("{}.{} = {}: {}\n", teach::DataflowName(ans.dataflow), ans.key,
                             ans.text.substr(ans.text.find('=') + 1),
                             right ? "right" : "not right, try again");
  }
  if (!AllExact(runs)) throw RuntimeError("the RTL result differs from Eigen");
  if (wrong) {
    throw RuntimeError(
        fmt::format("{} of {} answers are not right (tpusim teach without "
                    "--answer shows the run)",
                    wrong, answers.size()));
  }
}

void WriteHtml(const std::string& path, const std::vector<std::unique_ptr<teach::Recording>>& runs,
               int array) {
  std::vector<const teach::Recording*> shown;
  std::string what;
  for (const auto& r : runs) {
    shown.push_back(r.get());
    what += fmt::format("{}{}", what.empty() ? "" : " and ", r->Frames());
    if (runs.size() > 1) what += fmt::format(" ({})", teach::DataflowTitle(r->dataflow));
  }
  WriteFileAtomically(path, teach::TeachHtml(shown));
  std::cout << fmt::format("wrote {}: {} cycles of a {} x {} array; open it in a browser\n", path,
                           what, array, array);
}

// The introduction, every cycle (waiting for Enter with --step), the summary.
void ShowFrames(const teach::Recording& run, bool step) {
  const bool colour = UseColour();
  std::cout << run.Intro(colour);
  bool waiting = step;
  for (size_t i = 0; i < run.Frames(); ++i) {
    std::cout << run.Frame(i, colour) << std::flush;
    if (waiting && i + 1 < run.Frames()) {
      std::cout << "[Enter: next cycle, q then Enter: to the end] " << std::flush;
      std::string line;
      if (!std::getline(std::cin, line) || line == "q") waiting = false;
    }
  }
  std::cout << teach::FormatSummary(run, colour);
}

// The operands: from --a/--b, or random small, readable numbers whose products stay easy to
// check by hand: int8 -9..9, or bfloat16 halves -4.5..4.5 (T: int8_t or uint16_t).
template <class T>
void Operands(const TeachOptions& o, Matrix<T>* a, Matrix<T>* b) {
  if (ReadOperandFiles(o.a_path, o.b_path, o.m || o.k || o.n, a, b)) return;
  for (const auto& [name, v] : {std::pair{"--m", o.m}, {"--k", o.k}, {"--n", o.n}}) {
    if (v && *v < 1) throw UsageError(fmt::format("{} {} must be at least 1", name, *v));
  }
  const int64_t m = o.m.value_or(3), k = o.k.value_or(2), n = o.n.value_or(3);
  const Matrix<int8_t> ra = gemm::RandomInt8(m, k, o.seed), rb = gemm::RandomInt8(k, n, o.seed + 1);
  for (const auto& [from, to] : {std::pair{&ra, a}, {&rb, b}}) {
    *to = {from->rows, from->cols, std::vector<T>(from->data.size())};
    for (size_t i = 0; i < from->data.size(); ++i) {
      const int v = from->data[i] % 10;
      if constexpr (sizeof(T) == 1) {
        to->data[i] = static_cast<T>(v);
      } else {
        to->data[i] = arith::Bf16OfFp32(arith::BitsOfFloat(static_cast<float>(v) / 2));
      }
    }
  }
}

// The lesson's recordings, one per dataflow asked for.
template <class T>
std::vector<std::unique_ptr<teach::Recording>> RecordAll(const TeachOptions& o,
                                                         const Dataflows& dataflows,
                                                         const Matrix<T>& a, const Matrix<T>& b) {
  std::vector<std::unique_ptr<teach::Recording>> runs;
  for (teach::Dataflow d : teach::kDataflows) {
    if (dataflows.Has(d)) runs.push_back(teach::Record(d, a, b, o.array));
  }
  return runs;
}

// --chip: one instruction of the Cloud TPU core on the whole chip's RTL, frame by frame.
void RunChipLesson(const TeachOptions& o, const CLI::App& cmd) {
  for (const char* other : {"--m", "--k", "--n", "--a", "--b", "--html", "--answer", "--dataflow",
                            "--dtype", "--array"}) {
    if (cmd.count(other) > 0)
      throw UsageError(
          fmt::format("--chip shows one instruction on the 4 x 4 bf16 chip; {} is "
                      "for the matrix-multiply lesson (leave it out)",
                      other));
  }
  if (cmd.count("--op") > 0 && o.chip != "vector")
    throw UsageError("--op names the operation of --chip vector");
  char dir[] = "/tmp/tpusim-teach-XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw RuntimeError("cannot make a folder in /tmp for the trace");
  const std::string work = dir;
  teach::ChipLessonRun run;
  try {
    run = teach::RecordChipLesson(
        o.chip == "transpose" ? teach::ChipLesson::kTranspose : teach::ChipLesson::kVector, o.op,
        o.seed, work);
  } catch (...) {
    std::filesystem::remove_all(work);
    throw;
  }
  std::filesystem::remove_all(work);
  if (!o.step) {
    std::cout << teach::FormatChipLesson(run);
    return;
  }
  std::cout << teach::ChipLessonIntro(run);
  bool waiting = true;
  for (size_t i = 0; i < run.frames.size(); ++i) {
    std::cout << teach::ChipLessonFrame(run, i) << std::flush;
    if (waiting && i + 1 < run.frames.size()) {
      std::cout << "[Enter: next cycle, q then Enter: to the end] " << std::flush;
      std::string line;
      if (!std::getline(std::cin, line) || line == "q") waiting = false;
    }
  }
  std::cout << teach::ChipLessonEnd(run);
}

void RunTeach(const TeachOptions& o) {
  if (o.array < 2 || o.array > 256) {
    throw UsageError(fmt::format("--array {} is out of range; use 2 to 8 for teaching", o.array));
  }
  const bool bf16 = o.dtype == "bf16";
  if (bf16 && o.dataflow != "ws") {
    throw UsageError(
        "--dtype bf16 shows the chip's weight-stationary array; the output-stationary "
        "teaching array is int8 only (use --dataflow ws)");
  }
  Matrix<int8_t> a;
  Matrix<int8_t> b;
  Matrix<uint16_t> a16;
  Matrix<uint16_t> b16;
  if (bf16) {
    Operands(o, &a16, &b16);
  } else {
    Operands(o, &a, &b);
  }
  const int64_t rows = bf16 ? a16.rows : a.rows, inner = bf16 ? a16.cols : a.cols,
                cols = bf16 ? b16.cols : b.cols;
  const Dataflows dataflows = ParseDataflows(o.dataflow);
  std::vector<Answer> answers;
  for (const auto& text : o.answers) answers.push_back(ParseAnswer(text, dataflows));
  if (o.step && dataflows.Both()) {
    throw UsageError(
        "--step shows one dataflow at a time; use --dataflow ws or os, or --html "
        "for both side by side");
  }
  uint64_t cycles = 0;
  for (teach::Dataflow d : teach::kDataflows) {
    if (dataflows.Has(d)) {
      cycles = std::max(cycles, teach::PredictTeachCycles(d, rows, inner, cols, o.array));
    }
  }
  if (cycles > teach::kMaxTeachCycles) {
    throw UsageError(
        fmt::format("this product takes {} cycles on a {} x {} array; teach shows "
                    "at most {}: use smaller --m/--k/--n (tpusim gemm runs any size)",
                    cycles, o.array, o.array, teach::kMaxTeachCycles));
  }
  const int columns = TerminalColumns();
  const int needed = teach::TeachFrameWidth(o.array);
  if (o.html_path.empty() && answers.empty() && !dataflows.Both() && columns > 0 &&
      columns < needed) {
    throw UsageError(
        fmt::format("a {} x {} array needs {} terminal columns and this terminal has "
                    "{}: widen it, use a smaller --array, or write --html FILE",
                    o.array, o.array, needed, columns));
  }
  if (!o.html_path.empty()) CheckWritable(o.html_path);

  const std::vector<std::unique_ptr<teach::Recording>> runs =
      bf16 ? RecordAll(o, dataflows, a16, b16) : RecordAll(o, dataflows, a, b);
  const bool exact = AllExact(runs);
  if (!answers.empty()) {
    CheckAnswers(answers, runs);
  } else if (!o.html_path.empty()) {
    WriteHtml(o.html_path, runs, o.array);
  } else if (runs.size() == 2) {
    std::cout << teach::FormatComparison(*runs[0], *runs[1], UseColour())
              << "(tpusim teach --dataflow ws|os shows either cycle by cycle; --html FILE shows "
                 "both side by side)\n";
  } else {
    ShowFrames(*runs[0], o.step);
  }
  if (!exact) throw RuntimeError("the RTL result differs from the reference");
}

}  // namespace

void AddTeachCommand(CLI::App& app) {
  auto o = std::make_shared<TeachOptions>();
  CLI::App* cmd = app.add_subcommand(
      "teach", "Show a systolic matrix multiply cycle by cycle, from the RTL's own signals.");
  cmd->footer(R"(
Runs C = A x B on a teaching build of the matrix unit (the same RTL, every signal readable)
and shows every cycle: each PE's stationary weight, the next tile's weight loading behind
it, the activation passing through, the partial sum, the skewed wavefront entering, the
weight-switch bit moving through the array, the results leaving; with the running cycle
count and MACs. Random operands are small (-9..9) so the sums can be checked by hand.

Examples:
  tpusim teach                                  # 3 x 2 by 2 x 3 on a 4 x 4 array
  tpusim teach --m 2 --k 3 --n 2 --step         # press Enter for each cycle
  tpusim teach --array 2 --m 3 --k 4 --n 3      # K and N larger than the array: tiles
  tpusim teach --html lesson.html               # a page with play/pause/step controls

Two dataflows: --dataflow ws (the chip's: B stays in the PEs), os (C stays in the PEs; a
teaching array beside the chip, rtl/tpu_os_top.sv) or both (the two compared: cycles, MACs,
utilization and the data each moves, counted from the RTL; with --html, side by side).
  tpusim teach --dataflow both --array 4 --m 3 --k 2 --n 3 --html both.html
  tpusim teach --dataflow os --m 3 --k 2 --n 3 --answer cycles=12   # check an exercise

In bfloat16 (--dtype bf16: the Cloud TPU's matrix unit, docs/bf16.md) each PE multiplies two
bfloat16 values exactly and adds into a float32 partial sum; random operands are halves
(-4.5..4.5), --a/--b take float32 .npy files (rounded to bfloat16). Weight-stationary only.
  tpusim teach --dtype bf16 --m 3 --k 5 --n 3 --array 4

The Cloud TPU core (--chip, on the whole chip's RTL: teach-4 as a bf16 chip) follows one
instruction cycle by cycle, read back from the waveform of its run:
  tpusim teach --chip transpose          # load_weights transpose: K's rows in, Kᵀ's out
  tpusim teach --chip vector --op exp    # a vector operation: read, compute, delay line, write

The lesson that goes with it, with exercises: docs/teaching.md.)");
  cmd->add_option("--array", o->array, "array size N (teaching builds: 2, 3, 4, 6, 8)")
      ->capture_default_str();
  cmd->add_option("--m", o->m, "rows of A (default 3)");
  cmd->add_option("--k", o->k, "columns of A = rows of B (default 2)");
  cmd->add_option("--n", o->n, "columns of B (default 3)");
  cmd->add_option("--a", o->a_path,
                  "A from a .npy file (int8, or float32 with --dtype bf16; M x K)");
  cmd->add_option("--b", o->b_path,
                  "B from a .npy file (int8, or float32 with --dtype bf16; K x N)");
  cmd->add_option("--dtype", o->dtype,
                  "the operands' format: int8, or bf16 (bfloat16 with float32 partial sums; "
                  "weight-stationary)")
      ->check(CLI::IsMember({"int8", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the random operands")->capture_default_str();
  cmd->add_flag("--step", o->step, "wait for Enter after each cycle");
  cmd->add_option("--html", o->html_path, "write a self-contained HTML player instead");
  cmd->add_option("--dataflow", o->dataflow,
                  "ws (weight-stationary), os (output-stationary) or both side by side")
      ->check(CLI::IsMember({"ws", "os", "both"}))
      ->capture_default_str();
  cmd->add_option("--answer", o->answers,
                  "check an exercise's answer instead of showing the run: KEY=VALUE, KEY one of "
                  "cycles, macs, utilization, reads_in, operand_writes, sum_writes, passes, "
                  "writes_out (ws.KEY / os.KEY with --dataflow both); repeatable");
  cmd->add_option("--chip", o->chip,
                  "instead, follow one instruction of the Cloud TPU core on the whole chip: "
                  "transpose (load_weights transpose) or vector (a vector operation)")
      ->check(CLI::IsMember({"transpose", "vector"}));
  std::string ops;
  for (const std::string& name : teach::LessonOps()) ops += (ops.empty() ? "" : ", ") + name;
  cmd->add_option("--op", o->op, "the operation of --chip vector: " + ops)->capture_default_str();
  cmd->callback([o, cmd] { o->chip.empty() ? RunTeach(*o) : RunChipLesson(*o, *cmd); });
}

}  // namespace tpu::cli
