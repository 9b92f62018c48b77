// `tpusim sweep` and `tpusim plot`: design-space sweeps (host/sweep/, docs/sweeps.md).
#include "host/cli/sweep_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "host/common/errors.h"
#include "host/sweep/slurm.h"
#include "host/sweep/sweep_runner.h"
#include "host/sweep/sweep_spec.h"

namespace tpu::cli {
namespace {

struct SweepArgs {
  std::string spec;
  std::string out;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool fresh = false;
  bool status = false;
  bool no_plots = false;
  bool quiet = false;
  std::string shard;  // "I/K"
  bool slurm = false;
  sweep::SlurmOptions slurm_options;
};

// The executable that runs the points: this one.
std::string SelfPath() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeError("cannot find the tpusim executable (/proc/self/exe)");
  return p.string();
}

void PrintStatus(const sweep::SweepStatus& s, const std::string& dir) {
  std::cout << fmt::format("{} points: {} done, {} failed, {} to run\n", s.points, s.ok, s.failed,
                           s.missing);
  for (const std::string& f : s.failures) std::cout << "  failed: " << f << "\n";
  (void)dir;
}

void Sweep(const SweepArgs& a) {
  if (a.jobs < 1) throw UsageError("--jobs must be at least 1");
  sweep::SweepOptions o;
  o.dir = a.out;
  o.jobs = a.jobs;
  o.fresh = a.fresh;
  o.quiet = a.quiet;
  if (!a.shard.empty()) {
    const size_t slash = a.shard.find('/');
    try {
      o.shard = std::stoi(a.shard.substr(0, slash));
      o.shards = std::stoi(a.shard.substr(slash + 1));
    } catch (const std::exception&) {
      o.shards = 0;
    }
    if (slash == std::string::npos || o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
      throw UsageError("--shard '" + a.shard + "' must be I/K with 0 <= I < K, e.g. 0/4");
    }
  }
  const sweep::SweepSpec spec = sweep::LoadSweepSpec(a.spec);
  const std::vector<sweep::SweepPoint> points = sweep::ExpandPoints(spec);
  if (a.status) {
    // The status of the sweep in DIR, which must be this spec's.
    const sweep::SweepSpec saved = sweep::LoadSweepDir(a.out);
    if (saved.source != spec.source) {
      throw UsageError(fmt::format("'{}' holds a different sweep ('{}')", a.out, saved.name));
    }
    PrintStatus(sweep::ReadStatus(points, a.out), a.out);
    std::cout << sweep::SlurmJobStates(a.out);
    return;
  }
  sweep::PrepareSweepDir(spec, a.out, a.fresh);
  o.tpusim = SelfPath();
  if (a.slurm) {
    sweep::SlurmOptions so = a.slurm_options;
    so.cpus_per_task = a.jobs;
    const sweep::SweepStatus before = sweep::ReadStatus(points, a.out);
    const sweep::SlurmJobs jobs = sweep::SubmitSweep(o.tpusim, a.spec, a.out, so);
    std::cout << fmt::format(
        "submitted the {} points left of {} as Slurm job array {} ({} tasks) and the plot job "
        "{}\nprogress: tpusim sweep {} --out {} --status\n",
        before.missing + before.failed, points.size(), jobs.array_job, so.array_size,
        jobs.finish_job, a.spec, a.out);
    return;
  }
  const sweep::SweepStatus s = sweep::RunSweep(spec, points, o);
  if (o.shards > 1) {
    // A shard of a larger run: the table is built when every shard is done (tpusim plot).
    if (!a.quiet) PrintStatus(s, a.out);
  } else {
    const sweep::SweepStatus all = sweep::WriteResults(spec, points, a.out);
    if (!a.no_plots) sweep::DrawPlots(a.out);
    if (!a.quiet) {
      PrintStatus(all, a.out);
      std::cout << fmt::format("results: {0}/results.csv, {0}/results.json{1}\n", a.out,
                               a.no_plots ? "" : fmt::format(", plots in {}/plots/", a.out));
    }
  }
  if (s.failed > 0) {
    throw RuntimeError(
        fmt::format("{} of {} points failed (listed above; their errors are in "
                    "the table)",
                    s.failed, s.points));
  }
}

}  // namespace

