// The TPU system in SystemC: the chip (tpu_top, Verilated as a SystemC module), its clock,
// host memory and weight memory with latency and bandwidth, and a TLM-2.0 target socket
// through which host software loads programs and data, starts runs and reads results.
// A watchdog stops a run that makes no progress and names the unit that is stuck.
//
// TLM address map (docs/architecture.md):
//   0x0000_0000  host memory      (host_mem_bytes, at most 1 GiB)
//   0x8000_0000  program          (16-byte instruction words, word 0 first); core c's at
//                + c * 0x0400_0000 on a chip of several cores
//   0xC000_0000  control and status registers, 64 bits each:
//     +0x000 START  write n: reset the chip and run program words 0 .. n-1 (on core 0; each
//                   other core runs the WORDS it was given, 0: none)
//     +0x008 STATE  RunState of the last run
//     +0x010 CYCLES clock cycles of the last run
//     +0x018 FED    instruction words handed to the chip (all cores)
//     +0x100 + 0x800 c + 8 i   core c's register i (status, parameters, counters; the
//                   register map of contract/tpu_contract.toml)
//     +0x10000 + 0x20 c + 0, 8, 0x10, 0x18: core c's WORDS (write before START), STATE,
//                   CYCLES (the cycle it ended in) and FED
//   0x10_0000_0000  weight memory (weight_mem_bytes, at most 64 GiB: TPU v1's 8 GiB of DDR3
//                   fits; both memories are allocated as they are written, so a large
//                   one costs only what a job puts in it)
// When a run ends the system notifies DoneEvent() (its interrupt line). The chip's
// registers are read once, in the cycle the run ends, and register reads return those
// values until the next START: a run that did not halt leaves a chip whose counters would
// otherwise keep counting while the host reads them.
#pragma once

#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <functional>
#include <string>
#include <systemc>
#include <tlm>
#include <vector>

#include "contract/tpu_contract.h"
#include "sim/system/memory_model.h"
#include "sim/system/memory_port.h"
#include "sim/system/stall_info.h"

namespace tpu::sim {

inline constexpr uint64_t kHostMemBase = 0x0000'0000ull;
inline constexpr uint64_t kWeightMemBase = 0x10'0000'0000ull;
inline constexpr uint64_t kWeightRegionSize = 0x10'0000'0000ull;
inline constexpr uint64_t kProgramBase = 0x8000'0000ull;
inline constexpr uint64_t kCsrBase = 0xC000'0000ull;
inline constexpr uint64_t kRegionSize = 0x4000'0000ull;
inline constexpr uint64_t kCsrStart = 0x000;
inline constexpr uint64_t kCsrState = 0x008;
inline constexpr uint64_t kCsrCycles = 0x010;
inline constexpr uint64_t kCsrFed = 0x018;
inline constexpr uint64_t kCsrRegBase = 0x100;
inline constexpr uint64_t kCsrCoreRegStride = 0x800;
inline constexpr uint64_t kCsrCoreBase = 0x10000;
inline constexpr uint64_t kCsrCoreStride = 0x20;
inline constexpr uint64_t kCsrCoreWords = 0x00;
inline constexpr uint64_t kCsrCoreState = 0x08;
inline constexpr uint64_t kCsrCoreCycles = 0x10;
inline constexpr uint64_t kCsrCoreFed = 0x18;
inline constexpr uint64_t kCoreProgramStride = 0x0400'0000ull;
inline constexpr int kMaxCores = 16;
inline constexpr int kInstructionBytes = 16;

enum class RunState : uint64_t {
  kIdle = 0,  // never started
  kRunning = 1,
  kHalted = 2,    // HALT reached, status ok
  kError = 3,     // the chip stopped with an error status
  kWatchdog = 4,  // no progress for watchdog_cycles
  kNoHalt = 5,    // the program ended without HALT and the chip went idle
  kInternal = 6,  // the simulation itself failed (see Message())
};
const char* RunStateName(RunState s);

// The chip (hw::ChipParams: the array size picks the model; the memories' sizes, at most
// 1 GiB of host memory (the TLM region) and 64 GiB of weight memory (kWeightRegionSize),
// latencies and bandwidths) and the system's own limits.
struct TpuSystemConfig {
  hw::ChipParams chip;
  uint64_t watchdog_cycles = 100000;
  uint64_t max_program_words = 1u << 20;
};

class TpuSystemBase : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<TpuSystemBase> socket;
  sc_core::sc_clock clk;

