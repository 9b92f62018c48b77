// `tpusim teach`: a systolic matrix multiply on the RTL, shown cycle by cycle in the
// terminal (colour on a terminal, plain text otherwise) or as a self-contained HTML page.
#include "host/cli/teach_command.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/gemm/gemm_plan.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/teach.h"

namespace tpu::cli {
namespace {

constexpr uint64_t kMaxCycles = 2000;  // a lesson, not a benchmark

struct TeachOptions {
  int array = 4;
  std::optional<int64_t> m, k, n;
  std::string a_path, b_path, html_path;
  uint64_t seed = 1;
  bool step = false;
};

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

void RunTeach(const TeachOptions& o) {
  if (o.array < 2 || o.array > 256) {
    throw UsageError(fmt::format("--array {} is out of range; use 2 to 8 for teaching", o.array));
  }
  Matrix<int8_t> a, b;
  if (!gemm::ReadOperandFiles(o.a_path, o.b_path, o.m || o.k || o.n, &a, &b)) {
    for (const auto& [name, v] : {std::pair{"--m", o.m}, {"--k", o.k}, {"--n", o.n}}) {
      if (v && *v < 1) throw UsageError(fmt::format("{} {} must be at least 1", name, *v));
    }
    // Small, readable numbers: the products stay easy to check by hand.
    const int64_t m = o.m.value_or(3), k = o.k.value_or(2), n = o.n.value_or(3);
    a = gemm::RandomInt8(m, k, o.seed);
    b = gemm::RandomInt8(k, n, o.seed + 1);
    for (auto* mat : {&a, &b}) {
      for (auto& v : mat->data) v = static_cast<int8_t>(v % 10);
    }
  }
  const gemm::GemmPlan plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, o.array, 1024);
  const uint64_t cycles = gemm::PredictCycles(plan).total;
  if (cycles > kMaxCycles) {
    throw UsageError(
        fmt::format("this product takes {} cycles on a {} x {} array; teach shows "
                    "at most {}: use smaller --m/--k/--n (tpusim gemm runs any size)",
                    cycles, o.array, o.array, kMaxCycles));
  }
  const int columns = TerminalColumns();
  const int needed = teach::TeachFrameWidth(o.array);
  if (o.html_path.empty() && columns > 0 && columns < needed) {
    throw UsageError(
        fmt::format("a {} x {} array needs {} terminal columns and this terminal has "
                    "{}: widen it, use a smaller --array, or write --html FILE",
                    o.array, o.array, needed, columns));
  }
  if (!o.html_path.empty()) CheckWritable(o.html_path);

  const teach::TeachRun run = teach::RecordTeachRun(a, b, o.array);
  if (!o.html_path.empty()) {
    WriteFileAtomically(o.html_path, teach::TeachHtml(run));
    std::cout << fmt::format("wrote {}: {} cycles of a {} x {} array; open it in a browser\n",
                             o.html_path, run.cycles.size(), o.array, o.array);
    return;
  }
  const bool colour = UseColour();
  std::cout << teach::FormatTeachIntro(run, colour);
  bool waiting = o.step;
  for (size_t i = 0; i < run.cycles.size(); ++i) {
    std::cout << teach::FormatTeachCycle(run, i, colour) << std::flush;
    if (waiting && i + 1 < run.cycles.size()) {
      std::cout << "[Enter: next cycle, q then Enter: to the end] " << std::flush;
      std::string line;
      if (!std::getline(std::cin, line) || line == "q") waiting = false;
    }
  }
  std::cout << teach::FormatTeachSummary(run, colour);
  if (!run.matches_reference) throw RuntimeError("the RTL result differs from Eigen");
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

The lesson that goes with it: docs/teaching.md.)");
  cmd->add_option("--array", o->array, "array size N (teaching builds: 2, 3, 4, 6, 8)")
      ->capture_default_str();
  cmd->add_option("--m", o->m, "rows of A (default 3)");
  cmd->add_option("--k", o->k, "columns of A = rows of B (default 2)");
  cmd->add_option("--n", o->n, "columns of B (default 3)");
  cmd->add_option("--a", o->a_path, "A from a .npy file (int8, M x K)");
  cmd->add_option("--b", o->b_path, "B from a .npy file (int8, K x N)");
  cmd->add_option("--seed", o->seed, "seed of the random operands")->capture_default_str();
  cmd->add_flag("--step", o->step, "wait for Enter after each cycle");
  cmd->add_option("--html", o->html_path, "write a self-contained HTML player instead");
  cmd->callback([o] { RunTeach(*o); });
}

}  // namespace tpu::cli
