// The TLM-2.0 host initiator that writes, runs and reads the simulated TPU (see rtl_engine.h).
#include "host/engine/rtl_engine.h"

#include <tlm_utils/simple_initiator_socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <systemc>
#include <tlm>

#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/engine/timeline.h"
#include "sim/system/sanitizer_stack.h"
#include "sim/system/tpu_registry.h"
#include "sim/wave/wave_file.h"

namespace tpu::engine {
namespace {

// A run's end (the chip's state register) as the engine seam names it; the states a run
// cannot end in (running, the simulation's own failure) are thrown as internal errors.
RunEnd EndOf(sim::RunState state) {
  switch (state) {
    case sim::RunState::kIdle:
      return RunEnd::kIdle;
    case sim::RunState::kHalted:
      return RunEnd::kHalted;
    case sim::RunState::kError:
      return RunEnd::kError;
    case sim::RunState::kWatchdog:
      return RunEnd::kWatchdog;
    case sim::RunState::kNoHalt:
      return RunEnd::kNoHalt;
    case sim::RunState::kRunning:
    case sim::RunState::kInternal:
      break;
  }
  throw RuntimeError(std::string("internal error: the RTL reports a run that ended as ") +
                     sim::RunStateName(state));
}

// Where a memory starts in the system's TLM address map.
uint64_t BaseOf(Memory memory) {
  return memory == Memory::kHost ? sim::kHostMemBase : sim::kWeightMemBase;
}

// The status register's value as the contract's status; a value outside it is an internal
// error.
hw::Status StatusOf(uint64_t status) {
  if (status < hw::kStatusNames.size()) return static_cast<hw::Status>(status);
  throw RuntimeError("internal error: the RTL's status register reads " + std::to_string(status) +
                     ", which the contract does not define");
}

using sim::kCsrBase;

// Host software: an SC_THREAD that performs one task (writes, a run, reads) each time the
// driver resumes the kernel, then pauses it again.
class HostInitiator : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<HostInitiator> socket;

  HostInitiator(sc_core::sc_module_name name, sim::TpuSystemBase& system,
                const config::TpuConfig& config)
      : sc_core::sc_module(name), socket("socket"), system_(system), config_(config) {
    sc_core::sc_spawn([this] { Thread(); }, "host");
  }

  void Submit(const std::function<void()>& task) {
    task_ = &task;
    failure_ = nullptr;
  }
  bool Done() const { return task_ == nullptr; }
  std::exception_ptr Failure() const { return failure_; }

  void WriteBlock(uint64_t addr, const std::vector<uint8_t>& bytes) {
    constexpr uint64_t kChunk = 1 << 16;
    std::vector<uint8_t> buf;
    for (uint64_t off = 0; off < bytes.size(); off += kChunk) {
      const uint64_t n = std::min<uint64_t>(kChunk, bytes.size() - off);
      buf.assign(bytes.begin() + static_cast<std::ptrdiff_t>(off),
                 bytes.begin() + static_cast<std::ptrdiff_t>(off + n));
      Transfer(tlm::TLM_WRITE_COMMAND, addr + off, buf.data(), n);
    }
  }

  std::vector<uint8_t> ReadBlock(uint64_t addr, uint64_t len) {
    constexpr uint64_t kChunk = 1 << 16;
    std::vector<uint8_t> out(len);
    for (uint64_t off = 0; off < len; off += kChunk) {
      Transfer(tlm::TLM_READ_COMMAND, addr + off, out.data() + off,
               std::min<uint64_t>(kChunk, len - off));
    }
    return out;
  }

  ExecResult RunPrograms(const ExecJob& job) {
    if (!params_checked_) {
      CheckParams();
      params_checked_ = true;
    }
    const int cores = config_.cores;
    for (int c = 0; c < cores; ++c) LoadProgram(c, job.ProgramOf(c));
    uint64_t n = job.program.words.size();
    Transfer(tlm::TLM_WRITE_COMMAND, kCsrBase + sim::kCsrStart, reinterpret_cast<uint8_t*>(&n), 8);
    sc_core::wait(system_.DoneEvent());  // the interrupt
    return Result(job);
  }

 private:
  void Thread() {
    for (;;) {
      while (task_ == nullptr) {
        sc_core::sc_pause();
        sc_core::wait(sc_core::SC_ZERO_TIME);
      }
      try {
        (*task_)();
      } catch (...) {
        failure_ = std::current_exception();
      }
      task_ = nullptr;
    }
  }