  TpuSystemBase(sc_core::sc_module_name name, const TpuSystemConfig& config);

  int ArrayDim() const { return array_dim_; }
  int Cores() const { return static_cast<int>(core_.size()); }
  // Core c's state and the cycle it ended in, for the last run.
  RunState CoreState(int c) const { return core_[static_cast<size_t>(c)].state; }
  // Bytes of a row: N operands of the chip's format (hw::RowBytes).
  int RowBytes() const { return row_bytes_; }
  // Notified when a run ends (halt, error, watchdog).
  const sc_core::sc_event& DoneEvent() const { return done_event_; }
  RunState State() const { return state_; }
  // Why the simulation itself failed (state kInternal); empty otherwise.
  const std::string& Message() const { return message_; }
  // Where a run that the watchdog stopped was stuck (the first core that had not ended).
  const StallInfo& Stall() const { return stall_; }
  MemoryModel& HostMemory() { return host_; }
  MemoryModel& WeightMemory() { return weight_; }
  // Called every 65,536 cycles of a run with the fraction of instructions handed over.
  void SetProgress(std::function<void(double)> progress) { progress_ = std::move(progress); }
  // Called for every cycle of a run that ends in a clock edge, for each core while it runs
  // (its cycles 0 .. its end - 1; none for a core not started), with what its
  // controller's issue stage did in it (hw::Issue), the units that had work (bits
  // hw::kUnit*), its obs_o (what the matrix unit did, which memories stalled:
  // rtl/tpu_top.sv) and the matrix units that had work (mxu_busy_o, bit m: unit m).
  using CycleHook = std::function<void(int core, uint64_t cycle, uint8_t issue, uint8_t busy,
                                       uint8_t obs, uint8_t mxus)>;
  void SetCycleHook(CycleHook hook) { cycle_hook_ = std::move(hook); }

  // FST tracing of every signal of the chip over a window of cycles, counted across all
  // runs of this system (run 2's cycle 0 follows run 1's last). Call after elaboration
  // (sc_start(SC_ZERO_TIME)). Each cycle c is 10 ns of trace time: the clock is low from
  // 10c (inputs applied) and high from 10c + 5 (registers updated).
  void StartTrace(const std::string& fst_path, uint64_t start_cycle, uint64_t end_cycle) {
    OpenTrace(fst_path);
    tracing_ = true;
    trace_start_ = start_cycle;
    trace_end_ = end_cycle;
  }
  void StopTrace() {
    if (tracing_) CloseTrace();
    tracing_ = false;
  }

