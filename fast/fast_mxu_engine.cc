// The matrix subsystem in plain C++ (see fast_mxu_engine.h); each block mirrors the RTL
// file it names.
#include "fast/fast_mxu_engine.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "host/nn/bf16.h"
#include "sim/mxu/mxu_sequencer.h"

namespace tpu::fast {
namespace {

// The result row of an activation row x entering the array with weights w (int8), or w_f
// (bf16, widened): each column's sum down all N rows, in the PEs' order (for int8 the order
// does not matter; for bf16 it does: docs/bf16.md).
void RowProduct(int64_t n, bool bf16, const int8_t* x, const int8_t* w, const float* w_f,
                int32_t* row) {
  if (bf16) {
    nn::Bf16TileProductF(1, n, n, n, reinterpret_cast<const uint16_t*>(x), n, w_f, n,
                         reinterpret_cast<uint32_t*>(row), n, /*accumulate=*/false);
    return;
  }
  std::fill(row, row + n, 0);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t xr = x[r];
    if (xr == 0) continue;
    const int8_t* wr = &w[r * n];
    for (int64_t j = 0; j < n; ++j) {
      row[j] = static_cast<int32_t>(static_cast<uint32_t>(row[j]) +
                                    static_cast<uint32_t>(xr * int32_t{wr[j]}));
    }
  }
}

}  // namespace

FastMxuEngine::FastMxuEngine(int array_dim, int acc_depth, int input_bits) {
  if (array_dim < 2 || array_dim > 512) {
    throw std::invalid_argument("array size " + std::to_string(array_dim) +
                                " is out of range for the fast engine; use 2 to 512");
  }
  if (acc_depth < 2) throw std::invalid_argument("the accumulators need at least 2 rows");
  if (input_bits != 8 && input_bits != 16)
    throw std::invalid_argument("operands are 8 (int8) or 16 (bf16) bits wide");
  params_.array_dim = array_dim;
  params_.acc_depth = acc_depth;
  params_.input_bits = input_bits;
}

