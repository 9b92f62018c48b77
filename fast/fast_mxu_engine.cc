// The matrix subsystem in plain C++ (see fast_mxu_engine.h); each block mirrors the RTL
// file it names.
#include "fast/fast_mxu_engine.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "arith/bf16.h"
#include "sim/mxu/mxu_sequencer.h"

namespace tpu::fast {
namespace {

// The result row of an activation row x entering the array with weights w (int8), or w_f
// (bf16, widened): each column's sum down all N rows, in the PEs' order (for int8 the order
// does not matter; for bf16 it does: docs/bf16.md).
void RowProduct(int64_t n, bool bf16, const int8_t* x, const int8_t* w, const float* w_f,
                int32_t* row) {
  if (bf16) {
    arith::Bf16TileProductF(1, n, n, n, reinterpret_cast<const uint16_t*>(x), n, w_f, n,
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

namespace {

// tpu_mxu_counters.sv: one cycle's category, and its events.
void CountCycle(const sim::MxuInputs& in, bool a_fire, bool w_fire, bool switch_fire,
                bool out_valid, bool in_flight, sim::MxuCounters* c) {
  ++c->cycles;
  if (a_fire)
    ++c->stream_cycles;
  else if (w_fire)
    ++c->load_cycles;
  else if (in.a_valid)
    ++c->stall_cycles;
  else if (in_flight || in.rd_en)
    ++c->drain_cycles;
  else
    ++c->idle_cycles;
  c->weight_rows += w_fire;
  c->tiles += switch_fire;
  c->acc_writes += out_valid;
  c->acc_reads += in.rd_en;
}

// The registers of the matrix subsystem, edge by edge: tpu_mxu.sv's shadow control and
// weights, the rows in flight through the array, and tpu_accumulators.sv's memory and read
// port.
class MxuState {
 public:
  explicit MxuState(const sim::MxuParams& p, int64_t eb)
      : n_(p.array_dim),
        eb_(eb),
        bf16_(p.input_bits == 16),
        latency_(2 * static_cast<uint64_t>(n_)),
        depth_(static_cast<uint32_t>(p.acc_depth)),
        shadow_(static_cast<size_t>(n_ * n_ * eb), 0),
        active_(shadow_),
        active_f_(bf16_ ? static_cast<size_t>(n_ * n_) : 0),
        acc_(static_cast<size_t>(depth_) * n_, 0),
        rd_data_(static_cast<size_t>(n_), 0),
        slots_(static_cast<size_t>(latency_) + 1),
        flight_(slots_),
        results_(slots_ * static_cast<size_t>(n_)) {
    // Addresses are clog2(depth) bits wide in the RTL: wider values wrap.
    while (addr_mask_ < depth_ - 1) addr_mask_ = addr_mask_ * 2 + 1;
  }

  void Outputs(sim::MxuRegisteredOutputs* out) const {
    out->rd_valid = rd_valid_q_;
    out->rd_data = rd_data_.data();
    out->final_valid = final_valid_q_;
    out->final_addr = final_addr_q_;
    out->error = error_q_;
  }
  bool ShadowFull() const { return shadow_full_; }
  bool InFlight() const { return count_ != 0; }
  // The oldest row in flight leaves the array this cycle.
  bool OutValid(uint64_t cycle) const {
    return count_ != 0 && flight_[head_].cycle + latency_ == cycle;
  }
  bool Error() const { return error_q_; }

  // The clock edge ending this cycle.
  void Edge(const sim::MxuInputs& in, bool a_fire, bool switch_fire, bool w_fire, bool out_valid,
            uint64_t cycle) {
    AccumulatorEdge(in, out_valid);
    ArrayEdge(in, a_fire, switch_fire, w_fire, cycle);
  }

 private:
  // The read port sees the memory before this edge's write.
  void AccumulatorEdge(const sim::MxuInputs& in, bool out_valid) {
    const uint32_t rd_addr = in.rd_addr & addr_mask_;
    const bool rd_in_range = rd_addr < depth_;
    rd_valid_q_ = in.rd_en && rd_in_range;
    if (rd_valid_q_) {
      std::memcpy(rd_data_.data(), &acc_[static_cast<size_t>(rd_addr) * n_], sizeof(int32_t) * n_);
    }
    bool wr_error = false;
    final_valid_q_ = false;
    if (out_valid) {
      const sim::RowTag& tag = flight_[head_].tag;
      const int32_t* row = &results_[head_ * static_cast<size_t>(n_)];
      const uint32_t addr = tag.acc_addr & addr_mask_;
      if (addr < depth_) {
        int32_t* dst = &acc_[static_cast<size_t>(addr) * n_];
        for (int64_t j = 0; j < n_; ++j) {
          const auto old_v = static_cast<uint32_t>(dst[j]), v = static_cast<uint32_t>(row[j]);
          const uint32_t sum = bf16_ ? arith::Fp32Add(old_v, v) : old_v + v;
          dst[j] = static_cast<int32_t>(tag.accumulate ? sum : v);
        }
        final_valid_q_ = tag.final_fold;
      } else {
        wr_error = true;
      }
      final_addr_q_ = addr;
      head_ = head_ + 1 == slots_ ? 0 : head_ + 1;
      --count_;
    }
    if ((out_valid && wr_error) || (in.rd_en && !rd_in_range)) error_q_ = true;
  }

  // A row entering with the switch bit multiplies with the shadow tile, which the next
  // tile's rows can only overwrite from this edge on.
  void ArrayEdge(const sim::MxuInputs& in, bool a_fire, bool switch_fire, bool w_fire,
                 uint64_t cycle) {
    if (switch_fire) {
      active_ = shadow_;
      if (bf16_) {
        arith::WidenBf16(n_, n_, reinterpret_cast<const uint16_t*>(active_.data()), n_,
                         active_f_.data());
      }
      shadow_full_ = false;
    }
    if (a_fire) {
      size_t tail = head_ + count_;
      if (tail >= slots_) tail -= slots_;
      flight_[tail] = {cycle, in.a_tag};
      RowProduct(n_, bf16_, in.a_data.data(), active_.data(), active_f_.data(),
                 &results_[tail * static_cast<size_t>(n_)]);
      ++count_;
    }
    if (w_fire) {
      std::memcpy(&shadow_[static_cast<size_t>(wr_row_ * n_ * eb_)], in.w_data.data(),
                  static_cast<size_t>(n_ * eb_));
      if (wr_row_ == n_ - 1) {
        wr_row_ = 0;
        shadow_full_ = true;
      } else {
        ++wr_row_;
      }
    }
  }

  // A row in flight: the cycle it entered and its tag.
  struct Flight {
    uint64_t cycle = 0;
    sim::RowTag tag;
  };
  const int64_t n_, eb_;
  const bool bf16_;
  const uint64_t latency_;
  const uint32_t depth_;
  uint32_t addr_mask_ = 1;
  bool shadow_full_ = false;
  int64_t wr_row_ = 0;
  std::vector<int8_t> shadow_, active_;
  std::vector<float> active_f_;  // bf16: the active tile widened once
  std::vector<int32_t> acc_;
  bool rd_valid_q_ = false, final_valid_q_ = false, error_q_ = false;
  uint32_t final_addr_q_ = 0;
  std::vector<int32_t> rd_data_;
  const size_t slots_;
  std::vector<Flight> flight_;  // in order, from head_: count_ of them
  std::vector<int32_t> results_;
  size_t head_ = 0, count_ = 0;
};

}  // namespace

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
  MxuState state(params_, workload.OperandBytes());
  sim::MxuSequencer seq(workload, options.watchdog_cycles);
  sim::MxuInputs in;
  sim::MxuRegisteredOutputs out;
  sim::MxuRunResult result;
  result.params = params_;
  for (uint64_t cycle = 0;; ++cycle) {
    state.Outputs(&out);
    seq.Present(out, &in);
    if (seq.Done()) break;
    const bool a_ready = !in.a_switch || state.ShadowFull();
    const bool a_fire = in.a_valid && a_ready;
    const bool switch_fire = a_fire && in.a_switch;
    const bool w_ready = !state.ShadowFull() || switch_fire;
    const bool w_fire = in.w_valid && w_ready;
    const bool out_valid = state.OutValid(cycle);
    if (options.on_cycle) options.on_cycle(cycle);
    seq.Commit(in, w_ready, a_ready);
    CountCycle(in, a_fire, w_fire, switch_fire, out_valid, state.InFlight(), &result.counters);
    state.Edge(in, a_fire, switch_fire, w_fire, out_valid, cycle);
    if (options.progress && ((cycle + 1) & 0xffff) == 0) options.progress(seq.Progress());
  }
  if (state.Error()) throw std::runtime_error("the matrix unit raised its error flag");
  if (options.progress) options.progress(1.0);
  return result;
}

}  // namespace tpu::fast
