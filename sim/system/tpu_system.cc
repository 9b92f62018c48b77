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
      config_(config),
      host_("host memory", static_cast<uint64_t>(config.chip.host_mem_bytes),
            {static_cast<uint32_t>(config.chip.host_mem_latency_cycles),
             static_cast<uint32_t>(config.chip.host_mem_bytes_per_cycle)}),
      weight_("weight memory", static_cast<uint64_t>(config.chip.weight_mem_bytes),
              {static_cast<uint32_t>(config.chip.weight_mem_latency_cycles),
               static_cast<uint32_t>(config.chip.weight_mem_bytes_per_cycle)}),
      host_port_(host_, row_bytes_),
      weight_port_(weight_, row_bytes_) {
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
  fed_ = 0;
  cycles_ = 0;
  Inputs in;
  in.hm_size = static_cast<uint32_t>(std::min<uint64_t>(host_.SizeBytes(), 0xffffffffu));
  in.wm_size = weight_.SizeBytes();
  WriteInputs(in);
  SetReset(false);
  wait(clk.negedge_event());
  SetReset(true);

  Outputs out;
  uint64_t quiet = 0;
  uint8_t last_busy = 0, last_obs = 0;
  // When the run ends the chip is still clocked (while the host reads its memories back):
  // from then on it sees no responses, no instructions and memories that accept nothing,
  // rather than the last cycle's inputs held forever (a held response would push rows into
  // a full weight FIFO).
  struct QuietAtEnd {
    TpuSystemBase* system;
    Inputs* in;
    ~QuietAtEnd() {
      in->hm_req_ready = in->wm_req_ready = false;
      in->hm_resp_valid = in->wm_resp_valid = false;
      in->hm_resp_data = in->wm_resp_data = nullptr;
      in->instr_valid = false;
      in->instr = nullptr;
      system->WriteInputs(*in);
    }
  } quiet_at_end{this, &in};
  for (uint64_t cycle = 0;; ++cycle) {
    ReadOutputs(&out);
    // issue_o is the issue stage's state of the last cycle; unit_busy_o is this cycle's.
    if (cycle_hook_ && cycle > 0)
      cycle_hook_(cycle - 1, static_cast<uint8_t>(out.issue), last_busy, last_obs);
    last_busy = static_cast<uint8_t>(out.unit_busy);
    if (out.halted) {
      cycles_ = cycle;
      state_ = out.status == 0 ? RunState::kHalted : RunState::kError;
      SnapshotRegisters();
      return;
    }
    if (fed_ == words_to_run_ && out.idle) {
      cycles_ = cycle;
      state_ = RunState::kNoHalt;
      SnapshotRegisters();
      return;
    }
    bool moved = out.progress;
    in.hm_req_ready = host_port_.Ready(cycle);
    if (out.hm_req_valid && in.hm_req_ready) {
      host_port_.Accept(cycle, out.hm_req_write, out.hm_req_addr, out.hm_req_data.data());
      moved = true;
    }
    in.hm_resp_data = host_port_.Respond(cycle);
    in.hm_resp_valid = in.hm_resp_data != nullptr;
    in.wm_req_ready = weight_port_.Ready(cycle);
    if (out.wm_req_valid && in.wm_req_ready) {
      weight_port_.Accept(cycle, false, out.wm_req_addr, nullptr);
      moved = true;
    }
    in.wm_resp_data = weight_port_.Respond(cycle);
    in.wm_resp_valid = in.wm_resp_data != nullptr;
    in.instr_valid = fed_ < words_to_run_;
    in.instr = in.instr_valid ? &program_[fed_ * kInstructionBytes] : nullptr;
    if (in.instr_valid && out.instr_ready) {
      ++fed_;
      moved = true;
    }
    WriteInputs(in);
    last_obs = CycleObs(out, in);
    quiet = moved ? 0 : quiet + 1;
    if (quiet >= config_.watchdog_cycles) {
      cycles_ = cycle;
      state_ = RunState::kWatchdog;
      SnapshotRegisters();
      stall_.quiet_cycles = quiet;
      stall_.pc = registers_[hw::kRegRetired];
      stall_.opcode = stall_.pc < fed_ ? program_[stall_.pc * kInstructionBytes] : -1;
      stall_.issue = static_cast<uint8_t>(out.issue);
      stall_.busy = static_cast<uint8_t>(out.unit_busy);
      stall_.wait_weights = out.wait_weights;
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
    if (progress_ && (cycle & 0xffff) == 0xffff && words_to_run_ > 0) {
      progress_(static_cast<double>(fed_) / static_cast<double>(words_to_run_));
    }
    wait(clk.negedge_event());
  }
}

// obs_o as the chip's counters see it at the clock edge. Its memory-stall bits are a
// request that is not ready, and the ready inputs of this cycle are written after the
// outputs were read: so they are formed here from this cycle's inputs, as the chip forms
// them once its inputs settle (the request valids are registers, not inputs' functions).
uint8_t TpuSystemBase::CycleObs(const Outputs& out, const Inputs& in) {
  uint8_t obs = static_cast<uint8_t>(out.obs) & ~(hw::kObsHostMemStall | hw::kObsWeightMemStall);
  if (out.hm_req_valid && !in.hm_req_ready) obs |= hw::kObsHostMemStall;
  if (out.wm_req_valid && !in.wm_req_ready) obs |= hw::kObsWeightMemStall;
  return obs;
}

void TpuSystemBase::SnapshotRegisters() {
  registers_.assign(static_cast<size_t>(hw::kRegFirstCounter + hw::kNumCounters), 0);
  for (size_t i = 0; i < registers_.size(); ++i) registers_[i] = ReadRegister(static_cast<int>(i));
}

uint64_t TpuSystemBase::ReadRegister(int addr) {
  // The register file is combinational: the new address reaches the model in one delta
  // cycle, its answer the signal in the next. No time passes, so no clock edge either.
  SetRegAddr(addr);
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
    const uint64_t off = addr - kProgramBase;
    const uint64_t limit = config_.max_program_words * kInstructionBytes;
    if (off > limit || len > limit - off) return false;
    if (write) {
      if (program_.size() < off + len) program_.resize(off + len);
      std::memcpy(&program_[off], data, len);
    } else {
      for (uint64_t i = 0; i < len; ++i)
        data[i] = off + i < program_.size() ? program_[off + i] : 0;
    }
    *cycles = (len + kInstructionBytes - 1) / kInstructionBytes;
    return true;
  }
  return false;
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
      if (off != kCsrStart || state_ == RunState::kRunning ||
          value * kInstructionBytes > program_.size()) {
        trans.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
        return;
      }
      words_to_run_ = value;
      state_ = RunState::kRunning;
      start_event_.notify(sc_core::SC_ZERO_TIME);
    } else {
      if (off == kCsrState) {
        value = static_cast<uint64_t>(state_);
      } else if (off == kCsrCycles) {
        value = cycles_;
      } else if (off == kCsrFed) {
        value = fed_;
      } else if (off >= kCsrRegBase && off < kCsrRegBase + 8 * 256) {
        const auto reg = static_cast<size_t>((off - kCsrRegBase) / 8);
        if (state_ == RunState::kIdle || state_ == RunState::kRunning) {
          // The live register file (the build parameters before the first run).
          sc_core::wait(delay);
          delay = sc_core::SC_ZERO_TIME;
          value = ReadRegister(static_cast<int>(reg));
        } else {
          value = reg < registers_.size() ? registers_[reg] : 0;  // read when the run ended
        }
      } else {
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
