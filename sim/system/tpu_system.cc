// The TPU system's run loop, watchdog and TLM-2.0 target (see tpu_system.h).
#include "sim/system/tpu_system.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "contract/tpu_contract.h"

namespace tpu::sim {

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kIdle:
      return "idle";
    case RunState::kRunning:
      return "running";
    case RunState::kHalted:
      return "halted";
    case RunState::kError:
      return "error";
    case RunState::kWatchdog:
      return "watchdog";
    case RunState::kNoHalt:
      return "no-halt";
    case RunState::kInternal:
      return "internal-error";
  }
  return "?";
}

namespace {
constexpr uint64_t kGiB = 1ull << 30;
}

TpuSystemBase::TpuSystemBase(sc_core::sc_module_name name, const TpuSystemConfig& config)
    : sc_core::sc_module(name),
      socket("socket"),
      clk("clk", 10, sc_core::SC_NS),
      array_dim_(config.chip.array_dim),
      row_bytes_(hw::RowBytes(config.chip)),
      wm_ports_(
          std::clamp(config.chip.mxus_per_core, 1, static_cast<int>(hw::kOpdMatmulMxu.Max()) + 1) +
          1),
      config_(config),
      host_("host memory", static_cast<uint64_t>(config.chip.host_mem_bytes),
            {static_cast<uint32_t>(config.chip.host_mem_latency_cycles),
             static_cast<uint32_t>(config.chip.host_mem_bytes_per_cycle)}),
      weight_("weight memory", static_cast<uint64_t>(config.chip.weight_mem_bytes),
              {static_cast<uint32_t>(config.chip.weight_mem_latency_cycles),
               static_cast<uint32_t>(config.chip.weight_mem_bytes_per_cycle)}),
      host_port_(host_, row_bytes_),
      weight_port_(weight_, row_bytes_, std::clamp(config.chip.cores, 1, kMaxCores) * wm_ports_),
      programs_(static_cast<size_t>(std::clamp(config.chip.cores, 1, kMaxCores))),
      core_(programs_.size()) {
  if (config.chip.cores < 1 || config.chip.cores > kMaxCores) {
    throw std::invalid_argument("a chip has 1 to 16 cores");
  }
  if (config.chip.cores > 1 && config.max_program_words * kInstructionBytes > kCoreProgramStride) {
    throw std::invalid_argument("a core's program holds at most 4 Mi words on a chip of several");
  }
  if (static_cast<uint64_t>(config.chip.host_mem_bytes) > kGiB ||
      static_cast<uint64_t>(config.chip.weight_mem_bytes) > kWeightRegionSize) {
    throw std::invalid_argument("host memory holds at most 1 GiB and weight memory at most 64 GiB");
  }
  socket.register_b_transport(this, &TpuSystemBase::BTransport);
  socket.register_transport_dbg(this, &TpuSystemBase::TransportDbg);
  sc_core::sc_spawn_options opts;
  sc_core::sc_spawn([this] { EngineThread(); }, "engine", &opts);
}

void TpuSystemBase::EngineThread() {
  for (;;) {
    sc_core::wait(start_event_);
    state_ = RunState::kRunning;
    message_.clear();
    stall_ = StallInfo();
    try {
      RunProgram();
    } catch (const std::exception& e) {
      state_ = RunState::kInternal;
      message_ = e.what();
    }
    trace_base_ += cycles_ + 1;
    done_event_.notify(sc_core::SC_ZERO_TIME);
  }
}

