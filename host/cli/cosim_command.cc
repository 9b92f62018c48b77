// `tpusim cosim`: random programs on the rtl and the fast engine, every observable result
// compared (host/cosim/cosim.h).
#include "host/cli/cosim_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/common/revision.h"
#include "host/common/subprocess.h"
#include "host/config/tpu_config.h"
#include "host/cosim/cosim.h"
#include "host/cosim/network_generator.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"

namespace tpu::cli {
namespace {
namespace fs = std::filesystem;

struct CosimArgs {
  std::vector<std::string> configs, sets;
  uint64_t programs = 200, seed = 1, watchdog = 20000;
  uint64_t networks = 0, rtl_every = 10;  // networks > 0: random networks, not programs
  std::string json, out = "cosim-mismatches", replay, save;
  std::optional<uint64_t> program;
  bool quiet = false;
  bool child = false;  // one config of a cosim of several: its progress bar, not its summary
};

// One preset for every array size whose RTL is built.
std::vector<std::string> DefaultConfigs() {
  std::vector<std::string> out;
  const std::vector<std::string> presets = config::PresetNames();
  for (const int n : engine::RtlBuiltDims()) {
    for (const std::string& p : presets) {
      if (config::LoadConfig(p).array_dim == n) {
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

nlohmann::json SummaryJson(const cosim::CosimSummary& s) {
  return {{"config", s.config},
          {"array_dim", s.array_dim},
          {"cores", s.cores},
          {"dtype", s.dtype},
          {"programs", s.programs},
          {"mismatches", s.mismatches},
          {"endings", s.endings},
          {"executed", s.executed},
          {"rtl_seconds", s.rtl_seconds},
          {"fast_seconds", s.fast_seconds},
          {"first_mismatch", s.first_mismatch}};
}

nlohmann::json NetworkSummaryJson(const cosim::NetworkCosimSummary& s) {
  return {{"config", s.config},
          {"array_dim", s.array_dim},
          {"dtype", s.dtype},
          {"networks", s.networks},
          {"layers", s.layers},
          {"rtl_networks", s.rtl_networks},
          {"rtl_over_budget", s.rtl_over_budget},
          {"unsupported", s.unsupported},
          {"mismatches", s.mismatches},
          {"rtl_seconds", s.rtl_seconds},
          {"fast_seconds", s.fast_seconds},
          {"first_mismatch", s.first_mismatch}};
}

// ", N more over the rtl budget (...)" where networks due on the RTL were too long for it.
std::string OverBudget(const nlohmann::json& s) {
  const auto n = s.value("rtl_over_budget", uint64_t{0});
  return n == 0 ? "" : fmt::format(" ({} more due there over its budget: cosim::kRtlBudget)", n);
}

std::string SummaryLine(const nlohmann::json& s) {
  std::string format = s["dtype"] == "int8" ? "" : ", " + s["dtype"].get<std::string>();
  if (s.value("cores", 1) > 1) format += fmt::format(", {} cores", s["cores"].get<int>());
  if (s.contains("networks")) {
    std::string refused;
    uint64_t refusals = 0;
    for (const auto& [why, n] : s["unsupported"].items()) {
      refused += fmt::format("      {} refused: {}\n", n.get<uint64_t>(), why);
      refusals += n.get<uint64_t>();
    }
    return fmt::format(
        "  {:<24} {:>6} networks ({} layers), {} refused by the compiler, {} mismatches; {} also "
        "on the rtl engine{}; rtl {:.2f} s, fast {:.2f} s\n{}",
        fmt::format("{} ({} x {}{})", s["config"].get<std::string>(), s["array_dim"].get<int>(),
                    s["array_dim"].get<int>(), format),
        s["networks"].get<uint64_t>(), s["layers"].get<uint64_t>(), refusals,
        s["mismatches"].get<uint64_t>(), s["rtl_networks"].get<uint64_t>(), OverBudget(s),
        s["rtl_seconds"].get<double>(), s["fast_seconds"].get<double>(), refused);
  }
  std::string endings;
  for (const auto& [k, v] : s["endings"].items()) {
    endings += (endings.empty() ? "" : ", ") + fmt::format("{} {}", k, v.get<uint64_t>());
  }
  std::string executed;
  const nlohmann::json done = s.value("executed", nlohmann::json::object());
  for (const auto& [k, v] : done.items())
    executed += (executed.empty() ? "" : ", ") + fmt::format("{} {}", k, v.get<uint64_t>());
  if (!executed.empty()) executed = "      executed: " + executed + "\n";
  return fmt::format("  {:<24} {:>6} programs, {} mismatches ({}); rtl {:.2f} s, fast {:.2f} s\n{}",
                     fmt::format("{} ({} x {}{})", s["config"].get<std::string>(),
                                 s["array_dim"].get<int>(), s["array_dim"].get<int>(), format),
                     s["programs"].get<uint64_t>(), s["mismatches"].get<uint64_t>(), endings,
                     s["rtl_seconds"].get<double>(), s["fast_seconds"].get<double>(), executed);
}

// One config in this process (the SystemC kernel allows one RTL system per process).
nlohmann::json RunOne(const CosimArgs& a, const std::string& config_name) {
  config::TpuConfig config = config::LoadConfig(config_name);
  for (const std::string& kv : a.sets) config::ApplyOverride(&config, kv);
  engine::EngineOptions eo;
  eo.watchdog_cycles = a.watchdog;
  // Networks with --rtl-every 0 run on the fast engine alone: a build without this size's
  // RTL model runs them too.
  const bool with_rtl = a.networks == 0 || a.rtl_every > 0;
  const auto rtl =
      with_rtl ? engine::MakeChipEngine(engine::EngineKind::kRtl, config, eo) : nullptr;
  const auto fast = engine::MakeChipEngine(engine::EngineKind::kFast, config, eo);
  ProgressBar bar("cosim " + config.name, !a.quiet);
  if (a.networks > 0) {
    cosim::NetworkCosimOptions no;
    no.networks = a.networks;
    no.seed = a.seed;
    no.rtl_every = a.rtl_every;
    no.mismatch_dir = a.out;
    no.progress = [&bar](double f) { bar.Update(f); };
    const cosim::NetworkCosimSummary s = cosim::RunNetworkCosim(rtl.get(), *fast, no);
    bar.Finish();
    return NetworkSummaryJson(s);
  }
  cosim::CosimOptions o;
  o.programs = a.program ? 1 : a.programs;
  o.first_program = a.program.value_or(0);
  o.seed = a.seed;
  o.mismatch_dir = a.out;
  o.save_dir = a.save;
  o.progress = [&bar](double f) { bar.Update(f); };
  const cosim::CosimSummary s = cosim::RunCosim(*rtl, *fast, o);
  bar.Finish();
  return SummaryJson(s);
}

// One config in a child process; its summary comes back as JSON.
nlohmann::json CosimChild(const CosimArgs& a, const std::string& config_name,
                          const std::string& json_path) {
  std::vector<std::string> argv = {fs::read_symlink("/proc/self/exe").string(),
                                   "cosim",
                                   a.quiet ? "-q" : "--child",
                                   "--config",
                                   config_name,
                                   "--programs",
                                   std::to_string(a.programs),
                                   "--seed",
                                   std::to_string(a.seed),
                                   "--watchdog",
                                   std::to_string(a.watchdog),
                                   "--out",
                                   a.out,
                                   "--json",
                                   json_path};
  for (const std::string& kv : a.sets) argv.insert(argv.end(), {"--set", kv});
  if (a.networks > 0) {
    argv.insert(argv.end(), {"--networks", std::to_string(a.networks), "--rtl-every",
                             std::to_string(a.rtl_every)});
  }
  if (a.program) argv.insert(argv.end(), {"--program", std::to_string(*a.program)});
  if (!a.save.empty()) argv.insert(argv.end(), {"--save", a.save});
  const int rc = tpu::RunChild(argv).status;
  nlohmann::json j;
  try {
    std::ifstream in(json_path);
    in >> j;
  } catch (const nlohmann::json::exception&) {
    j = nullptr;
  }
  if (!j.is_object() || !j.contains("configs") || j["configs"].empty()) {
    throw RuntimeError(fmt::format(
        "cosim of config '{}' stopped in its child process (exit status {}); its message is "
        "above",
        config_name, rc));
  }
  return j["configs"][0];
}

void Replay(const CosimArgs& a) {
  config::TpuConfig config;
  const engine::ExecJob job = cosim::ReadMismatch(a.replay, &config);
  engine::EngineOptions eo;
  eo.watchdog_cycles = a.watchdog;
  const auto rtl = engine::MakeChipEngine(engine::EngineKind::kRtl, config, eo);
  const auto fast = engine::MakeChipEngine(engine::EngineKind::kFast, config, eo);
  const cosim::Outcome out = cosim::RunBoth(*rtl, *fast, job);
  std::cout << fmt::format("replay of {} on {}: rtl {} ({} cycles), fast {} ({} cycles)\n",
                           a.replay, config.name, Name(out.rtl.state), out.rtl.cycles,
                           Name(out.fast.state), out.fast.cycles);
  if (!out.difference.empty()) throw RuntimeError("the engines differ: " + out.difference);
  std::cout << "the engines agree on everything\n";
}

void Cosim(const CosimArgs& a) {
  if (!a.replay.empty()) return Replay(a);
  if (a.programs < 1) throw UsageError("--programs must be at least 1");
  if (a.networks > 0 && (a.program || !a.save.empty())) {
    throw UsageError(
        "--program and --save choose random programs; with --networks a failing "
        "network is saved under --out with the command that replays it");
  }
  if (a.watchdog < 1) throw UsageError("--watchdog must be at least 1 cycle");
  if (!a.json.empty()) CheckWritable(a.json);
  const std::vector<std::string> configs = a.configs.empty() ? DefaultConfigs() : a.configs;
  for (const std::string& c : configs) {
    config::TpuConfig config = config::LoadConfig(c);  // fails early on a bad name or --set
    for (const std::string& kv : a.sets) config::ApplyOverride(&config, kv);
  }
  if (configs.empty()) throw UsageError("no config to run: this build has no whole-chip RTL model");
  nlohmann::json results = nlohmann::json::array();
  if (configs.size() == 1) {
    results.push_back(RunOne(a, configs[0]));
  } else {
    const std::string scratch =
        (fs::temp_directory_path() / ("tpusim_cosim_" + std::to_string(::getpid()))).string();
    fs::create_directories(scratch);
    try {
      for (size_t i = 0; i < configs.size(); ++i) {
        if (!a.quiet) std::cerr << "cosim: " << configs[i] << " ...\n";
        results.push_back(CosimChild(a, configs[i], scratch + "/" + std::to_string(i) + ".json"));
      }
    } catch (...) {
      fs::remove_all(scratch);
      throw;
    }
    fs::remove_all(scratch);
  }
  const char* what = a.networks > 0 ? "networks" : "programs";
  uint64_t count = 0, mismatches = 0;
  std::string text = fmt::format(
      a.networks > 0 ? "tpusim cosim: random networks on the fast engine against the CPU "
                       "reference of the chip's format, every {}th on the rtl engine too, seed {}\n"
                     : "tpusim cosim: random programs on the rtl and fast engines{}, seed {}\n",
      a.networks > 0 ? std::to_string(a.rtl_every) : "", a.seed);
  for (const auto& r : results) {
    count += r[what].get<uint64_t>();
    mismatches += r["mismatches"].get<uint64_t>();
    text += SummaryLine(r);
  }
  text += fmt::format("  total: {} {}, {} mismatches\n", count, what, mismatches);
  if (!a.json.empty()) {
    WriteFileAtomically(a.json, nlohmann::json{{what, count},
                                               {"mismatches", mismatches},
                                               {"seed", a.seed},
                                               {"configs", results},
                                               {"revision", kGitRevision}}
                                        .dump(2) +
                                    "\n");
  }
  if (!a.quiet && !a.child) std::cout << text;
  if (mismatches > 0) {
    for (const auto& r : results) {
      if (r["mismatches"].get<uint64_t>() > 0) {
        throw RuntimeError(fmt::format("{}: {}", r["config"].get<std::string>(),
                                       r["first_mismatch"].get<std::string>()));
      }
    }
  }
}

}  // namespace

void AddCosimCommand(CLI::App& app) {
  auto a = std::make_shared<CosimArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cosim",
      "Run random programs on the rtl and fast engines and compare everything (--networks: "
      "random networks through the compiler).");
  cmd->footer(R"(
Generates random TPU programs (mostly valid: random shapes, addresses, flags, tiling,
accumulate chains, pooling, DMA overlapping the matrix unit; some ending in every error
status, a watchdog stop or without halt), runs each on the Verilated RTL and on the fast
C++ engine, and compares how the run ended, the status, every counter, the host memory and
the instruction timeline cycle by cycle. A mismatch writes the program and its memory
images to a folder under --out and names the command that replays it. Each config runs
in its own process (one SystemC system per process). Exit 1 on any mismatch.

--networks N tests the compiler instead: N random networks per config (every layer kind
and option: convolutions of any kernel, stride and padding, depthwise ones, max, average
and global pooling, residual adds, concats, dense layers, each activation; random input
shapes and batches), each quantized on synthetic inputs, compiled, run on the fast engine
and checked bit-exact against the CPU int8 reference (on a bf16 chip, the bf16 reference of
docs/bf16.md); a refusal counts as a mismatch unless its reason is a limit docs/compiler.md
states that the network has (a layer reading the model's input directly, a bf16 add ending
in ReLU6). Every --rtl-every-th also runs on the RTL with every counter equal (each core's,
the chip's cycles), and the others on a fast engine whose memory bandwidths,
latencies and weight FIFO depth are drawn for the network. A failing network is saved as a
model folder under --out with the `tpusim run` command that replays it. (The 256 x 256 RTL
runs about 1,500 cycles/s: a network due there whose cycles times the array's cells pass
3e9, about 30 s, is counted in the summary, not run; --rtl-every 0 runs none.)

Examples:
  tpusim cosim                                   every built RTL size, 200 programs each
  tpusim cosim --networks 300 --seed 5 --json networks.json
  tpusim cosim --config small-16 --programs 2000 --seed 7 --json cosim.json
  tpusim cosim --config teach-4 --set host_mem_latency_cycles=500 --set host_mem_bytes_per_cycle=1
  tpusim cosim --replay cosim-mismatches/small-16-seed7-program42)");
  cmd->add_option("-c,--config", a->configs,
                  "preset or .json config (repeatable; default: one per built RTL size)");
  cmd->add_option("--set", a->sets, "override a config field in every config (repeatable)");
  cmd->add_option("--programs", a->programs, "random programs per config")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the program (network) generator")
      ->capture_default_str();
  cmd->add_option("--networks", a->networks,
                  "random networks per config instead of programs (the compiler's test)");
  cmd->add_option("--rtl-every", a->rtl_every,
                  "with --networks: every k-th network also on the RTL (0: none)")
      ->capture_default_str();
  cmd->add_option("--watchdog", a->watchdog, "cycles without progress that stop a program")
      ->capture_default_str();
  cmd->add_option("--json", a->json,
                  "write the summary as JSON (keys programs or networks, mismatches, configs)");
  cmd->add_option("--out", a->out, "folder for the jobs that mismatch")->capture_default_str();
  cmd->add_option("--replay", a->replay, "run a mismatch folder again on both engines");
  cmd->add_option("--program", a->program,
                  "run only the program with this index of the seed's sequence");
  cmd->add_option("--save", a->save,
                  "write every program run to this folder first (as --out does for mismatches; "
                  "replay with --replay)");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  // How a cosim of several configs runs each (in a process of its own): with its progress
  // bar, which -q would hide, and without the summary, which the parent prints.
  cmd->add_flag("--child", a->child)->group("");
  cmd->callback([a] { Cosim(*a); });
}

}  // namespace tpu::cli
