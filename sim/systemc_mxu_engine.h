// Runs the matrix subsystem as a SystemC module (Verilator --sc) clocked by an
// sc_clock under the SystemC kernel, driven by the same MxuSequencer as the C++ engine.
// The SystemC kernel elaborates once per process, so an engine runs once per process.
#pragma once

#include <systemc.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/mxu_engine.h"
#include "sim/mxu_sequencer.h"
#include "sim/port_packing.h"
#include "sim/sc_port_values.h"

namespace tpu::sim {

template <class Model>
class SystemCMxuEngine final : public MxuEngine {
 public:
  std::string Name() const override { return "systemc"; }

  // The SystemC kernel elaborates one model per process, during Run(); the parameters are
  // read back then.
  MxuParams Params() override {
    if (params_.array_dim == 0) {
      throw std::logic_error("the SystemC engine reads its parameters back during Run()");
    }
    return params_;
  }

  MxuRunResult Run(MxuWorkload& workload, const RunOptions& options) override {
    static bool kernel_used = false;
    if (kernel_used) {
      throw std::logic_error("the SystemC kernel can elaborate only once per process");
    }
    kernel_used = true;
    if (!options.trace.path.empty()) {
      throw std::invalid_argument(
          "tracing is done by the C++ engine; drop --engine systemc to write a trace");
    }
    Harness h(workload, options);
    // The driver ends the run with sc_stop(); that is no news worth printing.
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                            sc_core::SC_DO_NOTHING);
    sc_core::sc_start();
    if (h.failure) std::rethrow_exception(h.failure);
    params_ = h.params;
    if (options.progress) options.progress(1.0);
    return MxuRunResult{h.counters, h.params};
  }

 private:
  struct Harness {
    using M = Model;
    M model{"tpu"};
    sc_core::sc_clock clk{"clk", 10, sc_core::SC_NS};
    sc_core::sc_signal<bool> rst_n{"rst_n", true};
    sc_core::sc_signal<bool> w_valid, w_ready, a_valid, a_ready, a_switch, a_accumulate, a_final,
        rd_en, rd_valid, final_valid, error;
    sc_detail::SignalFor<decltype(std::declval<M&>().w_data_i)> w_data;
    sc_detail::SignalFor<decltype(std::declval<M&>().a_data_i)> a_data;
    sc_detail::SignalFor<decltype(std::declval<M&>().a_acc_addr_i)> a_acc_addr;
    sc_detail::SignalFor<decltype(std::declval<M&>().rd_addr_i)> rd_addr;
    sc_detail::SignalFor<decltype(std::declval<M&>().rd_data_o)> rd_data;
    sc_detail::SignalFor<decltype(std::declval<M&>().final_addr_o)> final_addr;
    sc_detail::SignalFor<decltype(std::declval<M&>().param_array_dim_o)> p_dim, p_depth;
    sc_detail::SignalFor<decltype(std::declval<M&>().cnt_cycles_o)> c_cycles, c_stream, c_load,
        c_stall, c_drain, c_idle, c_wrows, c_tiles, c_accw, c_accr;

    MxuWorkload& workload;
    const RunOptions& options;
    MxuCounters counters;
    MxuParams params;
    std::exception_ptr failure;

    Harness(MxuWorkload& w, const RunOptions& o) : workload(w), options(o) {
      model.clk_i(clk);
      model.rst_ni(rst_n);
      model.w_valid_i(w_valid);
      model.w_ready_o(w_ready);
      model.w_data_i(w_data);
      model.a_valid_i(a_valid);
      model.a_ready_o(a_ready);
      model.a_data_i(a_data);
      model.a_switch_i(a_switch);
      model.a_acc_addr_i(a_acc_addr);
      model.a_accumulate_i(a_accumulate);
      model.a_final_i(a_final);
      model.rd_en_i(rd_en);
      model.rd_addr_i(rd_addr);
      model.rd_valid_o(rd_valid);
      model.rd_data_o(rd_data);
      model.final_valid_o(final_valid);
      model.final_addr_o(final_addr);
      model.error_o(error);
      model.param_array_dim_o(p_dim);
      model.param_acc_depth_o(p_depth);
      model.cnt_cycles_o(c_cycles);
      model.cnt_stream_cycles_o(c_stream);
      model.cnt_load_cycles_o(c_load);
      model.cnt_stall_cycles_o(c_stall);
      model.cnt_drain_cycles_o(c_drain);
      model.cnt_idle_cycles_o(c_idle);
      model.cnt_weight_rows_o(c_wrows);
      model.cnt_tiles_o(c_tiles);
      model.cnt_acc_writes_o(c_accw);
      model.cnt_acc_reads_o(c_accr);
      sc_core::sc_spawn([this] { Drive(); });
    }