// Inputs change at the falling edge, half a cycle before the rising edge that samples
// them; the chip's outputs (registered) are read at the same falling edge.
void TpuSystemBase::RunProgram() {
  using sc_core::wait;
  host_port_.Reset();
  weight_port_.Reset();
  for (size_t i = 0; i < core_.size(); ++i) {
    // Core 0 runs what START said, even nothing; another core runs only when given words.
    CoreRun& c = core_[i];
    c.fed = c.cycles = 0;
    c.state = i == 0 || c.words > 0 ? RunState::kRunning : RunState::kIdle;
  }
  cycles_ = 0;
  const size_t cores = core_.size();
  Inputs in;
  in.instr.assign(cores, nullptr);
  in.wm.assign(cores * static_cast<size_t>(wm_ports_), WeightAnswer{});
  in.hm_size = static_cast<uint32_t>(std::min<uint64_t>(host_.SizeBytes(), 0xffffffffu));
  in.wm_size = weight_.SizeBytes();
  WriteInputs(in);
  SetReset(false);
  wait(clk.negedge_event());
  SetReset(true);

  Outputs out;
  uint64_t quiet = 0;
  std::vector<uint8_t> last_busy(cores, 0), last_obs(cores, 0), last_mxus(cores, 0);
  // When the run ends the chip is still clocked (while the host reads its memories back):
  // from then on it sees no responses, no instructions and memories that accept nothing,
  // rather than the last cycle's inputs held forever (a held response would push rows into
  // a full weight FIFO).
  struct QuietAtEnd {
    TpuSystemBase* system;
    Inputs* in;
    ~QuietAtEnd() {
      in->hm_req_ready = in->hm_resp_valid = false;
      in->hm_resp_data = nullptr;
      in->wm.assign(in->wm.size(), WeightAnswer{});
      in->instr.assign(in->instr.size(), nullptr);
      system->WriteInputs(*in);
    }
  } quiet_at_end{this, &in};
  for (uint64_t cycle = 0;; ++cycle) {
    ReadOutputs(&out);
    for (size_t c = 0; c < cores; ++c) {
      // issue_o is the issue stage's state of the last cycle; unit_busy_o is this cycle's.
      if (cycle_hook_ && cycle > 0 && core_[c].state == RunState::kRunning) {
        cycle_hook_(static_cast<int>(c), cycle - 1, static_cast<uint8_t>(out.core[c].issue),
                    last_busy[c], last_obs[c], last_mxus[c]);
      }
      last_busy[c] = static_cast<uint8_t>(out.core[c].unit_busy);
      last_mxus[c] = static_cast<uint8_t>(out.core[c].mxu_busy);
    }
    if (EndCores(out, cycle)) return;
    bool moved = AnswerMemories(out, cycle, &in);
    uint64_t fed = 0, words = 0;
    for (size_t c = 0; c < cores; ++c) {
      CoreRun& r = core_[c];
      in.instr[c] = r.state == RunState::kRunning && r.fed < r.words
                        ? &programs_[c][r.fed * kInstructionBytes]
                        : nullptr;
      if (in.instr[c] != nullptr && out.core[c].instr_ready) {
        ++r.fed;
        moved = true;
      }
      moved = moved || out.core[c].progress;
      fed += r.fed;
      words += r.words;
    }
    WriteInputs(in);
    for (size_t c = 0; c < cores; ++c) last_obs[c] = CycleObs(out, in, static_cast<int>(c));
    quiet = moved ? 0 : quiet + 1;
    if (quiet >= config_.watchdog_cycles) {
      StopOnWatchdog(out, cycle, quiet);
      return;
    }
    if (tracing_) {
      const uint64_t g = trace_base_ + cycle;
      if (g >= trace_start_ && g <= trace_end_) {
        // Let the inputs reach the model and its logic settle, dump; then the clock edge.
        wait(sc_core::SC_ZERO_TIME);
        wait(sc_core::SC_ZERO_TIME);
        DumpTrace(g * 10);
        wait(clk.posedge_event());
        wait(sc_core::SC_ZERO_TIME);
        wait(sc_core::SC_ZERO_TIME);
        DumpTrace(g * 10 + 5);
      }
    }
    if (progress_ && (cycle & 0xffff) == 0xffff && words > 0) {
      progress_(static_cast<double>(fed) / static_cast<double>(words));
    }
    wait(clk.negedge_event());
  }
}