sim::MxuRunResult FastMxuEngine::Run(sim::MxuWorkload& workload, const sim::RunOptions& options) {
  if (!options.trace.path.empty()) {
    throw std::invalid_argument(
        "the fast matrix engine writes no waveforms: they come from the RTL engines");
  }
  const int64_t n = params_.array_dim;
  if (workload.ArrayDim() != n) throw std::invalid_argument("workload and engine sizes differ");
  const bool bf16 = params_.input_bits == 16;
  if (workload.OperandBytes() != params_.input_bits / 8) {
    throw std::invalid_argument(std::string("the workload's operands are ") +
                                (workload.OperandBytes() == 2 ? "bf16" : "int8") +
                                " but this engine was made for " + (bf16 ? "bf16" : "int8"));
  }
  const int64_t eb = workload.OperandBytes();
  const uint64_t latency = 2 * static_cast<uint64_t>(n);
  const auto depth = static_cast<uint32_t>(params_.acc_depth);
  // Addresses are clog2(depth) bits wide in the RTL: wider values wrap.
  uint32_t addr_mask = 1;
  while (addr_mask < depth - 1) addr_mask = addr_mask * 2 + 1;

  // tpu_mxu.sv: shadow control and weights; tpu_accumulators.sv: the memory and read port.
  bool shadow_full = false;
  int64_t wr_row = 0;
  std::vector<int8_t> shadow(static_cast<size_t>(n * n * eb), 0), active(shadow);
  std::vector<float> active_f(bf16 ? static_cast<size_t>(n * n) : 0);  // bf16: widened once
  std::vector<int32_t> acc(static_cast<size_t>(depth) * n, 0);
  bool rd_valid_q = false, final_valid_q = false, error_q = false;
  uint32_t final_addr_q = 0;
  std::vector<int32_t> rd_data(static_cast<size_t>(n), 0);
  // Rows in flight: entry cycle, tag and result, in order.
  struct Flight {
    uint64_t cycle = 0;
    sim::RowTag tag;
  };
  const size_t slots = static_cast<size_t>(latency) + 1;
  std::vector<Flight> flight(slots);
  std::vector<int32_t> results(slots * static_cast<size_t>(n));
  size_t head = 0, count = 0;

  sim::MxuSequencer seq(workload, options.watchdog_cycles);
  sim::MxuInputs in;
  sim::MxuRegisteredOutputs out;
  sim::MxuRunResult result;
  sim::MxuCounters& c = result.counters;
  result.params = params_;
  uint64_t cycle = 0;
  for (;;) {
    out.rd_valid = rd_valid_q;
    out.rd_data = rd_data.data();
    out.final_valid = final_valid_q;
    out.final_addr = final_addr_q;
    out.error = error_q;
    seq.Present(out, &in);
    if (seq.Done()) break;

    const bool a_ready = !in.a_switch || shadow_full;
    const bool a_fire = in.a_valid && a_ready;
    const bool switch_fire = a_fire && in.a_switch;
    const bool w_ready = !shadow_full || switch_fire;
    const bool w_fire = in.w_valid && w_ready;
    const bool out_valid = count != 0 && flight[head].cycle + latency == cycle;
    if (options.on_cycle) options.on_cycle(cycle);
    seq.Commit(in, w_ready, a_ready);

    // tpu_mxu_counters.sv
    ++c.cycles;
    if (a_fire)
      ++c.stream_cycles;
    else if (w_fire)
      ++c.load_cycles;
    else if (in.a_valid)
      ++c.stall_cycles;
    else if (count != 0 || in.rd_en)
      ++c.drain_cycles;
    else
      ++c.idle_cycles;
    c.weight_rows += w_fire;
    c.tiles += switch_fire;
    c.acc_writes += out_valid;
    c.acc_reads += in.rd_en;

    // The clock edge. Accumulators: the read port sees the memory before this edge's write.
    const uint32_t rd_addr = in.rd_addr & addr_mask;
    const bool rd_in_range = rd_addr < depth;
    rd_valid_q = in.rd_en && rd_in_range;
    if (rd_valid_q) {
      std::memcpy(rd_data.data(), &acc[static_cast<size_t>(rd_addr) * n], sizeof(int32_t) * n);
    }
    bool wr_error = false;
    final_valid_q = false;
    if (out_valid) {
      const sim::RowTag& tag = flight[head].tag;
      const int32_t* row = &results[head * static_cast<size_t>(n)];
      const uint32_t addr = tag.acc_addr & addr_mask;
      if (addr < depth) {
        int32_t* dst = &acc[static_cast<size_t>(addr) * n];
        for (int64_t j = 0; j < n; ++j) {
          const auto old_v = static_cast<uint32_t>(dst[j]), v = static_cast<uint32_t>(row[j]);
          const uint32_t sum = bf16 ? nn::Fp32Add(old_v, v) : old_v + v;
          dst[j] = static_cast<int32_t>(tag.accumulate ? sum : v);
        }
        final_valid_q = tag.final_fold;
      } else {
        wr_error = true;
      }
      final_addr_q = addr;
      head = head + 1 == slots ? 0 : head + 1;
      --count;
    }
    if ((out_valid && wr_error) || (in.rd_en && !rd_in_range)) error_q = true;
    // The matrix unit: a row entering with the switch bit multiplies with the shadow tile,
    // which the next tile's rows can only overwrite from this edge on.
    if (switch_fire) {
      active = shadow;
      if (bf16)
        nn::WidenBf16(n, n, reinterpret_cast<const uint16_t*>(active.data()), n, active_f.data());
      shadow_full = false;
    }
    if (a_fire) {
      size_t tail = head + count;
      if (tail >= slots) tail -= slots;
      flight[tail] = {cycle, in.a_tag};
      RowProduct(n, bf16, in.a_data.data(), active.data(), active_f.data(),
                 &results[tail * static_cast<size_t>(n)]);
      ++count;
    }
    if (w_fire) {
      std::memcpy(&shadow[static_cast<size_t>(wr_row * n * eb)], in.w_data.data(),
                  static_cast<size_t>(n * eb));
      if (wr_row == n - 1) {
        wr_row = 0;
        shadow_full = true;
      } else {
        ++wr_row;
      }
    }
    ++cycle;
    if (options.progress && (cycle & 0xffff) == 0) options.progress(seq.Progress());
  }
  if (error_q) throw std::runtime_error("the matrix unit raised its error flag");
  if (options.progress) options.progress(1.0);
  return result;
}

}  // namespace tpu::fast
