// The fast engine's controller, register for register as rtl/tpu_controller.sv: the
// instruction queue, the issue stage (the decoded instruction's checks, its unit's
// busy bit, and the interlocks on the rows the busy units use) and the footprints it
// keeps for them, including the accumulator rows of matmuls still draining from the array
// (per matrix unit: each has its own feeder and accumulators).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "fast/decode.h"

namespace tpu::fast {

// Whether row ranges [a_lo, a_hi) and [b_lo, b_hi) share a row.
inline bool Overlaps(uint32_t a_lo, uint32_t a_hi, uint32_t b_lo, uint32_t b_hi) {
  return a_lo < b_hi && b_lo < a_hi;
}

// The issue stage's states (hw::Issue), as bytes.
enum IssueState : uint8_t {
  kWait = static_cast<uint8_t>(hw::Issue::kWaitInstruction),
  kFire = static_cast<uint8_t>(hw::Issue::kFire),
  kUnitBusy = static_cast<uint8_t>(hw::Issue::kUnitBusy),
  kUbHazard = static_cast<uint8_t>(hw::Issue::kUbHazard),
  kAccHazard = static_cast<uint8_t>(hw::Issue::kAccHazard),
  kParamHazard = static_cast<uint8_t>(hw::Issue::kParamHazard),
  kDrain = static_cast<uint8_t>(hw::Issue::kDrain),
  kHalted = static_cast<uint8_t>(hw::Issue::kHalted),
};

// The most matrix units a core has: as many as the contract's mxu= operand names.
inline constexpr int kMaxMxus = static_cast<int>(hw::kOpdMatmulMxu.Max()) + 1;

// Which units have work this cycle (unit_busy_o; a feeder is its matrix unit's issue side,
// bit m of `feeders` matrix unit m's, as bit m of `weight_dmas` its weight DMA; `matrix`:
// any matrix unit, `weight_dma`: any weight DMA).
struct UnitsBusy {
  bool host_dma = false, weight_dma = false, matrix = false, activate = false, vector = false;
  uint8_t weight_dmas = 0;
  uint8_t feeders = 0;
  uint8_t mxus = 0;  // the matrix units with work (mxu_busy_o, bit m: unit m)
  uint8_t Bits() const {
    return static_cast<uint8_t>((host_dma << hw::kUnitHostDma) |
                                (weight_dma << hw::kUnitWeightDma) | (matrix << hw::kUnitMatrix) |
                                (activate << hw::kUnitActivate) | (vector << hw::kUnitVector));
  }
  bool AllIdle() const { return !host_dma && !weight_dma && !matrix && !activate && !vector; }
};

class Controller {
 public:
  // What the issue stage does this cycle: the instruction at the head of the queue (or
  // null), the state, and whether it issues.
  struct Decision {
    const Decoded* d = nullptr;
    uint8_t issue = kWait;
    bool go = false;
    // The unit that starts this cycle, or false for each.
    bool Starts(int unit) const { return go && d->unit == unit; }
  };

  bool Halted() const { return halted_; }
  hw::Status Status() const { return status_; }
  uint64_t ErrorPc() const { return error_pc_; }
  uint64_t Retired() const { return retired_; }
  uint64_t Fed() const { return fed_; }
  uint64_t Queued() const { return fed_ - retired_; }
  bool Draining() const {
    return std::any_of(drain_left_.begin(), drain_left_.end(), [](uint64_t d) { return d != 0; });
  }
  bool ProgressQ() const { return progress_q_; }
  // How many cycles after this one no matrix unit's drain ends (a hazard may end with it):
  // the least of the drain counts that run, less one.
  uint64_t DrainRepeats() const {
    uint64_t k = ~uint64_t{0};
    for (const uint64_t d : drain_left_)
      if (d != 0) k = std::min(k, d - 1);
    return k;
  }
  uint8_t IssueQ() const { return issue_q_; }

  // Whether a good barrier is at the head with every unit idle (at_barrier_o).
  bool AtBarrier(const std::vector<Decoded>& prog, const UnitsBusy& busy) const {
    if (halted_ || Queued() == 0) return false;
    const Decoded& d = prog[retired_];
    return d.barrier && d.check == hw::Status::kOk && busy.AllIdle();
  }

