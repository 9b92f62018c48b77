// Running a sweep point by point, each as a `tpusim run` process (see sweep_runner.h).
#include "host/sweep/sweep_runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/common/subprocess.h"
#include "host/common/text.h"

namespace tpu::sweep {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string RecordPath(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / "points" / (key + ".json")).string();
}

// The record of a point, or null when there is none (or it cannot be read: a record is
// written atomically, so that means someone else's file; the point runs again).
nlohmann::json ReadRecord(const std::string& dir, const std::string& key) {
  const std::string path = RecordPath(dir, key);
  if (!fs::exists(path)) return nullptr;
  try {
    return nlohmann::json::parse(ReadText(path));
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

std::string Describe(const SweepPoint& p) {
  std::string s = "point " + std::to_string(p.index) + " (";
  bool first = true;
  for (const auto& [k, v] : p.values.items()) {
    s += (first ? "" : ", ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    first = false;
  }
  return s + ")";
}

// Adds a point with its record (null: none) to the counts.
void Count(const SweepPoint& p, const nlohmann::json& record, SweepStatus* s) {
  ++s->points;
  if (!record.is_object()) {
    ++s->missing;
  } else if (record.value("status", "") == "ok") {
    ++s->ok;
  } else {
    ++s->failed;
    s->failures.push_back(Describe(p) + ": " + record.value("error", "failed"));
  }
}

// The last non-empty line of a log: the error a failed `tpusim run` printed.
std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last.empty() ? "no output" : last;
}

// A training point's report (`tpusim train --json`: its one epoch) in the shape of a run's
// where the table and the figures read it: the epoch's images, cycles and energy, the step's
// passes as its layers, and the training metrics (KnownMetrics("train")).
// A timing-only point's (`tpusim train --timing-only --json`: one step timed, no epoch) as
// an epoch of that one step, without a loss or an accuracy.
nlohmann::json TimedEpoch(const nlohmann::json& t) {
  const nlohmann::json& step = t.at("step");
  double joules = 0;
  for (const auto& pass : t.at("passes")) joules += pass.at("energy_pj").get<double>() * 1e-12;
  return {{"steps", 1},
          {"cycles", step.at("cycles")},
          {"seconds_simulated", step.at("time_us").get<double>() * 1e-6},
          {"energy_j", joules},
          {"loss", nullptr},
          {"test_accuracy", nullptr}};
}

nlohmann::json TrainReport(const nlohmann::json& t) {
  const nlohmann::json epoch =
      t.value("timing_only", false) ? TimedEpoch(t) : t.at("epochs").back();
  const nlohmann::json& step = t.at("step");
  const double steps = epoch.at("steps").get<double>();
  const double images = steps * t.at("batch").get<double>();
  const double cycles = epoch.at("cycles").get<double>();
  const double peak = step.at("peak_ops_per_cycle").get<double>();
  nlohmann::json r = {{"images", images},
                      {"cycles", cycles},
                      {"chip_cycles", cycles},
                      {"engine", t.at("engine")},
                      {"revision", step.at("revision")},
                      {"config", step.at("config")},
                      {"layers", nlohmann::json::array()},
                      {"energy_components_pj", nlohmann::json::object()}};
  double macs = 0;
  for (const auto& pass : t.at("passes")) {
    const nlohmann::json& c = pass.at("counters");
    const double pc = c.at("cycles").get<double>(), pm = c.at("macs").get<double>();
    macs += pm;
    r["layers"].push_back({{"name", pass.at("pass")},
                           {"cycles", pc},
                           {"macs", pm},
                           {"dram_bytes", pass.at("dram_bytes")},
                           {"ops_per_cycle", pc > 0 ? 2 * pm / pc : 0.0},
                           {"utilization", pc > 0 ? 2 * pm / (pc * peak) : 0.0}});
    for (const auto& [k, v] : pass.at("energy_components_pj").items())
      r["energy_components_pj"][k] = r["energy_components_pj"].value(k, 0.0) + v.get<double>();
  }
  const double seconds = epoch.at("seconds_simulated").get<double>();
  const double bound = step.at("bound").at("cycles").get<double>();
  r["cycles_per_step"] = cycles / steps;
  r["us_per_image"] = seconds * 1e6 / images;
  r["images_per_second"] = images / seconds;
  r["macs"] = macs;
  r["ops_per_cycle"] = 2 * macs / cycles;
  r["utilization"] = 2 * macs / (cycles * peak);
  r["bound_cycles"] = bound;
  r["bound_ratio"] = cycles / steps / bound;
  r["binds"] = step.at("bound").at("binds");
  r["energy_per_image_pj"] = epoch.at("energy_j").get<double>() * 1e12 / images;
  r["loss"] = epoch.at("loss");
  r["accuracy"] = epoch.at("test_accuracy");
  return r;
}

// A training point's command: one epoch of the job's images on the chip, its model folder
// `model` (in the sweep's own .running folder, removed after); with timing_only, one step
// timed (tpusim train --timing-only: no model written).
std::vector<std::string> TrainArgs(const PointJob& job, const std::string& tpusim,
                                   const std::string& config, const std::string& report,
                                   const std::string& model) {
  std::vector<std::string> args = {tpusim,        "train",
                                   "--config",    config,
                                   "--batch",     std::to_string(job.batch),
                                   "--engine",    job.engine,
                                   "--seed",      std::to_string(job.seed),
                                   "--optimizer", job.optimizer,
                                   "-q",          "--json",
                                   report};
  if (job.timing_only) {
    args.push_back("--timing-only");
  } else {
    args.insert(args.end(), {"--limit", std::to_string(job.images), "--epochs", "1",
                             "--checkpoint-every", "0", "--out", model});
  }
  if (!job.arch.empty()) args.insert(args.end(), {"--arch", job.arch});
  if (!job.model.empty()) args.insert(args.end(), {"--model", job.model});
  if (!job.data.empty()) args.insert(args.end(), {"--data", job.data});
  if (!job.energy.empty()) args.insert(args.end(), {"--energy", job.energy});
  return args;
}

// A run point's command.
std::vector<std::string> RunArgs(const PointJob& job, const std::string& tpusim,
                                 const std::string& config, const std::string& report) {
  std::vector<std::string> args = {tpusim,     "run",
                                   "--config", config,
                                   "--model",  job.model,
                                   "--images", std::to_string(job.images),
                                   "--batch",  std::to_string(job.batch),
                                   "--engine", job.engine,
                                   "-q",       "--json",
                                   report};
  if (!job.data.empty()) args.insert(args.end(), {"--data", job.data});
  if (!job.energy.empty()) args.insert(args.end(), {"--energy", job.energy});
  if (job.timing_only) args.push_back("--timing-only");
  if (!job.inputs.empty()) args.insert(args.end(), {"--inputs", job.inputs});
  if (job.synthetic > 0) {
    args.insert(args.end(),
                {"--synthetic", std::to_string(job.synthetic), "--seed", std::to_string(job.seed)});
  }
  if (!job.shard.empty()) args.insert(args.end(), {"--shard", job.shard});
  return args;
}

// Runs one point and writes its record.
void RunPoint(const SweepPoint& p, const SweepOptions& o) {
  const std::string& key = p.key;
  const fs::path tmp = fs::path(o.dir) / "points" / ".running";
  const std::string config = (tmp / (key + ".config.json")).string();
  const std::string report = (tmp / (key + ".run.json")).string();
  const std::string log = (tmp / (key + ".log")).string();
  const std::string model = (tmp / (key + ".model")).string();  // a training point's
  nlohmann::json cfg = p.job.config.ToJson();
  cfg["name"] = "sweep point";
  WriteFileAtomically(config, cfg.dump(2) + "\n");
  const bool train = p.job.command == "train";
  const int rc = RunChild(train ? TrainArgs(p.job, o.tpusim, config, report, model)
                                : RunArgs(p.job, o.tpusim, config, report),
                          {ChildOptions::Output::kFile, log})
                     .status;
  std::error_code ec;
  // The model folder a training point wrote, and the checkpoint beside it: the sweep's own
  // files (named by the point's key in its .running folder), never a user's.
  auto remove_model = [&] {
    for (const std::string& d : {model, model + ".checkpoint"}) fs::remove_all(d, ec);
  };
  if (rc == 128 + SIGINT || rc == 128 + SIGTERM) {
    // Stopped from outside (Ctrl-C, scancel, a job's time limit), not failed: no record, so
    // the point stays to run; the sweep stops too.
    for (const std::string& f : {config, report, log}) fs::remove(f, ec);
    remove_model();
    throw RuntimeError(fmt::format("{} was stopped by {} before it finished; it stays to run",
                                   Describe(p), rc == 128 + SIGINT ? "SIGINT" : "SIGTERM"));
  }

  nlohmann::json record = {{"key", key}, {"job", p.job.ToJson()}};
  if (rc == 0) {
    try {
      const nlohmann::json rep = nlohmann::json::parse(ReadText(report));
      record["report"] = train ? TrainReport(rep) : rep;
      record["status"] = "ok";
    } catch (const nlohmann::json::exception& e) {
      record["status"] = "failed";
      record["error"] = std::string("unreadable report: ") + e.what();
    }
  } else {
    record["status"] = "failed";
    record["exit_code"] = rc;
    record["error"] = rc < 0 ? "could not start " + o.tpusim : LastLine(ReadText(log));
  }
  WriteFileAtomically(RecordPath(o.dir, key), record.dump(1) + "\n");
  for (const std::string& f : {config, report, log}) fs::remove(f, ec);
  remove_model();
}

// The metrics of a finished point, from its run report.
nlohmann::ordered_json Metrics(const nlohmann::json& r, const std::vector<std::string>& names) {
  const double images = r.at("images").get<double>();
  double dram = 0;
  for (const auto& l : r.at("layers")) dram += l.at("dram_bytes").get<double>();
  nlohmann::ordered_json m;
  for (const std::string& n : names) {
    if (n == "cycles_per_image") {  // the chip's time (its rows count each core's cycles)
      m[n] = r.value("chip_cycles", r.at("cycles").get<double>()) / images;
    } else if (n == "dram_bytes_per_image") {
      m[n] = dram / images;
    } else {
      m[n] = r.at(n);
    }
  }
  return m;
}

std::string CsvField(const nlohmann::json& v) {
  return CsvQuoted(v.is_null() ? "" : v.is_string() ? v.get<std::string>() : v.dump());
}

}  // namespace

void PrepareSweepDir(const SweepSpec& spec, const std::string& dir, bool fresh) {
  const fs::path d(dir);
  const fs::path spec_file = d / "sweep.json";
  nlohmann::ordered_json saved = {{"spec_path", fs::absolute(spec.path).string()},
                                  {"spec", spec.source}};
  if (fs::exists(spec_file) && !fresh) {
    nlohmann::ordered_json old;
    try {
      old = nlohmann::ordered_json::parse(ReadText(spec_file.string()));
    } catch (const nlohmann::json::exception&) {
      throw UsageError(fmt::format("'{}' is not a sweep record; choose another --out folder",
                                   spec_file.string()));
    }
    if (old.value("spec", nlohmann::ordered_json()) != spec.source) {
      throw UsageError(fmt::format(
          "'{}' holds a different sweep ('{}', from {}); choose another --out folder, or "
          "--fresh to replace it",
          dir, old["spec"].value("name", "unnamed"), old.value("spec_path", "?")));
    }
  }
  if (fs::exists(d) && !fs::is_directory(d)) {
    throw UsageError(fmt::format("--out '{}' is a file; give a folder", dir));
  }
  std::error_code ec;
  fs::create_directories(d / "points" / ".running", ec);
  if (ec) {
    throw UsageError(fmt::format("cannot create the sweep folder '{}': {}", dir, ec.message()));
  }
  if (::access(d.c_str(), W_OK) != 0) {
    throw UsageError(fmt::format("cannot write in the sweep folder '{}'", dir));
  }
  if (fresh) {
    for (const auto& e : fs::directory_iterator(d / "points")) {
      if (e.is_regular_file() && e.path().extension() == ".json") fs::remove(e.path());
    }
    for (const char* f : {"results.csv", "results.json"}) fs::remove(d / f, ec);
  }
  WriteFileAtomically(spec_file.string(), saved.dump(2) + "\n");
}

SweepSpec LoadSweepDir(const std::string& dir) {
  const std::string path = (fs::path(dir) / "sweep.json").string();
  if (!fs::exists(path)) {
    throw UsageError(
        fmt::format("'{}' holds no sweep (no sweep.json); run tpusim sweep SPEC "
                    "--out {} first",
                    dir, dir));
  }
  nlohmann::ordered_json saved;
  try {
    saved = nlohmann::ordered_json::parse(ReadText(path));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("{}: not valid JSON ({})", path, e.what()));
  }
  return ParseSweepSpec(saved.at("spec"), saved.value("spec_path", path));
}

