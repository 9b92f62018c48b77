// A Verilated model's own context, made this thread's context for as long as it lives.
// Verilator's VPI (vpi_handle_by_name: the teaching probes, sim/teach/vpi_signal.h) looks
// names up in the thread's context, and a thread's context is otherwise the first one the
// thread met, which a model run earlier may have destroyed: its names then lead into freed
// memory (found by `tpusim teach --dtype bf16`, whose frames showed garbage while the same
// recording in a test binary was right).
#pragma once

#include <verilated.h>

namespace tpu::sim {

struct ThreadContext {
  VerilatedContext context;
  ThreadContext() { Verilated::threadContextp(&context); }
  // Back to Verilator's default context (never destroyed).
  ~ThreadContext() { Verilated::threadContextp(Verilated::defaultContextp()); }
  ThreadContext(const ThreadContext&) = delete;
  ThreadContext& operator=(const ThreadContext&) = delete;
};

}  // namespace tpu::sim
