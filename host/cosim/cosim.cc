// Co-simulation of the rtl and fast engines (see cosim.h).
#include "host/cosim/cosim.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/cosim/program_generator.h"
#include "host/engine/cycle_attribution.h"
#include "host/engine/timeline.h"
#include "host/isa/assembler.h"
#include "host/report/exec_report.h"

namespace tpu::cosim {
namespace {

// A line for SIGABRT: a failed SystemVerilog assertion aborts the process, and the person
// reading the log needs to know which program did it.
char g_abort_note[1024];

void OnAbort(int) {
  const ssize_t n = ::write(2, g_abort_note, std::strlen(g_abort_note));
  (void)n;
  std::signal(SIGABRT, SIG_DFL);
  std::raise(SIGABRT);
}

void InstallAbortNote() { std::signal(SIGABRT, OnAbort); }

void SetAbortNote(const std::string& note) {
  const size_t n = std::min(note.size(), sizeof(g_abort_note) - 1);
  std::memcpy(g_abort_note, note.data(), n);
  g_abort_note[n] = '\0';
}

}  // namespace

namespace fs = std::filesystem;

std::string Compare(const engine::ExecResult& a, const engine::ExecResult& b) {
  if (a.state != b.state)
    return fmt::format("the run ended as {} on rtl, {} on fast", a.state, b.state);
  if (a.chip_status != b.chip_status) {
    return fmt::format("chip status {} on rtl, {} on fast", a.chip_status, b.chip_status);
  }
  if (a.error_pc != b.error_pc) {
    return fmt::format("error_pc {} on rtl, {} on fast", a.error_pc, b.error_pc);
  }
  if (const int i = a.counters.FirstDifference(b.counters); i >= 0) {
    return fmt::format("counter {} is {} on rtl, {} on fast",
                       hw::kCounterNames[static_cast<size_t>(i)], a.counters[i], b.counters[i]);
  }
  if (a.message != b.message) {
    return fmt::format("message '{}' on rtl, '{}' on fast", a.message, b.message);
  }
  if (a.host_out.size() != b.host_out.size()) {
    return fmt::format("{} host bytes read back on rtl, {} on fast", a.host_out.size(),
                       b.host_out.size());
  }
  for (size_t i = 0; i < a.host_out.size(); ++i) {
    if (a.host_out[i] != b.host_out[i]) {
      return fmt::format("host memory byte {} (of the range read back) is {} on rtl, {} on fast", i,
                         a.host_out[i], b.host_out[i]);
    }
  }
  return "";
}

Outcome RunBoth(engine::ChipEngine& rtl, engine::ChipEngine& fast, const engine::ExecJob& job) {
  const double mhz = rtl.Config().clock_mhz;
  engine::Timeline trtl(mhz), tfast(mhz);
  rtl.SetTimeline(&trtl);
  fast.SetTimeline(&tfast);
  // Every counter attributed to each instruction (a row per instruction: the finest rows
  // the per-layer attribution can have) must agree too.
  const int words = static_cast<int>(job.program.words.size());
  const int n = rtl.Config().array_dim, eb = hw::ElementBytes(rtl.Config().dtype);
  engine::CycleAttribution artl(words, n, eb), afast(words, n, eb);
  std::vector<int32_t> each(static_cast<size_t>(words));
  for (int i = 0; i < words; ++i) each[static_cast<size_t>(i)] = i;
  artl.SetRowOf(each);
  afast.SetRowOf(each);
  rtl.SetObserver(&artl);
  fast.SetObserver(&afast);
  Outcome o;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  o.rtl = rtl.Run(job);
  const auto t1 = Clock::now();
  o.fast = fast.Run(job);
  o.rtl_seconds = std::chrono::duration<double>(t1 - t0).count();
  o.fast_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  rtl.SetTimeline(nullptr);
  fast.SetTimeline(nullptr);
  rtl.SetObserver(nullptr);
  fast.SetObserver(nullptr);
  o.difference = Compare(o.rtl, o.fast);
  for (int i = 0; o.difference.empty() && i < words; ++i) {
    const auto& x = artl.Rows()[static_cast<size_t>(i)];
    const auto& y = afast.Rows()[static_cast<size_t>(i)];
    if (const int k = x.FirstDifference(y); k >= 0) {
      o.difference = fmt::format("counter {} attributed to instruction {} is {} on rtl, {} on fast",
                                 hw::kCounterNames[static_cast<size_t>(k)], i, x[k], y[k]);
    }
  }
  if (o.difference.empty() && trtl.Events() != tfast.Events()) {
    const auto& x = trtl.Events();
    const auto& y = tfast.Events();
    size_t i = 0;
    while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
    o.difference =
        fmt::format("the instruction timelines differ at event {}: rtl {}, fast {}", i,
                    i < x.size() ? x[i].dump() : "(none)", i < y.size() ? y[i].dump() : "(none)");
  }
  return o;
}

void WriteMismatch(const std::string& dir, const engine::ExecJob& job, const Outcome& outcome,
                   const config::TpuConfig& config) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create '" + dir + "': " + ec.message());
  const fs::path d(dir);
  WriteFileAtomically((d / "program.asm").string(), isa::Disassemble(job.program));
  WriteFileAtomically((d / "host.bin").string(),
                      std::string(job.host_image.begin(), job.host_image.end()));
  WriteFileAtomically((d / "weights.bin").string(),
                      std::string(job.weight_image.begin(), job.weight_image.end()));
  WriteFileAtomically((d / "config.json").string(), config.ToJson().dump(2) + "\n");
  WriteFileAtomically((d / "job.json").string(),
                      nlohmann::json{{"host_out_addr", job.host_out_addr},
                                     {"host_out_bytes", job.host_out_bytes},
                                     {"difference", outcome.difference}}
                              .dump(2) +
                          "\n");
  const size_t words = job.program.words.size();
  WriteFileAtomically(
      (d / "rtl.json").string(),
      report::ExecReportJson(outcome.rtl, config, "program.asm", words).dump(2) + "\n");
  WriteFileAtomically(
      (d / "fast.json").string(),
      report::ExecReportJson(outcome.fast, config, "program.asm", words).dump(2) + "\n");
}

