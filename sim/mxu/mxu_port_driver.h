// The MxuSequencer on the ports of the matrix subsystem (rtl/tpu_mxu_top.sv), one cycle at
// a time, for both ways of reaching those ports: the fields of a C++ Verilated model
// (ModelPortAccess, sim/mxu/verilated_mxu_engine.h) and SystemC signals bound to a Verilator
// --sc model (ScSignalAccess, sim/mxu/systemc_mxu_engine.h). Ports is any object with members
// named like the RTL's ports (w_valid_i, rd_data_o, cnt_cycles_o, ...); Access says how to
// read and write one of them. The engines differ only in how they clock the model.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/mxu/mxu_engine.h"
#include "sim/mxu/mxu_sequencer.h"
#include "sim/mxu/port_packing.h"

namespace tpu::sim {

// Access to the fields of a C++ Verilated model: plain values, VlWide above 64 bits.
struct ModelPortAccess {
  template <class P>
  static uint64_t Get(const P& port) {
    return static_cast<uint64_t>(port);
  }
  template <class P, class V>
  static void Set(P& port, V value) {
    port = value;
  }
  template <class P>
  static void GetWords(const P& port, uint32_t* words) {
    ReadPort(port, words);
  }
  template <class P>
  static void SetWords(P& port, const uint32_t* words) {
    WritePort(port, words);
  }
};

template <class Access, class Ports>
class MxuPortDriver {
 public:
  MxuPortDriver(MxuWorkload& workload, uint64_t watchdog_cycles)
      : seq_(workload, watchdog_cycles),
        dim_(workload.ArrayDim()),
        row_bytes_(workload.ArrayDim() * workload.OperandBytes()),
        words_(static_cast<size_t>(dim_) + 2),
        rd_row_(static_cast<size_t>(dim_)) {}

  // Takes the registered outputs of the last clock edge and drives this cycle's inputs.
  // Returns false, driving nothing, once every result row has been read.
  bool Present(Ports& p) {
    if (cycle_ == 0) CheckOperandWidth(static_cast<int>(Access::Get(p.param_input_width_o)));
    out_.rd_valid = Access::Get(p.rd_valid_o);
    if (out_.rd_valid) {
      Access::GetWords(p.rd_data_o, words_.data());
      UnpackLanes(words_.data(), dim_, rd_row_.data());
      out_.rd_data = rd_row_.data();
    }
    out_.final_valid = Access::Get(p.final_valid_o);
    out_.final_addr = static_cast<uint32_t>(Access::Get(p.final_addr_o));
    out_.error = Access::Get(p.error_o);
    seq_.Present(out_, &in_);
    if (seq_.Done()) return false;

    Access::Set(p.w_valid_i, in_.w_valid);
    PackLanes(in_.w_data.data(), row_bytes_, words_.data());
    Access::SetWords(p.w_data_i, words_.data());
    Access::Set(p.a_valid_i, in_.a_valid);
    PackLanes(in_.a_data.data(), row_bytes_, words_.data());
    Access::SetWords(p.a_data_i, words_.data());
    Access::Set(p.a_switch_i, in_.a_switch);
    Access::Set(p.a_acc_addr_i, in_.a_tag.acc_addr);
    Access::Set(p.a_accumulate_i, in_.a_tag.accumulate);
    Access::Set(p.a_final_i, in_.a_tag.final_fold);
    Access::Set(p.rd_en_i, in_.rd_en);
    Access::Set(p.rd_addr_i, in_.rd_addr);
    return true;
  }

  // Records the handshakes that complete at this cycle's edge; call once the ready signals
  // have settled for the inputs Present() drove.
  void Commit(Ports& p) {
    seq_.Commit(in_, Access::Get(p.w_ready_o), Access::Get(p.a_ready_o));
    ++cycle_;
  }

  uint64_t Cycle() const { return cycle_; }

  // A workload of one number format on a model built for the other is a usage error.
  void CheckOperandWidth(int model_bits) const {
    const int want = 8 * row_bytes_ / dim_;
    if (model_bits == want) return;
    throw std::invalid_argument(std::string("the workload's operands are ") +
                                (want == 16 ? "bf16" : "int8") +
                                " but this RTL model was built for " +
                                (model_bits == 16 ? "bf16" : "int8") + " (docs/bf16.md)");
  }
  double Progress() const { return seq_.Progress(); }

 private:
  MxuSequencer seq_;
  int dim_;
  int row_bytes_;  // an operand row: ArrayDim x OperandBytes()
  MxuInputs in_;
  MxuRegisteredOutputs out_;
  std::vector<uint32_t> words_;
  std::vector<int32_t> rd_row_;
  uint64_t cycle_ = 0;
};

// The parameters and counters the model reports after a run; checks that the RTL counted
// the cycles the driver clocked and that it raised no error.
template <class Access, class Ports>
MxuRunResult ReadMxuResult(Ports& p, uint64_t driven_cycles) {
  if (Access::Get(p.error_o)) throw std::runtime_error("the matrix unit raised its error flag");
  MxuRunResult r;
  r.params.array_dim = static_cast<int>(Access::Get(p.param_array_dim_o));
  r.params.acc_depth = static_cast<int>(Access::Get(p.param_acc_depth_o));
  r.params.input_bits = static_cast<int>(Access::Get(p.param_input_width_o));
  MxuCounters& c = r.counters;
  c.cycles = Access::Get(p.cnt_cycles_o);
  c.stream_cycles = Access::Get(p.cnt_stream_cycles_o);
  c.load_cycles = Access::Get(p.cnt_load_cycles_o);
  c.stall_cycles = Access::Get(p.cnt_stall_cycles_o);
  c.drain_cycles = Access::Get(p.cnt_drain_cycles_o);
  c.idle_cycles = Access::Get(p.cnt_idle_cycles_o);
  c.weight_rows = Access::Get(p.cnt_weight_rows_o);
  c.tiles = Access::Get(p.cnt_tiles_o);
  c.acc_writes = Access::Get(p.cnt_acc_writes_o);
  c.acc_reads = Access::Get(p.cnt_acc_reads_o);
  if (driven_cycles != c.cycles) {
    throw std::logic_error("harness counted " + std::to_string(driven_cycles) +
                           " cycles but the RTL counted " + std::to_string(c.cycles));
  }
  return r;
}

}  // namespace tpu::sim