void AddSweepCommand(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Run a grid of chip configs and networks, in parallel, resumably, or on Slurm.");
  cmd->footer(R"(
SPEC (JSON) names a base run and the axes to vary; every combination is one point, run as
its own `tpusim run` (fast engine unless the spec says otherwise), or with "command":
"train" as its own `tpusim train --config` (one epoch of `images` images on the chip: cycles
a step, its bound, energy, loss and accuracy). Each finished point is
written to DIR/points/ at once, so an interrupted sweep resumes where it stopped when the
same command is run again (--fresh starts over). DIR/results.csv and results.json hold
the table, DIR/plots/ the figures (cycles and utilization per layer, energy by
component, latency/energy Pareto front, roofline). docs/sweeps.md describes SPEC.

Examples:
  tpusim sweep examples/sweeps/lenet-array.json --out sweeps/array
  tpusim sweep examples/sweeps/lenet-memory.json --out sweeps/mem --jobs 8
  tpusim sweep examples/sweeps/train-batch-array.json --out sweeps/train
  tpusim sweep SPEC --out /shared/sweep --slurm --partition batch --array-size 32
  tpusim sweep SPEC --out /shared/sweep --status)");
  cmd->add_option("SPEC", a->spec, "the sweep spec (JSON)")->required();
  cmd->add_option("--out,-o", a->out, "the sweep's folder (created; reused to resume)")->required();
  cmd->add_option("--jobs,-j", a->jobs, "points run at once (with --slurm: per task)")
      ->capture_default_str();
  cmd->add_flag("--fresh", a->fresh, "forget the points finished earlier in this folder");
  cmd->add_flag("--status", a->status,
                "show how many points are done, failed and left; run nothing");
  cmd->add_flag("--no-plots", a->no_plots, "write the table but draw no plots");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress and no summary");
  cmd->add_option("--shard", a->shard,
                  "run only the points I, I+K, I+2K, ... (I/K; what each Slurm task runs)");
  cmd->add_flag("--slurm", a->slurm, "submit the sweep to Slurm as a job array instead");
  cmd->add_option("--partition", a->slurm_options.partition, "Slurm partition (with --slurm)");
  cmd->add_option("--array-size", a->slurm_options.array_size,
                  "Slurm tasks, each a shard of the points (with --slurm)")
      ->capture_default_str();
  cmd->add_option("--time", a->slurm_options.time_limit,
                  "Slurm time limit per task, e.g. 1:00:00 (with --slurm)");
  cmd->callback([a] { Sweep(*a); });

  auto dir = std::make_shared<std::string>();
  CLI::App* plot = app.add_subcommand(
      "plot", "Rebuild a sweep's table from its finished points and redraw its plots.");
  plot->footer(R"(
Reads DIR/points/, writes DIR/results.csv and results.json, and draws DIR/plots/ (SVG and
PNG, with matplotlib). Points still missing or failed are listed.

Example:
  tpusim plot sweeps/array)");
  plot->add_option("DIR", *dir, "a sweep's folder (tpusim sweep --out)")->required();
  plot->callback([dir] {
    const sweep::SweepSpec spec = sweep::LoadSweepDir(*dir);
    const std::vector<sweep::SweepPoint> points = sweep::ExpandPoints(spec);
    const sweep::SweepStatus s = sweep::WriteResults(spec, points, *dir);
    sweep::DrawPlots(*dir);
    PrintStatus(s, *dir);
    std::cout << fmt::format("results: {0}/results.csv, {0}/results.json, plots in {0}/plots/\n",
                             *dir);
  });
}

}  // namespace tpu::cli