  // `arrived`: the cores of the chip at a barrier or halted (bit c: core c; this core's bit
  // set when it is at a barrier).
  Decision Decide(const std::vector<Decoded>& prog, const UnitsBusy& busy,
                  uint32_t arrived = 0) const {
    Decision s;
    s.d = Queued() != 0 && !halted_ ? &prog[retired_] : nullptr;
    if (halted_) {
      s.issue = kHalted;  // a halted core issues nothing more (its units finish their work)
    } else if (s.d == nullptr) {
      s.issue = kWait;
    } else if (s.d->check != hw::Status::kOk) {
      s.issue = kHalted;
    } else if (s.d->sync) {
      s.go = busy.AllIdle();
      s.issue = s.go ? kFire : kDrain;
    } else if (s.d->barrier) {  // waiting for the other cores counts as a drain
      s.go = AtBarrier(prog, busy) && (s.d->cores & ~arrived) == 0;
      s.issue = s.go ? kFire : kDrain;
    } else if (UnitBusy(*s.d, busy) || WeightMemoryHazard(*s.d, busy)) {
      s.issue = kUnitBusy;
    } else {
      s.issue = Hazard(*s.d, busy);
      s.go = s.issue == kFire;
    }
    return s;
  }

  // The clock edges of `k` cycles that repeat this one's decision `s`, with no instruction
  // issuing or pushed and no matmul's last row entering (Repeats): the drains count down.
  void Edges(const Decision& s, uint64_t k, bool progress) {
    for (uint64_t& d : drain_left_) d -= std::min(d, k);
    progress_q_ = progress;
    issue_q_ = s.issue;
  }

  // The clock edge: the decision taken, an instruction pushed into the queue, the last
  // row of a matmul entering each matrix unit's array (bit m: unit m), and whether anything
  // moved this cycle.
  void Edge(const Decision& s, bool push, uint8_t matmul_done, uint64_t n, bool progress) {
    if (s.d != nullptr && s.d->check != hw::Status::kOk) {
      halted_ = true;
      status_ = s.d->check;
      error_pc_ = retired_;
    }
    if (s.go) {
      if (s.d->op == static_cast<uint8_t>(hw::Opcode::kHalt)) halted_ = true;
      if (s.Starts(hw::kUnitHostDma)) hdma_fp_ = s.d->fp;
      if (s.Starts(hw::kUnitActivate)) act_fp_ = s.d->fp;
      if (s.Starts(hw::kUnitVector)) vec_fp_ = s.d->fp;
      if (s.Starts(hw::kUnitWeightDma)) wdma_fp_[s.d->mxu] = s.d->fp;
      ++retired_;
    }
    if (push) ++fed_;
    // Per matrix unit, the drain footprint: a matmul's accumulator rows after its last row
    // entered (the footprint it had before a matmul issuing now takes its place).
    for (size_t m = 0; m < drain_left_.size(); ++m) {
      const Footprint& mf = mxu_fp_[m];
      if (matmul_done >> m & 1) {
        Footprint nd;
        nd.acc_use = nd.acc_wr = true;
        nd.acc_mxu = mf.acc_mxu;
        nd.acc_lo = drain_left_[m] != 0 ? std::min(drain_fp_[m].acc_lo, mf.acc_lo) : mf.acc_lo;
        nd.acc_hi = drain_left_[m] != 0 ? std::max(drain_fp_[m].acc_hi, mf.acc_hi) : mf.acc_hi;
        drain_fp_[m] = nd;
        drain_left_[m] = 2 * n;
      } else if (drain_left_[m] != 0) {
        --drain_left_[m];
      }
    }
    if (s.Starts(hw::kUnitMatrix)) mxu_fp_[s.d->mxu] = s.d->fp;
    progress_q_ = progress;
    issue_q_ = s.issue;
  }

 private:
  static bool UnitBusy(const Decoded& d, const UnitsBusy& b) {
    switch (d.unit) {
      case hw::kUnitHostDma:
        return b.host_dma;
      case hw::kUnitWeightDma:
        return (b.weight_dmas >> d.mxu & 1) != 0;
      case hw::kUnitMatrix:
        return (b.feeders >> d.mxu & 1) != 0;
      case hw::kUnitActivate:
        return b.activate;
      case hw::kUnitVector:
        return b.vector;
      default:
        return false;
    }
  }

