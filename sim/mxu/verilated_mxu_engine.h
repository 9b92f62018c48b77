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

#include "sim/mxu/mxu_engine.h"
#include "sim/mxu/mxu_port_driver.h"
#include "sim/mxu/thread_context.h"
#include "sim/wave/wave_file.h"

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
    ThreadContext thread;
    VerilatedContext& context = thread.context;
    Model model(&context);
    model.eval();
    MxuParams p;
    p.array_dim = static_cast<int>(model.param_array_dim_o);
    p.acc_depth = static_cast<int>(model.param_acc_depth_o);
    p.input_bits = static_cast<int>(model.param_input_width_o);
    model.final();
    return p;
  }

  MxuRunResult Run(MxuWorkload& workload, const RunOptions& options) override {
    ThreadContext thread;
    VerilatedContext& context = thread.context;
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

    MxuPortDriver<ModelPortAccess, Model> driver(workload, options.watchdog_cycles);
    while (driver.Present(m)) {
      const uint64_t cycle = driver.Cycle();
      m.clk_i = 0;
      m.eval();  // settle the ready signals for these inputs
      trace.Dump(cycle, 0);
      if (options.on_cycle) options.on_cycle(cycle);
      driver.Commit(m);
      m.clk_i = 1;
      m.eval();  // the clock edge
      trace.Dump(cycle, 5);
      if (options.progress && (driver.Cycle() & 0xffff) == 0) options.progress(driver.Progress());
    }
    MxuRunResult result = ReadMxuResult<ModelPortAccess>(m, driver.Cycle());
    m.final();
    trace.Commit();
    if (options.progress) options.progress(1.0);
    return result;
  }
};

}  // namespace tpu::sim
