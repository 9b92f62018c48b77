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
#include <memory>
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

// Core c's program in a mismatch folder (core 0's is program.asm).
std::string CoreProgramFile(size_t core) { return fmt::format("program-core{}.asm", core); }

}  // namespace

namespace fs = std::filesystem;

std::string Compare(const engine::ExecResult& a, const engine::ExecResult& b) {
  if (a.state != b.state)
    return fmt::format("the run ended as {} on rtl, {} on fast", Name(a.state), Name(b.state));
  if (a.chip_status != b.chip_status) {
    return fmt::format("chip status {} on rtl, {} on fast", hw::Name(a.chip_status),
                       hw::Name(b.chip_status));
  }
  if (a.error_pc != b.error_pc) {
    return fmt::format("error_pc {} on rtl, {} on fast", a.error_pc, b.error_pc);
  }
  if (const int i = a.counters.FirstDifference(b.counters); i >= 0) {
    return fmt::format("counter {} is {} on rtl, {} on fast",
                       hw::kCounterNames[static_cast<size_t>(i)], a.counters[i], b.counters[i]);
  }
  if (a.cores.size() != b.cores.size()) {
    return fmt::format("{} cores reported on rtl, {} on fast", a.cores.size(), b.cores.size());
  }
  for (size_t c = 0; c < a.cores.size(); ++c) {
    const engine::CoreResult &x = a.cores[c], &y = b.cores[c];
    const std::string d =
        x.state != y.state
            ? fmt::format("ended as {} on rtl, {} on fast", Name(x.state), Name(y.state))
        : x.chip_status != y.chip_status
            ? fmt::format("status {} on rtl, {} on fast", hw::Name(x.chip_status),
                          hw::Name(y.chip_status))
        : x.error_pc != y.error_pc
            ? fmt::format("error_pc {} on rtl, {} on fast", x.error_pc, y.error_pc)
        : x.cycles != y.cycles
            ? fmt::format("ended in cycle {} on rtl, {} on fast", x.cycles, y.cycles)
            : "";
    if (!d.empty()) return fmt::format("core {} {}", c, d);
    if (const int i = x.counters.FirstDifference(y.counters); i >= 0) {
      return fmt::format("core {}'s counter {} is {} on rtl, {} on fast", c,
                         hw::kCounterNames[static_cast<size_t>(i)], x.counters[i], y.counters[i]);
    }
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

namespace {

// What cosim follows of a core: its instruction timeline and every counter attributed to
// each of its instructions (a row per instruction: the finest rows the per-layer
// attribution can have).
class CoreWatch final : public engine::CycleObserver {
 public:
  CoreWatch(const config::TpuConfig& c, int words)
      : timeline_(c.clock_mhz, c.mxus_per_core),
        attribution_(words, c.array_dim, hw::ElementBytes(c.dtype), c.vector_sublanes) {
    std::vector<int32_t> each(static_cast<size_t>(words));
    for (int i = 0; i < words; ++i) each[static_cast<size_t>(i)] = i;
    attribution_.SetRowOf(each);
  }
  void BeginRun(const isa::Program& program, const std::string& label) override {
    timeline_.BeginRun(program, label);
    attribution_.BeginRun(program, label);
  }
  void Cycles(uint64_t first, uint64_t count, const engine::CycleObs& obs) override {
    timeline_.Cycles(first, count, obs);
    attribution_.Cycles(first, count, obs);
  }
  void EndRun(uint64_t cycles) override {
    timeline_.EndRun(cycles);
    attribution_.EndRun(cycles);
  }
  // "" when they agree.
  std::string Difference(const CoreWatch& fast) const {
    const auto& rows = attribution_.Rows();
    for (size_t i = 0; i < rows.size(); ++i) {
      const hw::ChipCounters &x = rows[i], &y = fast.attribution_.Rows()[i];
      if (const int k = x.FirstDifference(y); k >= 0) {
        return fmt::format("counter {} attributed to instruction {} is {} on rtl, {} on fast",
                           hw::kCounterNames[static_cast<size_t>(k)], i, x[k], y[k]);
      }
    }
    const auto& x = timeline_.Events();
    const auto& y = fast.timeline_.Events();
    if (x == y) return "";
    size_t i = 0;
    while (i < x.size() && i < y.size() && x[i] == y[i]) ++i;
    // A wrong event may hold any bytes: shown, not thrown on.
    auto show = [](const auto& e) {
      return e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    return fmt::format("the instruction timelines differ at event {}: rtl {}, fast {}", i,
                       i < x.size() ? show(x[i]) : "(none)", i < y.size() ? show(y[i]) : "(none)");
  }

 private:
  engine::Timeline timeline_;
  engine::CycleAttribution attribution_;
};

}  // namespace

Outcome RunBoth(engine::ChipEngine& rtl, engine::ChipEngine& fast, const engine::ExecJob& job) {
  const config::TpuConfig& config = rtl.Config();
  std::vector<std::unique_ptr<CoreWatch>> wrtl, wfast;
  for (int c = 0; c < config.cores; ++c) {
    const int words = static_cast<int>(job.ProgramOf(c).words.size());
    wrtl.push_back(std::make_unique<CoreWatch>(config, words));
    wfast.push_back(std::make_unique<CoreWatch>(config, words));
    rtl.SetObserver(wrtl.back().get(), c);
    fast.SetObserver(wfast.back().get(), c);
  }
  Outcome o;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  o.rtl = rtl.Run(job);
  const auto t1 = Clock::now();
  o.fast = fast.Run(job);
  o.rtl_seconds = std::chrono::duration<double>(t1 - t0).count();
  o.fast_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  for (int c = 0; c < config.cores; ++c) {
    rtl.SetObserver(nullptr, c);
    fast.SetObserver(nullptr, c);
  }
  o.difference = Compare(o.rtl, o.fast);
  for (size_t c = 0; o.difference.empty() && c < wrtl.size(); ++c) {
    o.difference = wrtl[c]->Difference(*wfast[c]);
    if (!o.difference.empty() && wrtl.size() > 1)
      o.difference = fmt::format("core {}: {}", c, o.difference);
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
  for (size_t c = 1; c <= job.other_programs.size(); ++c) {
    WriteFileAtomically((d / CoreProgramFile(c)).string(),
                        isa::Disassemble(job.other_programs[c - 1]));
  }
  WriteFileAtomically((d / "host.bin").string(),
                      std::string(job.host_image.begin(), job.host_image.end()));
  WriteFileAtomically((d / "weights.bin").string(),
                      std::string(job.weight_image.begin(), job.weight_image.end()));
  WriteFileAtomically((d / "config.json").string(), config.ToJson().dump(2) + "\n");
  WriteFileAtomically((d / "job.json").string(),
                      nlohmann::json{{"host_out_addr", job.host_out_addr},
                                     {"host_out_bytes", job.host_out_bytes},
                                     {"programs", job.other_programs.size() + 1},
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
    for (size_t c = 1; c < meta.value("programs", size_t{1}); ++c) {
      const std::vector<uint8_t> core = bytes(CoreProgramFile(c).c_str());
      job.other_programs.push_back(
          isa::Assemble(std::string(core.begin(), core.end()), (d / CoreProgramFile(c)).string()));
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError((d / "job.json").string() + ": " + e.what());
  }
  return job;
}

namespace {

// The instructions each core issued (the first `instructions` of its program), by mnemonic
// and, for vector instructions, by operation.
void CountExecuted(const engine::ExecJob& job, const engine::ExecResult& r, int cores,
                   std::map<std::string, uint64_t>* executed) {
  for (int c = 0; c < cores; ++c) {
    const isa::Program& p = job.ProgramOf(c);
    const uint64_t k = std::min<uint64_t>(p.words.size(), r.CountersOf(c).instructions);
    for (uint64_t i = 0; i < k; ++i) {
      const isa::Word& w = p.words[static_cast<size_t>(i)];
      if (!isa::IsKnownOpcode(w[0])) continue;
      const isa::Instruction in = isa::Decode(w);
      ++(*executed)[std::string(isa::Mnemonic(in.opcode))];
      const uint32_t op = hw::kOpdVectorOp.Get(in.aux);
      if (in.opcode == hw::Opcode::kVector && op < hw::kNumVectorOps)
        ++(*executed)[std::string("vector ") + hw::kVectorOps[op].name];
    }
  }
}

}  // namespace

CosimSummary RunCosim(engine::ChipEngine& rtl, engine::ChipEngine& fast, const CosimOptions& o) {
  const config::TpuConfig& config = rtl.Config();
  CosimSummary s;
  s.config = config.name;
  s.array_dim = config.array_dim;
  s.cores = config.cores;
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
    const std::string ending = out.rtl.state == engine::RunEnd::kError
                                   ? std::string("error: ") + hw::Name(out.rtl.chip_status)
                                   : std::string(Name(out.rtl.state));
    ++s.endings[ending];
    CountExecuted(g.job, out.rtl, config.cores, &s.executed);
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