  void Transfer(tlm::tlm_command cmd, uint64_t addr, uint8_t* data, uint64_t len) {
    tlm::tlm_generic_payload trans;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    trans.set_command(cmd);
    trans.set_address(addr);
    trans.set_data_ptr(data);
    trans.set_data_length(static_cast<unsigned int>(len));
    trans.set_streaming_width(static_cast<unsigned int>(len));
    trans.set_byte_enable_ptr(nullptr);
    trans.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    socket->b_transport(trans, delay);
    if (trans.is_response_error()) {
      throw RuntimeError("TLM " + std::string(cmd == tlm::TLM_READ_COMMAND ? "read" : "write") +
                         " at 0x" + fmt_hex(addr) + " failed: " + trans.get_response_string());
    }
    sc_core::wait(delay);
  }

  static std::string fmt_hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  uint64_t ReadCsr(uint64_t off) {
    uint64_t v = 0;
    Transfer(tlm::TLM_READ_COMMAND, kCsrBase + off, reinterpret_cast<uint8_t*>(&v), 8);
    return v;
  }
  uint64_t ReadReg(int reg, int core = 0) {
    return ReadCsr(sim::kCsrRegBase + sim::kCsrCoreRegStride * static_cast<uint64_t>(core) +
                   8 * static_cast<uint64_t>(reg));
  }

  // The RTL parameters of the model must be the ones the config describes: every chip
  // parameter that a register reads back (contract/tpu_contract.toml).
  void CheckParams() {
    hw::ForEachParam(config_, [&](const hw::ParamInfo& info, auto value) {
      if (info.reg < 0) return;
      const uint64_t built = ReadReg(info.reg);
      if (built == static_cast<uint64_t>(value)) return;
      throw RuntimeError("config '" + config_.name + "' says " + info.name + " = " +
                         config::FieldText(info, value) + ", but the RTL model of the " +
                         std::to_string(config_.array_dim) + " x " +
                         std::to_string(config_.array_dim) + " chip is built with " +
                         config::FieldText(info, static_cast<decltype(value)>(built)) +
                         " (see cmake/TpusimRtl.cmake)");
    });
  }

  // Core c's program into its region and, for c > 0, its WORDS (0: it does not start).
  void LoadProgram(int core, const isa::Program& program) {
    std::vector<uint8_t> words;
    words.reserve(program.words.size() * sim::kInstructionBytes);
    for (const auto& w : program.words) words.insert(words.end(), w.begin(), w.end());
    WriteBlock(sim::kProgramBase + static_cast<uint64_t>(core) * sim::kCoreProgramStride, words);
    if (core == 0) return;
    uint64_t n = program.words.size();
    Transfer(tlm::TLM_WRITE_COMMAND, kCsrBase + CoreCsr(core, sim::kCsrCoreWords),
             reinterpret_cast<uint8_t*>(&n), 8);
  }

  static uint64_t CoreCsr(int core, uint64_t field) {
    return sim::kCsrCoreBase + static_cast<uint64_t>(core) * sim::kCsrCoreStride + field;
  }

  // How core `core` ended (its registers), and the message for its state.
  CoreResult ReadCore(int core, sim::RunState state, const isa::Program& program,
                      std::string* message) {
    CoreResult c;
    c.state = EndOf(state);
    const uint64_t status = ReadReg(hw::kRegStatus, core);
    c.chip_status = StatusOf(status);
    c.error_pc = ReadReg(hw::kRegErrorPc, core);
    for (int i = 0; i < hw::kNumCounters; ++i) {
      c.counters[i] = ReadReg(hw::kRegFirstCounter + i, core);
    }
    message->clear();
    if (state == sim::RunState::kError) *message = ErrorMessage(c.error_pc, status);
    if (state == sim::RunState::kNoHalt) *message = NoHaltMessage(program.words.size());
    if (state == sim::RunState::kWatchdog) *message = WatchdogMessage(system_.Stall());
    return c;
  }

  // The run's result from the chip's registers, after its interrupt.
  ExecResult Result(const ExecJob& job) {
    const int cores = config_.cores;
    ExecResult r;
    r.engine = "rtl";
    const auto state = static_cast<sim::RunState>(ReadCsr(sim::kCsrState));
    if (state == sim::RunState::kInternal) {
      throw RuntimeError("simulation failed: " + system_.Message());
    }
    std::vector<std::string> messages(static_cast<size_t>(cores));
    for (int c = 0; c < cores; ++c) {
      // A chip of one core has no per-core CSRs: its state is the run's.
      const auto s =
          cores == 1 ? state : static_cast<sim::RunState>(ReadCsr(CoreCsr(c, sim::kCsrCoreState)));
      r.cores.push_back(ReadCore(c, s, job.ProgramOf(c), &messages[static_cast<size_t>(c)]));
      r.cores.back().cycles =
          cores == 1 ? r.cores.back().counters.cycles : ReadCsr(CoreCsr(c, sim::kCsrCoreCycles));
    }
    SummarizeCores(&r, EndOf(state), cores == 1 ? r.cores[0].cycles : ReadCsr(sim::kCsrCycles),
                   messages);
    return r;
  }