bool TpuSystemBase::EndCores(const Outputs& out, uint64_t cycle) {
  bool running = false;
  for (size_t c = 0; c < core_.size(); ++c) {
    CoreRun& r = core_[c];
    if (r.state != RunState::kRunning) continue;
    if (out.core[c].halted) {
      r.state = out.core[c].status == 0 ? RunState::kHalted : RunState::kError;
    } else if (r.fed == r.words && out.core[c].idle) {
      r.state = RunState::kNoHalt;
    } else {
      running = true;
      continue;
    }
    r.cycles = cycle;
  }
  if (running) return false;
  cycles_ = cycle;
  state_ = ChipState();
  SnapshotRegisters();
  return true;
}

// The run's state: an error on any core, else the watchdog, else a core without halt, else
// halted (fast::ChipEnd is the same rule).
RunState TpuSystemBase::ChipState() const {
  RunState s = RunState::kHalted;
  for (const CoreRun& r : core_) {
    if (r.state == RunState::kError) return RunState::kError;
    if (r.state == RunState::kWatchdog ||
        (r.state == RunState::kNoHalt && s != RunState::kWatchdog)) {
      s = r.state;
    }
  }
  return s;
}

bool TpuSystemBase::AnswerMemories(const Outputs& out, uint64_t cycle, Inputs* in) {
  bool moved = false;
  in->hm_req_ready = host_port_.Ready(cycle);
  if (out.hm_req_valid && in->hm_req_ready) {
    host_port_.Accept(cycle, out.hm_req_write, out.hm_req_addr, out.hm_req_data.data(),
                      out.hm_req_id);
    moved = true;
  }
  in->hm_resp_data = host_port_.Respond(cycle, &in->hm_resp_id);
  in->hm_resp_valid = in->hm_resp_data != nullptr;
  // Each weight DMA's own weight-memory port, and each host DMA's; the ports take turns at
  // the channel.
  uint64_t asking = 0;
  for (size_t p = 0; p < out.wm.size(); ++p) asking |= uint64_t{out.wm[p].valid} << p;
  const uint64_t taken = weight_port_.AcceptRequests(cycle, asking, [&](int p) {
    const WeightRequest& r = out.wm[static_cast<size_t>(p)];
    return MemoryPort::PortRequest{r.write, r.addr, r.data};
  });
  moved = moved || taken != 0;
  for (size_t p = 0; p < out.wm.size(); ++p) {
    WeightAnswer& a = in->wm[p];
    a.req_ready = (taken >> p & 1u) != 0;
    a.resp_data = weight_port_.Respond(cycle, nullptr, static_cast<int>(p));
    a.resp_valid = a.resp_data != nullptr;
  }
  return moved;
}

void TpuSystemBase::StopOnWatchdog(const Outputs& out, uint64_t cycle, uint64_t quiet) {
  cycles_ = cycle;
  size_t stuck = 0;
  while (stuck + 1 < core_.size() && core_[stuck].state != RunState::kRunning) ++stuck;
  for (CoreRun& r : core_) {
    if (r.state == RunState::kRunning) {
      r.state = RunState::kWatchdog;
      r.cycles = cycle;
    }
  }
  state_ = ChipState();
  SnapshotRegisters();
  const CoreRun& r = core_[stuck];
  const CoreOutputs& o = out.core[stuck];
  stall_.quiet_cycles = quiet;
  stall_.core = static_cast<int>(stuck);
  stall_.pc = r.registers[hw::kRegRetired];
  stall_.opcode = stall_.pc < r.fed ? programs_[stuck][stall_.pc * kInstructionBytes] : -1;
  stall_.issue = static_cast<uint8_t>(o.issue);
  stall_.busy = static_cast<uint8_t>(o.unit_busy);
  stall_.wait_weights = o.wait_weights;
}