SweepStatus RunSweep(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const SweepOptions& o) {
  // The shard's points without a record of success, in grid order; points with the same
  // key (two axes that resolve alike) run once.
  std::vector<const SweepPoint*> run;
  std::set<std::string> seen;
  for (const SweepPoint& p : points) {
    if (p.index % o.shards != o.shard || !seen.insert(p.key).second) continue;
    const nlohmann::json r = ReadRecord(o.dir, p.key);
    if (!r.is_object() || r.value("status", "") != "ok") run.push_back(&p);
  }

  if (!o.quiet) {
    std::cerr << fmt::format("sweep '{}': {} points, {} to run, {} at a time\n", spec.name,
                             points.size(), run.size(), o.jobs);
  }
  ProgressBar bar("sweep", !o.quiet);
  std::atomic<size_t> next{0}, done{0};
  std::mutex mu;
  std::exception_ptr failure;
  auto worker = [&] {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= run.size()) return;
      try {
        RunPoint(*run[i], o);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        next = run.size();
        return;
      }
      const size_t d = ++done;
      std::lock_guard<std::mutex> lock(mu);
      bar.Update(static_cast<double>(d) / static_cast<double>(run.size()),
                 fmt::format("{}/{}", d, run.size()));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min<int>(o.jobs, static_cast<int>(run.size()))); ++t) {
    threads.emplace_back(worker);
  }
  for (std::thread& t : threads) t.join();
  bar.Finish();
  if (failure) std::rethrow_exception(failure);

  return ReadStatus(points, o.dir, o.shard, o.shards);
}