  sim::TpuSystemBase& system_;
  const config::TpuConfig& config_;
  const std::function<void()>* task_ = nullptr;
  std::exception_ptr failure_;
  bool params_checked_ = false;
};

}  // namespace

struct RtlEngine::Impl {
  config::TpuConfig config;
  EngineOptions options;
  std::unique_ptr<sim::TpuSystemBase> system;
  std::unique_ptr<HostInitiator> host;
  std::unique_ptr<sim::WaveFile> wave;
  bool started = false;
  int runs = 0;
};

RtlEngine::RtlEngine(const config::TpuConfig& config, const EngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (options.timing_only) {
    throw UsageError(Field("timing_only") +
                     " is a mode of the fast engine; the RTL always computes values (use " +
                     Field("engine") + " fast)");
  }
  static bool elaborated = false;
  if (elaborated) throw std::logic_error("the SystemC kernel elaborates once per process");
  elaborated = true;
  impl_->config = config;
  impl_->options = options;
  SetTimeline(options.timeline);
  if (!options.trace_path.empty()) {
    try {
      impl_->wave = std::make_unique<sim::WaveFile>(options.trace_path);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  sim::TpuSystemConfig sc;
  sc.chip = config;
  sc.watchdog_cycles = options.watchdog_cycles;
  sc.max_program_words = kMaxProgramWords;
  try {
    impl_->system = sim::MakeTpuSystem("tpu_system", sc);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("config '") + config.name + "': " + e.what());
  }
  impl_->host = std::make_unique<HostInitiator>("host", *impl_->system, impl_->config);
  impl_->host->socket.bind(impl_->system->socket);
  // Runs end with sc_pause; that and the kernel's banner are no news worth printing.
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                          sc_core::SC_DO_NOTHING);
}

RtlEngine::~RtlEngine() {
  if (impl_->system) impl_->system->StopTrace();
}

const config::TpuConfig& RtlEngine::Config() const { return impl_->config; }

void RtlEngine::Finish() {
  if (!impl_->wave) return;
  impl_->system->StopTrace();
  try {
    impl_->wave->Commit();
  } catch (const std::exception& e) {
    throw RuntimeError(e.what());
  }
  impl_->wave.reset();
}

void RtlEngine::Start() {
  auto& im = *impl_;
  if (im.started) return;
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  sim::ResetSanitizerStack();
  if (im.wave) {
    if (im.options.trace_end < im.options.trace_start) {
      throw UsageError(Field("trace_end") + " " + std::to_string(im.options.trace_end) +
                       " is before " + Field("trace_start") + " " +
                       std::to_string(im.options.trace_start));
    }
    im.system->StartTrace(im.wave->FstPath(), im.options.trace_start, im.options.trace_end);
  }
  im.started = true;
}

void RtlEngine::InHostThread(const std::function<void()>& task) {
  Start();
  impl_->host->Submit(task);
  while (!impl_->host->Done()) sc_core::sc_start();
  sim::ResetSanitizerStack();
  if (impl_->host->Failure()) std::rethrow_exception(impl_->host->Failure());
}

void RtlEngine::WriteMemory(Memory memory, uint64_t addr, const std::vector<uint8_t>& bytes) {
  InHostThread([&] { impl_->host->WriteBlock(BaseOf(memory) + addr, bytes); });
}

std::vector<uint8_t> RtlEngine::ReadMemory(Memory memory, uint64_t addr, uint64_t bytes) {
  std::vector<uint8_t> out;
  InHostThread([&] { out = impl_->host->ReadBlock(BaseOf(memory) + addr, bytes); });
  return out;
}

ExecResult RtlEngine::RunPrograms(const ExecJob& job) {
  auto& im = *impl_;
  ++im.runs;
  ProgressBar bar("exec", im.options.progress);
  if (im.options.progress) im.system->SetProgress([&](double f) { bar.Update(f); });
  const CoreObservers observers(*this, job, im.config.cores);
  if (!observers.Empty()) {
    im.system->SetCycleHook([&observers](int core, uint64_t cycle, uint8_t issue, uint8_t busy,
                                         uint8_t obs, uint8_t mxus) {
      observers.Cycles(core, cycle, 1, {issue, busy, obs, mxus});
    });
  }
  struct Unhook {  // however the run ends
    sim::TpuSystemBase& system;
    ~Unhook() {
      system.SetProgress(nullptr);
      system.SetCycleHook(nullptr);
    }
  };
  ExecResult r;
  {
    const Unhook unhook{*im.system};
    InHostThread([&] { r = im.host->RunPrograms(job); });
  }
  bar.Finish();
  observers.EndRun(r);
  return r;
}

}  // namespace tpu::engine