// A core's obs_o as its counters see it at the clock edge. Its memory-stall bits are a
// request that is not taken, and the ready inputs of this cycle are written after the
// outputs were read: so they are formed here from this cycle's inputs, as the chip forms
// them once its inputs settle (the request valids are registers, not inputs' functions; a
// core's host request is taken when the arbiter grants it and the memory is ready, a weight
// DMA's request when its port's turn comes while the channel can take it; the weight bit is
// any of the core's weight DMAs' and its host DMA's read_hbm).
uint8_t TpuSystemBase::CycleObs(const Outputs& out, const Inputs& in, int core) const {
  const CoreOutputs& o = out.core[static_cast<size_t>(core)];
  uint8_t obs = static_cast<uint8_t>(o.obs) & ~(hw::kObsHostMemStall | hw::kObsWeightMemStall);
  const bool hm_taken = out.hm_req_valid && out.hm_req_id == core && in.hm_req_ready;
  if (o.hm_valid && !hm_taken) obs |= hw::kObsHostMemStall;
  const size_t end = std::min(out.wm.size(), static_cast<size_t>((core + 1) * wm_ports_));
  for (size_t p = static_cast<size_t>(core * wm_ports_); p < end; ++p) {
    if (out.wm[p].valid && !in.wm[p].req_ready) obs |= hw::kObsWeightMemStall;
  }
  return obs;
}

void TpuSystemBase::SnapshotRegisters() {
  for (size_t c = 0; c < core_.size(); ++c) {
    std::vector<uint64_t>& regs = core_[c].registers;
    regs.assign(static_cast<size_t>(hw::kRegFirstCounter + hw::kNumCounters), 0);
    for (size_t i = 0; i < regs.size(); ++i) {
      regs[i] = ReadRegister(static_cast<int>(c), static_cast<int>(i));
    }
  }
}

uint64_t TpuSystemBase::ReadRegister(int core, int addr) {
  // The register file is combinational: the new address reaches the model in one delta
  // cycle, its answer the signal in the next. No time passes, so no clock edge either.
  SetRegAddr(core, addr);
  for (int i = 0; i < 3; ++i) sc_core::wait(sc_core::SC_ZERO_TIME);
  return RegData();
}

bool TpuSystemBase::Access(uint64_t addr, uint8_t* data, uint64_t len, bool write, bool debug,
                           uint64_t* cycles) {
  auto mem_access = [&](MemoryModel& m, uint64_t off) {
    if (!m.InRange(off, len)) return false;
    if (write) {
      m.Write(off, data, len);
    } else if (debug) {
      m.Peek(off, data, len);
    } else {
      m.Read(off, data, len);
    }
    *cycles = m.Timing().TransferCycles(len);
    return true;
  };
  if (addr >= kHostMemBase && addr < kHostMemBase + kRegionSize) {
    return mem_access(host_, addr - kHostMemBase);
  }
  if (addr >= kWeightMemBase && addr < kWeightMemBase + kWeightRegionSize) {
    return mem_access(weight_, addr - kWeightMemBase);
  }
  if (addr >= kProgramBase && addr < kProgramBase + kRegionSize) {
    const uint64_t core = (addr - kProgramBase) / kCoreProgramStride;
    const uint64_t off = (addr - kProgramBase) % kCoreProgramStride;
    const uint64_t limit = config_.max_program_words * kInstructionBytes;
    if (core >= programs_.size() || off > limit || len > limit - off) return false;
    std::vector<uint8_t>& program = programs_[core];
    if (write) {
      if (program.size() < off + len) program.resize(off + len);
      std::memcpy(&program[off], data, len);
    } else {
      for (uint64_t i = 0; i < len; ++i) data[i] = off + i < program.size() ? program[off + i] : 0;
    }
    *cycles = (len + kInstructionBytes - 1) / kInstructionBytes;
    return true;
  }
  return false;
}

