// Submitting a sweep as a Slurm job array (see slurm.h).
#include "host/sweep/slurm.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/subprocess.h"

namespace tpu::sweep {
namespace {

namespace fs = std::filesystem;

// Runs a command; returns its exit status and its output (stdout and stderr).
int Capture(const std::vector<std::string>& argv, std::string* output) {
  ChildResult r = RunChild(argv, {ChildOptions::Output::kCapture, ""});
  *output = std::move(r.output);
  return r.status;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

void WriteScript(const std::string& path, const std::string& text) {
  WriteFileAtomically(path, text);
  ::chmod(path.c_str(), 0755);
}

}  // namespace

SlurmJobs SubmitSweep(const std::string& tpusim, const std::string& spec_path,
                      const std::string& dir, const SlurmOptions& o) {
  std::string out;
  if (FindOnPath("sbatch").empty()) {
    throw UsageError(
        "--slurm needs Slurm's sbatch on PATH (Debian: apt-get install slurm-client); run "
        "without --slurm to use this machine's cores");
  }
  if (o.array_size < 1 || o.cpus_per_task < 1) {
    throw UsageError("--array-size and --jobs must be at least 1");
  }
  const fs::path d = fs::absolute(dir);
  const fs::path sd = d / "slurm";
  fs::create_directories(sd);
  const std::string exe = fs::absolute(tpusim).string();
  const std::string spec = fs::absolute(spec_path).string();
  std::string header = "#!/bin/bash\n# Written by tpusim sweep --slurm.\n";
  if (!o.partition.empty()) header += "#SBATCH --partition=" + o.partition + "\n";
  if (!o.time_limit.empty()) header += "#SBATCH --time=" + o.time_limit + "\n";
  WriteScript((sd / "task.sh").string(),
              header + fmt::format("#SBATCH --job-name=tpusim-sweep\n"
                                   "#SBATCH --array=0-{}\n"
                                   "#SBATCH --cpus-per-task={}\n"
                                   "#SBATCH --output={}/task-%a.log\n"
                                   "exec {} sweep {} --out {} --shard \"$SLURM_ARRAY_TASK_ID/{}\" "
                                   "--jobs {} -q\n",
                                   o.array_size - 1, o.cpus_per_task, sd.string(), ShellQuote(exe),
                                   ShellQuote(spec), ShellQuote(d.string()), o.array_size,
                                   o.cpus_per_task));
  WriteScript((sd / "finish.sh").string(),
              header + fmt::format("#SBATCH --job-name=tpusim-sweep-plot\n"
                                   "#SBATCH --output={}/finish.log\n"
                                   "exec {} plot {}\n",
                                   sd.string(), ShellQuote(exe), ShellQuote(d.string())));
  SlurmJobs jobs;
  if (Capture({"sbatch", "--parsable", (sd / "task.sh").string()}, &out) != 0) {
    throw RuntimeError("sbatch refused the sweep's job array: " + Trim(out));
  }
  jobs.array_job = Trim(out.substr(0, out.find(';')));
  if (Capture({"sbatch", "--parsable", "--dependency=afterany:" + jobs.array_job,
               (sd / "finish.sh").string()},
              &out) != 0) {
    throw RuntimeError("sbatch refused the sweep's plot job: " + Trim(out));
  }
  jobs.finish_job = Trim(out.substr(0, out.find(';')));
  WriteFileAtomically((sd / "jobs.json").string(), nlohmann::json{{"array_job", jobs.array_job},
                                                                  {"finish_job", jobs.finish_job},
                                                                  {"array_size", o.array_size}}
                                                           .dump(2) +
                                                       "\n");
  return jobs;
}

std::string SlurmJobStates(const std::string& dir) {
  const fs::path path = fs::path(dir) / "slurm" / "jobs.json";
  if (!fs::exists(path)) return "";
  nlohmann::json j;
  try {
    std::ifstream in(path);
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return "slurm: " + path.string() + " is unreadable\n";
  }
  std::string s;
  for (const char* k : {"array_job", "finish_job"}) {
    const std::string id = j.value(k, "");
    if (id.empty()) continue;
    std::string out;
    std::string states;
    if (Capture({"squeue", "-h", "-j", id, "-o", "%i %T"}, &out) == 0 && !Trim(out).empty()) {
      states = Trim(out);
    } else if (Capture({"sacct", "-n", "-X", "-P", "-j", id, "-o", "JobID,State"}, &out) == 0 &&
               !Trim(out).empty()) {
      states = Trim(out);
    } else {
      states = "no longer known to squeue or sacct";
    }
    std::istringstream lines(states);
    std::string line;
    while (std::getline(lines, line)) {
      s += fmt::format("slurm {} {}: {}\n", k == std::string("array_job") ? "task" : "plot", id,
                       line);
    }
  }
  return s;
}

}  // namespace tpu::sweep