SweepStatus ReadStatus(const std::vector<SweepPoint>& points, const std::string& dir, int shard,
                       int shards) {
  SweepStatus s;
  for (const SweepPoint& p : points) {
    if (p.index % shards == shard) Count(p, ReadRecord(dir, p.key), &s);
  }
  return s;
}

SweepStatus WriteResults(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                         const std::string& dir) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string csv = "index,key,status";
  for (const Axis& a : spec.axes) csv += "," + CsvField(a.name);
  for (const std::string& m : spec.metrics) csv += "," + m;
  csv += ",error\n";
  SweepStatus counts;
  for (const SweepPoint& p : points) {
    const std::string& key = p.key;
    const nlohmann::json r = ReadRecord(dir, key);
    Count(p, r, &counts);
    const std::string status = r.is_object() ? r.value("status", "failed") : "missing";
    nlohmann::ordered_json row = {
        {"index", p.index}, {"key", key}, {"status", status}, {"values", p.values}};
    nlohmann::ordered_json metrics;
    if (status == "ok") {
      const nlohmann::json& rep = r.at("report");
      metrics = Metrics(rep, spec.metrics);
      row["metrics"] = metrics;
      row["engine"] = rep.at("engine");
      row["revision"] = rep.at("revision");
      row["config"] = rep.at("config");
      row["images"] = rep.at("images");
      row["energy_components_pj"] = rep.at("energy_components_pj");
      row["layers"] = rep.at("layers");
    } else if (status == "failed") {
      row["error"] = r.value("error", "failed");
    }
    rows.push_back(row);
    csv += fmt::format("{},{},{}", p.index, key, status);
    for (const Axis& a : spec.axes) csv += "," + CsvField(p.values[a.name]);
    for (const std::string& m : spec.metrics) {
      csv += "," + (metrics.contains(m) ? CsvField(metrics[m]) : std::string());
    }
    csv += "," + CsvField(row.value("error", "")) + "\n";
  }
  nlohmann::ordered_json j = {{"name", spec.name},
                              {"spec", spec.source},
                              {"axes", nlohmann::json::array()},
                              {"metrics", spec.metrics},
                              {"points", rows}};
  for (const Axis& a : spec.axes) j["axes"].push_back(a.name);
  WriteFileAtomically((fs::path(dir) / "results.json").string(), j.dump(1) + "\n");
  WriteFileAtomically((fs::path(dir) / "results.csv").string(), csv);
  return counts;
}

void DrawPlots(const std::string& dir) {
  const std::string log = (fs::path(dir) / "plots.log").string();
  const int rc = RunChild({"/usr/bin/python3", TPUSIM_SOURCE_DIR "/scripts/plot-sweep", dir},
                          {ChildOptions::Output::kFile, log})
                     .status;
  const std::string text = ReadText(log);
  std::error_code ec;
  fs::remove(log, ec);
  if (rc != 0) {
    throw RuntimeError(
        fmt::format("drawing the plots failed ({}); the results are in {}; "
                    "redraw with: tpusim plot {}",
                    LastLine(text), dir, dir));
  }
}

}  // namespace tpu::sweep
