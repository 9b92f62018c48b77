// Drives the output-stationary teaching model (rtl/tpu_os_top.sv, a Verilated C++ class)
// through C = A x B: tiles of C in row-major order, each fed as K beats back to back,
// results collected as the tile drains. Model is Vtpu_os_teach_n<N>.
#pragma once

#include <verilated.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/mxu/port_packing.h"
#include "sim/mxu/thread_context.h"
#include "sim/teach/os_array_engine.h"

namespace tpu::sim {

template <class Model>
class VerilatedOsEngine final : public OsArrayEngine {
 public:
  OsRunResult Run(const OsOperands& op, const std::function<void(uint64_t)>& on_cycle) override {
    if (op.m < 1 || op.k < 1 || op.n < 1) throw std::invalid_argument("empty product");
    ThreadContext thread;
    VerilatedContext& context = thread.context;
    Model m(&context);
    m.clk_i = 0;
    m.rst_ni = 0;
    m.in_valid_i = 0;
    m.eval();
    m.rst_ni = 1;
    m.eval();
    const int dim = static_cast<int>(m.param_array_dim_o);

    const int64_t tiles_m = (op.m + dim - 1) / dim, tiles_n = (op.n + dim - 1) / dim;
    OsRunResult r;
    r.c.assign(static_cast<size_t>(op.m * op.n), 0);
    r.tiles = static_cast<uint64_t>(tiles_m * tiles_n);

    int64_t fed_tile = 0, beat = 0;  // the next beat to present
    int64_t drained_tile = 0;        // the tile whose rows leave next
    int rows_left = dim;
    std::vector<int8_t> a_lanes(dim), b_lanes(dim);
    std::vector<uint32_t> words((static_cast<size_t>(dim) * 4 + 3) / 4 + 1);
    std::vector<int32_t> out(dim);
    // Nothing moves for longer than a tile's flush and drain: the RTL is stuck.
    const uint64_t watchdog = 4 * static_cast<uint64_t>(dim) + 8;
    uint64_t quiet = 0;

    for (uint64_t cycle = 0; drained_tile < tiles_m * tiles_n; ++cycle) {
      const bool feeding = fed_tile < tiles_m * tiles_n;
      if (feeding) {
        const int64_t i0 = (fed_tile / tiles_n) * dim, j0 = (fed_tile % tiles_n) * dim;
        for (int l = 0; l < dim; ++l) {
          a_lanes[l] = i0 + l < op.m ? op.a[(i0 + l) * op.k + beat] : 0;
          b_lanes[l] = j0 + l < op.n ? op.b[beat * op.n + j0 + l] : 0;
        }
        PackLanes(a_lanes.data(), dim, words.data());
        WritePort(m.a_i, words.data());
        PackLanes(b_lanes.data(), dim, words.data());
        WritePort(m.b_i, words.data());
        m.in_last_i = beat == op.k - 1;
      }
      m.in_valid_i = feeding;
      m.clk_i = 0;
      m.eval();
      if (on_cycle) on_cycle(cycle);
      const bool fire = feeding && m.in_ready_o;
      bool moved = fire;
      if (m.out_valid_o) {
        moved = true;
        ReadPort(m.out_data_o, words.data());
        UnpackLanes(words.data(), dim, out.data());
        const int row = static_cast<int>(m.out_row_o);
        if (row != rows_left - 1)
          throw std::runtime_error("the OS array drained rows out of order");
        const int64_t i0 = (drained_tile / tiles_n) * dim, j0 = (drained_tile % tiles_n) * dim;
        if (i0 + row < op.m) {
          for (int c = 0; c < dim && j0 + c < op.n; ++c) {
            r.c[(i0 + row) * op.n + j0 + c] = out[c];
          }
        }
        if (--rows_left == 0) {
          ++drained_tile;
          rows_left = dim;
        }
      }
      m.clk_i = 1;
      m.eval();
      if (fire && ++beat == op.k) {
        beat = 0;
        ++fed_tile;
      }
      quiet = moved ? 0 : quiet + 1;
      if (quiet > watchdog) {
        throw std::runtime_error("the OS array made no progress for " + std::to_string(quiet) +
                                 " cycles (cycle " + std::to_string(cycle) + ")");
      }
    }
    r.counters.cycles = m.cnt_cycles_o;
    r.counters.beat_cycles = m.cnt_beat_cycles_o;
    r.counters.flush_cycles = m.cnt_flush_cycles_o;
    r.counters.drain_cycles = m.cnt_drain_cycles_o;
    m.final();
    return r;
  }
};

}  // namespace tpu::sim
