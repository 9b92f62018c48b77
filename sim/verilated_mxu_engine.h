// Runs the matrix subsystem as a plain C++ Verilated model: the fast path, used by the
// CLI, the tests and the benchmarks. Model is a Verilator class built from
// rtl/tpu_mxu_top.sv (one per array size).
#pragma once

#include <verilated.h>
#include <verilated_fst_c.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/mxu_engine.h"
#include "sim/mxu_sequencer.h"
#include "sim/port_packing.h"
#include "sim/wave_file.h"

namespace tpu::sim {

// Whether the model was built with FST tracing (verilate(... TRACE_FST)).
template <class M, class = void>
struct HasFstTrace : std::false_type {};
template <class M>
struct HasFstTrace<
    M, std::void_t<decltype(std::declval<M&>().trace(static_cast<VerilatedFstC*>(nullptr), 0))>>
    : std::true_type {};

// Writes the model's waveform over a cycle window (models built with TRACE_FST).
template <class Model, bool kCanTrace = HasFstTrace<Model>::value>
class ModelTrace {
 public:
  void Open(Model& m, const TraceOptions& o) {
    if (o.path.empty()) return;
    start_ = o.start_cycle;
    end_ = o.end_cycle;
    wave_.emplace(o.path);
    fst_ = std::make_unique<VerilatedFstC>();
    m.trace(fst_.get(), 99);
    fst_->set_time_unit("1ns");
    fst_->set_time_resolution("1ns");
    fst_->open(wave_->FstPath().c_str());
    if (!fst_->isOpen()) {
      throw std::runtime_error("cannot open trace file '" + wave_->FstPath() + "'");
    }
  }
  // Ten time units a cycle: the clock is low from 0 and high from 5.
  void Dump(uint64_t cycle, uint64_t phase) {
    if (fst_ && cycle >= start_ && cycle <= end_) fst_->dump(cycle * 10 + phase);
  }
  void Commit() {
    if (!fst_) return;
    fst_->close();
    wave_->Commit();
  }

 private:
  uint64_t start_ = 0, end_ = 0;
  std::optional<WaveFile> wave_;
  std::unique_ptr<VerilatedFstC> fst_;
};

template <class Model>
class ModelTrace<Model, false> {
 public:
  void Open(Model&, const TraceOptions& o) {
    if (!o.path.empty()) throw std::invalid_argument("this RTL model was built without tracing");
  }
  void Dump(uint64_t, uint64_t) {}
  void Commit() {}
};

template <class Model>
class VerilatedMxuEngine final : public MxuEngine {
 public:
  std::string Name() const override { return "rtl"; }

  MxuParams Params() override {
    VerilatedContext context;
    Model model(&context);
    model.eval();
    MxuParams p;
    p.array_dim = static_cast<int>(model.param_array_dim_o);
    p.acc_depth = static_cast<int>(model.param_acc_depth_o);
    model.final();
    return p;
  }

  MxuRunResult Run(MxuWorkload& workload, const RunOptions& options) override {
    VerilatedContext context;
    const bool tracing = !options.trace.path.empty();
    context.traceEverOn(tracing);
    Model m(&context);

    ModelTrace<Model> trace;
    trace.Open(m, options.trace);

    // Reset: one clock edge with rst_ni low.
    m.clk_i = 0;
    m.rst_ni = 0;
    m.w_valid_i = 0;
    m.a_valid_i = 0;
    m.rd_en_i = 0;
    m.eval();
    m.clk_i = 1;
    m.eval();
    m.clk_i = 0;
    m.rst_ni = 1;
    m.eval();

    const int dim = workload.ArrayDim();
    MxuSequencer seq(workload, options.watchdog_cycles);
    MxuInputs in;
    MxuRegisteredOutputs out;
    std::vector<uint32_t> words(static_cast<size_t>(dim) + 2);
    std::vector<int32_t> rd_row(static_cast<size_t>(dim));
    uint64_t cycle = 0;

    for (;;) {
      // Registered outputs from the last edge.
      out.rd_valid = m.rd_valid_o;
      if (out.rd_valid) {
        ReadPort(m.rd_data_o, words.data());
        UnpackLanes(words.data(), dim, rd_row.data());
        out.rd_data = rd_row.data();
      }
      out.final_valid = m.final_valid_o;
      out.final_addr = m.final_addr_o;
      out.error = m.error_o;
      seq.Present(out, &in);
      if (seq.Done()) break;

      m.w_valid_i = in.w_valid;
      PackLanes(in.w_data.data(), dim, words.data());
      WritePort(m.w_data_i, words.data());
      m.a_valid_i = in.a_valid;
      PackLanes(in.a_data.data(), dim, words.data());
      WritePort(m.a_data_i, words.data());
      m.a_switch_i = in.a_switch;
      m.a_acc_addr_i = in.a_tag.acc_addr;
      m.a_accumulate_i = in.a_tag.accumulate;
      m.a_final_i = in.a_tag.final_fold;
      m.rd_en_i = in.rd_en;
      m.rd_addr_i = in.rd_addr;

      m.clk_i = 0;
      m.eval();  // settle the ready signals for these inputs
      trace.Dump(cycle, 0);
      if (options.on_cycle) options.on_cycle(cycle);
      seq.Commit(in, m.w_ready_o, m.a_ready_o);
      m.clk_i = 1;
      m.eval();  // the clock edge
      trace.Dump(cycle, 5);
      ++cycle;

      if (options.progress && (cycle & 0xffff) == 0) options.progress(seq.Progress());
    }
    if (m.error_o) throw std::runtime_error("the matrix unit raised its error flag");

    MxuRunResult result;
    result.params.array_dim = static_cast<int>(m.param_array_dim_o);
    result.params.acc_depth = static_cast<int>(m.param_acc_depth_o);
    MxuCounters& c = result.counters;
    c.cycles = m.cnt_cycles_o;
    c.stream_cycles = m.cnt_stream_cycles_o;
    c.load_cycles = m.cnt_load_cycles_o;
    c.stall_cycles = m.cnt_stall_cycles_o;
    c.drain_cycles = m.cnt_drain_cycles_o;
    c.idle_cycles = m.cnt_idle_cycles_o;
    c.weight_rows = m.cnt_weight_rows_o;
    c.tiles = m.cnt_tiles_o;
    c.acc_writes = m.cnt_acc_writes_o;
    c.acc_reads = m.cnt_acc_reads_o;
    if (cycle != c.cycles) {
      throw std::logic_error("harness counted " + std::to_string(cycle) +
                             " cycles but the RTL counted " + std::to_string(c.cycles));
    }
    m.final();
    trace.Commit();
    if (options.progress) options.progress(1.0);
    return result;
  }
};

}  // namespace tpu::sim