    void Drive() {
      try {
        DriveCycles();
      } catch (...) {
        failure = std::current_exception();
      }
      sc_core::sc_stop();
    }

    // The clock rises at 0, 10, 20 ns ... Inputs change at the falling edge (5 ns into
    // a cycle) and the handshakes are sampled 2 ns later, before the next rising edge.
    void DriveCycles() {
      using sc_core::wait;
      wait(1, sc_core::SC_NS);
      rst_n.write(false);  // asynchronous reset after the first edge
      wait(clk.negedge_event());
      rst_n.write(true);

      const int dim = workload.ArrayDim();
      MxuSequencer seq(workload, options.watchdog_cycles);
      MxuInputs in;
      MxuRegisteredOutputs out;
      std::vector<uint32_t> words(static_cast<size_t>(dim) + 2);
      std::vector<int32_t> rd_row(static_cast<size_t>(dim));
      uint64_t cycle = 0;
      for (bool first = true;; first = false) {
        if (!first) wait(clk.negedge_event());
        out.rd_valid = rd_valid.read();
        if (out.rd_valid) {
          sc_detail::FromScValue(rd_data.read(), words.data());
          UnpackLanes(words.data(), dim, rd_row.data());
          out.rd_data = rd_row.data();
        }
        out.final_valid = final_valid.read();
        out.final_addr = static_cast<uint32_t>(final_addr.read());
        out.error = error.read();
        seq.Present(out, &in);
        if (seq.Done()) break;

        using WData = std::decay_t<decltype(w_data.read())>;
        using AData = std::decay_t<decltype(a_data.read())>;
        w_valid.write(in.w_valid);
        PackLanes(in.w_data.data(), dim, words.data());
        w_data.write(sc_detail::ToScValue<WData>(words.data()));
        a_valid.write(in.a_valid);
        PackLanes(in.a_data.data(), dim, words.data());
        a_data.write(sc_detail::ToScValue<AData>(words.data()));
        a_switch.write(in.a_switch);
        a_acc_addr.write(in.a_tag.acc_addr);
        a_accumulate.write(in.a_tag.accumulate);
        a_final.write(in.a_tag.final_fold);
        rd_en.write(in.rd_en);
        rd_addr.write(in.rd_addr);

        wait(2, sc_core::SC_NS);  // combinational ready signals settle
        seq.Commit(in, w_ready.read(), a_ready.read());
        ++cycle;
        if (options.progress && (cycle & 0xffff) == 0) options.progress(seq.Progress());
      }
      if (error.read()) throw std::runtime_error("the matrix unit raised its error flag");
      params.array_dim = static_cast<int>(p_dim.read());
      params.acc_depth = static_cast<int>(p_depth.read());
      counters.cycles = c_cycles.read();
      counters.stream_cycles = c_stream.read();
      counters.load_cycles = c_load.read();
      counters.stall_cycles = c_stall.read();
      counters.drain_cycles = c_drain.read();
      counters.idle_cycles = c_idle.read();
      counters.weight_rows = c_wrows.read();
      counters.tiles = c_tiles.read();
      counters.acc_writes = c_accw.read();
      counters.acc_reads = c_accr.read();
    }
  };

  MxuParams params_;
};

}  // namespace tpu::sim
