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

#include "sim/mxu/mxu_engine.h"
#include "sim/mxu/mxu_port_driver.h"
#include "sim/system/sanitizer_stack.h"
#include "sim/system/sc_port_values.h"

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
          "tracing is done by the C++ (Verilator) engine, not the SystemC one");
    }
    Harness h(workload, options);
    // The driver ends the run with sc_stop(); that is no news worth printing.
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                            sc_core::SC_DO_NOTHING);
    sc_core::sc_start();
    ResetSanitizerStack();
    if (h.failure) std::rethrow_exception(h.failure);
    params_ = h.result.params;
    if (options.progress) options.progress(1.0);
    return h.result;
  }

 private:
  // Access to SystemC signals bound to the model's ports.
  struct ScSignalAccess {
    template <class S>
    static uint64_t Get(const S& signal) {
      return static_cast<uint64_t>(signal.read());
    }
    template <class S, class V>
    static void Set(S& signal, V value) {
      signal.write(static_cast<std::decay_t<decltype(signal.read())>>(value));
    }
    template <class S>
    static void GetWords(const S& signal, uint32_t* words) {
      sc_detail::FromScValue(signal.read(), words);
    }
    template <class S>
    static void SetWords(S& signal, const uint32_t* words) {
      signal.write(sc_detail::ToScValue<std::decay_t<decltype(signal.read())>>(words));
    }
  };

// The ports of rtl/tpu_mxu_top.sv other than the clock and the reset.
// clang-format off
#define TPUSIM_MXU_PORTS(X)                                                                   \
  X(w_valid_i) X(w_ready_o) X(w_data_i) X(a_valid_i) X(a_ready_o) X(a_data_i)                 \
  X(a_switch_i) X(a_acc_addr_i) X(a_accumulate_i) X(a_final_i) X(rd_en_i) X(rd_addr_i)        \
  X(rd_valid_o) X(rd_data_o) X(final_valid_o) X(final_addr_o) X(error_o)                      \
  X(param_array_dim_o) X(param_acc_depth_o) X(param_input_width_o) X(cnt_cycles_o)           \
  X(cnt_stream_cycles_o) X(cnt_load_cycles_o) X(cnt_stall_cycles_o) X(cnt_drain_cycles_o) X(cnt_idle_cycles_o)       \
  X(cnt_weight_rows_o) X(cnt_tiles_o) X(cnt_acc_writes_o) X(cnt_acc_reads_o)
  // clang-format on

  // The model with one signal per port, each named like the port it binds.
  struct Harness {
    using M = Model;
    M model{"tpu"};
    sc_core::sc_clock clk{"clk", 10, sc_core::SC_NS};
    sc_core::sc_signal<bool> rst_n{"rst_n", true};
#define TPUSIM_DECLARE_SIGNAL(name) \
  sc_detail::SignalFor<decltype(std::declval<M&>().name)> name{#name};
    TPUSIM_MXU_PORTS(TPUSIM_DECLARE_SIGNAL)
#undef TPUSIM_DECLARE_SIGNAL

    MxuWorkload& workload;
    const RunOptions& options;
    MxuRunResult result;
    std::exception_ptr failure;

    Harness(MxuWorkload& w, const RunOptions& o) : workload(w), options(o) {
      model.clk_i(clk);
      model.rst_ni(rst_n);
#define TPUSIM_BIND_SIGNAL(name) model.name(name);
      TPUSIM_MXU_PORTS(TPUSIM_BIND_SIGNAL)
#undef TPUSIM_BIND_SIGNAL
      sc_core::sc_spawn([this] { Drive(); });
    }
#undef TPUSIM_MXU_PORTS

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

      MxuPortDriver<ScSignalAccess, Harness> driver(workload, options.watchdog_cycles);
      for (bool first = true;; first = false) {
        if (!first) wait(clk.negedge_event());
        if (!driver.Present(*this)) break;
        wait(2, sc_core::SC_NS);  // combinational ready signals settle
        driver.Commit(*this);
        if (options.progress && (driver.Cycle() & 0xffff) == 0) {
          options.progress(driver.Progress());
        }
      }
      result = ReadMxuResult<ScSignalAccess>(*this, driver.Cycle());
    }
  };

  MxuParams params_;
};

}  // namespace tpu::sim