 protected:
  // A core's own outputs; hm_valid is its host-memory request before arbitration.
  struct CoreOutputs {
    bool instr_ready = false, hm_valid = false;
    bool halted = false, idle = false, progress = false, wait_weights = false;
    uint32_t status = 0, unit_busy = 0, mxu_busy = 0, issue = 0, obs = 0;
  };
  // A request on a weight-memory port: each core has one per matrix unit's weight DMA and
  // one for its host DMA (read_hbm, write_hbm): core c's unit m is port c x (units + 1) + m,
  // its host DMA port c x (units + 1) + units, the one port that writes (a row's bytes at
  // `data`, valid until the next ReadOutputs).
  struct WeightRequest {
    bool valid = false;
    uint64_t addr = 0;
    bool write = false;
    const uint8_t* data = nullptr;
  };
  // The chip's outputs: its cores', its weight DMAs' requests and the host-memory request
  // (tagged with its core).
  struct Outputs {
    std::vector<CoreOutputs> core;
    std::vector<WeightRequest> wm;
    std::vector<uint8_t> wm_data;  // the rows the host DMAs write (WeightRequest::data)
    bool hm_req_valid = false, hm_req_write = false;
    uint32_t hm_req_addr = 0;
    std::vector<uint8_t> hm_req_data;
    int hm_req_id = 0;
  };
  // A weight-memory port: its request taken, a read row presented.
  struct WeightAnswer {
    bool req_ready = false, resp_valid = false;
    const uint8_t* resp_data = nullptr;  // a row's bytes
  };
  struct Inputs {
    std::vector<const uint8_t*> instr;  // per core: the 16-byte word offered, or nullptr
    std::vector<WeightAnswer> wm;       // per weight-memory port (as Outputs::wm)
    uint32_t hm_size = 0;
    uint64_t wm_size = 0;
    bool hm_req_ready = false, hm_resp_valid = false;
    int hm_resp_id = 0;
    const uint8_t* hm_resp_data = nullptr;  // a row's bytes
  };
  virtual void SetReset(bool rst_n) = 0;
  virtual void ReadOutputs(Outputs* out) = 0;
  virtual void WriteInputs(const Inputs& in) = 0;
  virtual void SetRegAddr(int core, int addr) = 0;
  virtual void OpenTrace(const std::string& fst_path) = 0;
  virtual void DumpTrace(uint64_t time) = 0;
  virtual void CloseTrace() = 0;
  virtual uint64_t RegData() = 0;

 private:
  // A core's part of a run.
  struct CoreRun {
    uint64_t words = 0, fed = 0, cycles = 0;
    RunState state = RunState::kIdle;
    std::vector<uint64_t> registers;  // read when the run ended
  };

  void EngineThread();
  void RunProgram();
  // Ends the cores that halted or ran out of program; true when none is left running.
  bool EndCores(const Outputs& out, uint64_t cycle);
  RunState ChipState() const;
  // The memory ports' side of a cycle: accepts a request, presents a response.
  bool AnswerMemories(const Outputs& out, uint64_t cycle, Inputs* in);
  void StopOnWatchdog(const Outputs& out, uint64_t cycle, uint64_t quiet);
  // From a thread: lets the combinational read settle (delta cycles, no clock edge).
  uint64_t ReadRegister(int core, int addr);
  uint8_t CycleObs(const Outputs& out, const Inputs& in, int core) const;
  void SnapshotRegisters();
  bool CsrWrite(uint64_t off, uint64_t value);
  bool CsrRead(uint64_t off, uint64_t* value, sc_core::sc_time* delay);
  void BTransport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int TransportDbg(tlm::tlm_generic_payload& trans);
  // Memory-mapped access to host, weight or program memory; false when unmapped.
  bool Access(uint64_t addr, uint8_t* data, uint64_t len, bool write, bool debug, uint64_t* cycles);

  int array_dim_;
  int row_bytes_;
  int wm_ports_;  // weight-memory ports per core: its matrix units' weight DMAs', its host DMA's
  TpuSystemConfig config_;
  MemoryModel host_, weight_;
  MemoryPort host_port_, weight_port_;
  std::vector<std::vector<uint8_t>> programs_;  // per core
  std::vector<CoreRun> core_;
  uint64_t cycles_ = 0;
  RunState state_ = RunState::kIdle;
  std::string message_;
  sc_core::sc_event start_event_, done_event_;
  std::function<void(double)> progress_;
  CycleHook cycle_hook_;
  StallInfo stall_;
  bool tracing_ = false;
  uint64_t trace_start_ = 0, trace_end_ = 0, trace_base_ = 0;
};

}  // namespace tpu::sim