  // The weight memory as one range (rtl/tpu_controller.sv): write_hbm against a weight DMA's
  // read_weights, and read_weights and read_hbm against the host DMA's write_hbm. It counts
  // as the unit busy.
  bool WeightMemoryHazard(const Decoded& d, const UnitsBusy& busy) const {
    const Footprint& f = d.fp;
    auto clash = [&](const Footprint& u) { return (f.wm_wr && u.wm_rd) || (f.wm_rd && u.wm_wr); };
    if (busy.host_dma && clash(hdma_fp_)) return true;
    for (size_t m = 0; m < wdma_fp_.size(); ++m)
      if ((busy.weight_dmas >> m & 1) && clash(wdma_fp_[m])) return true;
    return false;
  }

  // kFire, or the first hazard (unified buffer, accumulators, parameter sets) between the
  // instruction's rows and those of the units still working.
  uint8_t Hazard(const Decoded& d, const UnitsBusy& busy) const {
    bool ub = false, acc = false, par = false;
    const Footprint& f = d.fp;
    auto check = [&](const Footprint& u) {
      if (f.ub_use && u.ub_use && (f.ub_wr || u.ub_wr) &&
          Overlaps(f.ub_lo, f.ub_hi, u.ub_lo, u.ub_hi))
        ub = true;
      // The read-only second ranges (activate residual) against the other side's writes.
      if (f.ub2_use && u.ub_use && u.ub_wr && Overlaps(f.ub2_lo, f.ub2_hi, u.ub_lo, u.ub_hi))
        ub = true;
      if (f.ub_use && f.ub_wr && u.ub2_use && Overlaps(f.ub_lo, f.ub_hi, u.ub2_lo, u.ub2_hi))
        ub = true;
      if (f.ub3_use && u.ub_use && u.ub_wr && Overlaps(f.ub3_lo, f.ub3_hi, u.ub_lo, u.ub_hi))
        ub = true;
      if (f.ub_use && f.ub_wr && u.ub3_use && Overlaps(f.ub_lo, f.ub_hi, u.ub3_lo, u.ub3_hi))
        ub = true;
      if (f.acc_use && u.acc_use && (f.acc_wr || u.acc_wr) && f.acc_mxu == u.acc_mxu &&
          Overlaps(f.acc_lo, f.acc_hi, u.acc_lo, u.acc_hi))
        acc = true;
      if (f.par_use && u.par_use && (f.par_wr || u.par_wr) &&
          Overlaps(f.par_lo, f.par_hi, u.par_lo, u.par_hi))
        par = true;
    };
    if (busy.host_dma) check(hdma_fp_);
    if (busy.activate) check(act_fp_);
    if (busy.vector) check(vec_fp_);
    // A unit's own matmuls run in order; a matmul and another matrix unit's footprint share
    // no accumulators and both only read the unified buffer.
    if (d.unit != hw::kUnitMatrix) {
      for (size_t m = 0; m < drain_left_.size(); ++m) {
        if (busy.feeders >> m & 1) check(mxu_fp_[m]);
        if (drain_left_[m] != 0) check(drain_fp_[m]);
      }
    }
    // The unified-buffer rows each weight DMA's load_weights reads (read_weights: none).
    for (size_t m = 0; m < wdma_fp_.size(); ++m)
      if (busy.weight_dmas >> m & 1) check(wdma_fp_[m]);
    return ub ? kUbHazard : acc ? kAccHazard : par ? kParamHazard : kFire;
  }

  bool halted_ = false;
  hw::Status status_ = hw::Status::kOk;
  uint64_t error_pc_ = 0, retired_ = 0, fed_ = 0;
  Footprint hdma_fp_, act_fp_, vec_fp_;
  std::array<Footprint, kMaxMxus> mxu_fp_, wdma_fp_;
  // Per matrix unit, the accumulator rows of matmuls whose last row is in the array.
  std::array<Footprint, kMaxMxus> drain_fp_;
  std::array<uint64_t, kMaxMxus> drain_left_ = {};
  bool progress_q_ = false;  // rtl/tpu_top.sv's progress register
  uint8_t issue_q_ = kWait;
};

}  // namespace tpu::fast