engine::ExecJob ReadMismatch(const std::string& dir, config::TpuConfig* config) {
  const fs::path d(dir);
  auto bytes = [&](const char* name) {
    std::ifstream f(d / name, std::ios::binary);
    if (!f) throw UsageError((d / name).string() + ": cannot open (not a cosim mismatch folder?)");
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  };
  for (const char* name : {"program.asm", "config.json", "job.json"}) {
    if (!fs::exists(d / name)) {
      throw UsageError("'" + dir + "' is not a cosim mismatch folder: " + name +
                       " cannot be opened (tpusim cosim writes these folders under --out)");
    }
  }
  *config = config::LoadConfig((d / "config.json").string());
  engine::ExecJob job;
  const std::vector<uint8_t> text = bytes("program.asm");
  job.program = isa::Assemble(std::string(text.begin(), text.end()), (d / "program.asm").string());
  job.host_image = bytes("host.bin");
  job.weight_image = bytes("weights.bin");
  const std::vector<uint8_t> j = bytes("job.json");
  try {
    const nlohmann::json meta = nlohmann::json::parse(j.begin(), j.end());
    job.host_out_addr = meta.at("host_out_addr").get<uint64_t>();
    job.host_out_bytes = meta.at("host_out_bytes").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw UsageError((d / "job.json").string() + ": " + e.what());
  }
  return job;
}

CosimSummary RunCosim(engine::ChipEngine& rtl, engine::ChipEngine& fast, const CosimOptions& o) {
  const config::TpuConfig& config = rtl.Config();
  CosimSummary s;
  s.config = config.name;
  s.array_dim = config.array_dim;
  s.dtype = hw::Name(config.dtype);
  const ProgramGenerator gen(config, o.seed);
  std::string safe = config.name;
  for (char& ch : safe)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = '_';
  InstallAbortNote();
  for (uint64_t i = o.first_program; i < o.first_program + o.programs; ++i) {
    const GeneratedProgram g = gen.Make(i);
    if (!o.save_dir.empty()) {
      WriteMismatch(
          (fs::path(o.save_dir) / fmt::format("{}-seed{}-program{}", safe, o.seed, i)).string(),
          g.job, Outcome{}, config);
    }
    // If the RTL stops the process (a failed assertion), say which program it was.
    SetAbortNote(fmt::format(
        "tpusim cosim: the run stopped in program {} ({}) of seed {} on {}; keep it with: "
        "tpusim cosim -c {} --seed {} --program {} --save DIR\n",
        i, g.kind, o.seed, config.name, config.name, o.seed, i));
    const Outcome out = RunBoth(rtl, fast, g.job);
    s.rtl_seconds += out.rtl_seconds;
    s.fast_seconds += out.fast_seconds;
    ++s.programs;
    const std::string ending =
        out.rtl.state == "error" ? "error: " + out.rtl.chip_status : out.rtl.state;
    ++s.endings[ending];
    if (!out.difference.empty()) {
      ++s.mismatches;
      if (s.first_mismatch.empty()) {
        const std::string dir =
            (fs::path(o.mismatch_dir) / fmt::format("{}-seed{}-program{}", safe, o.seed, i))
                .string();
        WriteMismatch(dir, g.job, out, config);
        s.first_mismatch = fmt::format(
            "program {} ({}): {}; written to {}; replay: tpusim cosim "
            "--replay {}",
            i, g.kind, out.difference, dir, dir);
      }
    }
    if (o.progress) {
      o.progress(static_cast<double>(i + 1 - o.first_program) / static_cast<double>(o.programs));
    }
  }
  SetAbortNote("");
  return s;
}

}  // namespace tpu::cosim