// START, or a core's WORDS; false for anything else, during a run, or past the program.
bool TpuSystemBase::CsrWrite(uint64_t off, uint64_t value) {
  if (state_ == RunState::kRunning) return false;
  size_t core = 0;
  if (off == kCsrStart) {
    core = 0;
  } else if (off >= kCsrCoreBase && (off - kCsrCoreBase) % kCsrCoreStride == kCsrCoreWords &&
             (off - kCsrCoreBase) / kCsrCoreStride < core_.size()) {
    core = static_cast<size_t>((off - kCsrCoreBase) / kCsrCoreStride);
  } else {
    return false;
  }
  if (value > programs_[core].size() / kInstructionBytes) return false;
  core_[core].words = value;
  if (off == kCsrStart) {
    state_ = RunState::kRunning;
    start_event_.notify(sc_core::SC_ZERO_TIME);
  }
  return true;
}

// The run's and the cores' states, and the cores' registers: live before the first run and
// during one, as the last run left them otherwise.
bool TpuSystemBase::CsrRead(uint64_t off, uint64_t* value, sc_core::sc_time* delay) {
  const uint64_t cores = core_.size();
  if (off == kCsrState) {
    *value = static_cast<uint64_t>(state_);
  } else if (off == kCsrCycles) {
    *value = cycles_;
  } else if (off == kCsrFed) {
    *value = 0;
    for (const CoreRun& r : core_) *value += r.fed;
  } else if (off >= kCsrRegBase && off < kCsrRegBase + kCsrCoreRegStride * cores) {
    const auto core = static_cast<int>((off - kCsrRegBase) / kCsrCoreRegStride);
    const auto reg = static_cast<size_t>((off - kCsrRegBase) % kCsrCoreRegStride / 8);
    const std::vector<uint64_t>& regs = core_[static_cast<size_t>(core)].registers;
    if (state_ == RunState::kIdle || state_ == RunState::kRunning) {
      sc_core::wait(*delay);
      *delay = sc_core::SC_ZERO_TIME;
      *value = ReadRegister(core, static_cast<int>(reg));
    } else {
      *value = reg < regs.size() ? regs[reg] : 0;
    }
  } else if (off >= kCsrCoreBase && off < kCsrCoreBase + kCsrCoreStride * cores) {
    const CoreRun& r = core_[(off - kCsrCoreBase) / kCsrCoreStride];
    switch ((off - kCsrCoreBase) % kCsrCoreStride) {
      case kCsrCoreWords:
        *value = r.words;
        break;
      case kCsrCoreState:
        *value = static_cast<uint64_t>(r.state);
        break;
      case kCsrCoreCycles:
        *value = r.cycles;
        break;
      default:
        *value = r.fed;
        break;
    }
  } else {
    return false;
  }
  return true;
}

void TpuSystemBase::BTransport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const uint64_t addr = trans.get_address();
  uint8_t* data = trans.get_data_ptr();
  const uint64_t len = trans.get_data_length();
  if (!trans.is_read() && !trans.is_write()) {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return;
  }
  if (trans.get_byte_enable_ptr() != nullptr) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (trans.get_streaming_width() < len) {
    trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return;
  }
  const sc_core::sc_time period = clk.period();
  if (addr >= kCsrBase && addr < kCsrBase + kRegionSize) {
    const uint64_t off = addr - kCsrBase;
    if (len != 8 || off % 8 != 0) {
      trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
      return;
    }
    uint64_t value = 0;
    if (trans.is_write()) {
      std::memcpy(&value, data, 8);
      if (!CsrWrite(off, value)) {
        trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
        return;
      }
    } else {
      if (!CsrRead(off, &value, &delay)) {
        trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return;
      }
      std::memcpy(data, &value, 8);
    }
    delay += period;
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  uint64_t cycles = 0;
  if (!Access(addr, data, len, trans.is_write(), false, &cycles)) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  delay += period * static_cast<double>(cycles);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

unsigned int TpuSystemBase::TransportDbg(tlm::tlm_generic_payload& trans) {
  uint64_t cycles = 0;
  if (!trans.is_read() && !trans.is_write()) return 0;
  if (!Access(trans.get_address(), trans.get_data_ptr(), trans.get_data_length(), trans.is_write(),
              true, &cycles)) {
    return 0;
  }
  return trans.get_data_length();
}

}  // namespace tpu::sim
