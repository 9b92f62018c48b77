// The fast engine's cycle loop (see fast_chip.h). Each block below is one RTL unit; the
// comments name the file whose registers it mirrors. A cycle is computed in three steps,
// as the SystemC system does it: the system answers the memory ports and hands over an
// instruction (sim/tpu_system.cc), every unit computes its combinational signals from its
// registers, then the clock edge updates every register at once.
#include "fast/fast_chip.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tpu::fast {
namespace {

bool Overlaps(uint32_t a_lo, uint32_t a_hi, uint32_t b_lo, uint32_t b_hi) {
  return a_lo < b_hi && b_lo < a_hi;
}

enum : uint8_t {
  kWait = static_cast<uint8_t>(hw::Issue::kWaitInstruction),
  kFire = static_cast<uint8_t>(hw::Issue::kFire),
  kUnitBusy = static_cast<uint8_t>(hw::Issue::kUnitBusy),
  kUbHazard = static_cast<uint8_t>(hw::Issue::kUbHazard),
  kAccHazard = static_cast<uint8_t>(hw::Issue::kAccHazard),
  kParamHazard = static_cast<uint8_t>(hw::Issue::kParamHazard),
  kDrain = static_cast<uint8_t>(hw::Issue::kDrain),
  kHalted = static_cast<uint8_t>(hw::Issue::kHalted),
};

enum Pool : uint8_t { kPoolNone, kPoolAvg, kPoolMax };

// The counter of each matrix-unit cycle class, in mxu_cycle_e order (rtl/tpu_pkg.sv).
constexpr int kMxuCounter[5] = {hw::kCounterMxuStreamCycles, hw::kCounterMxuLoadCycles,
                                hw::kCounterMxuStallWeights, hw::kCounterMxuDrainCycles,
                                hw::kCounterMxuIdleCycles};

}  // namespace

FastChip::FastChip(const ChipParams& p)
    : p_(p),
      values_(
          (p.array_dim < 2 || p.array_dim > 512)
              ? throw std::invalid_argument("array_dim " + std::to_string(p.array_dim) +
                                            " is out of range for the fast engine; use 2 to 512")
              : p),
      host_(static_cast<uint64_t>(p.array_dim), p.host_bytes_per_cycle, p.host_latency_cycles),
      weight_(static_cast<uint64_t>(p.array_dim), p.weight_bytes_per_cycle,
              p.weight_latency_cycles) {
  if (p.host_bytes_per_cycle == 0 || p.weight_bytes_per_cycle == 0) {
    throw std::invalid_argument("memory bandwidth must be at least 1 byte per cycle");
  }
  if (p.iq_depth < 1 || p.fifo_tiles < 1 || p.acc_depth < 1 || p.ub_depth < 1 || p.param_sets < 1) {
    throw std::invalid_argument("buffer depths must be at least 1");
  }
}

RunResult FastChip::Run(const uint8_t* words, size_t count, const RunOptions& o) {
  using hw::ChipCounters;
  const uint64_t n = static_cast<uint64_t>(p_.array_dim);
  const uint32_t fifo_rows = static_cast<uint32_t>(p_.fifo_tiles) * static_cast<uint32_t>(n);
  const uint64_t latency = 2 * n;  // a row in -> its result in the accumulators
  const uint64_t iq_depth = static_cast<uint64_t>(p_.iq_depth);
  const bool values = !o.timing_only;

  std::vector<Decoded> prog(count);
  Window window;      // the controller's window register, as set_window leaves it
  Residual residual;  // and its residual register, as set_residual leaves it
  for (size_t i = 0; i < count; ++i)
    prog[i] = Decode(words + hw::kInstructionBytes * i, p_, window, residual);
  if (values) values_.BeginRun();
  host_.Reset();
  weight_.Reset();

  uint64_t cnt[hw::kNumCounters] = {};

  // ---- controller (rtl/tpu_controller.sv)
  bool halted = false;
  hw::Status status = hw::Status::kOk;
  uint64_t error_pc = 0, retired = 0, fed = 0;
  Footprint hdma_fp, act_fp, mxu_fp;
  // The accumulator rows of finished matmuls whose last row is still in the array.
  Footprint drain_fp;
  uint64_t drain_left = 0;
  // ---- host DMA (rtl/tpu_host_dma.sv) and its two-row write buffer
  bool h_write = false, h_params = false, h_rd_pending = false;
  uint32_t h_req_addr = 0, h_req_left = 0, h_resp_left = 0, h_rd_left = 0, h_obuf = 0;
  uint32_t h_write_row = 0;  // the unified-buffer row of the next accepted write
  // ---- weight DMA (rtl/tpu_weight_dma.sv) and the weight FIFO (rtl/tpu_fifo.sv)
  uint32_t w_req_left = 0, w_resp_left = 0, w_outstanding = 0, fifo_count = 0;
  // ---- matrix feeder (rtl/tpu_mxu_feeder.sv): only the switch bit of a row shapes timing
  uint32_t f_left = 0, f_buf = 0, f_buf_head = 0;
  bool f_first = false, f_switch = false, f_pending = false, f_pending_sw = false;
  bool f_pending_last = false;
  bool f_buf_sw[2] = {false, false}, f_buf_last[2] = {false, false};
  // ---- matrix unit (rtl/tpu_mxu.sv): shadow control and the rows in flight (the cycles in
  // which they entered; each leaves `latency` cycles later)
  bool shadow_full = false;
  uint64_t wr_row = 0;
  std::vector<uint64_t> flight(static_cast<size_t>(latency) + 1);
  size_t fl_head = 0, fl_count = 0;
  // ---- activation unit (rtl/tpu_activate_unit.sv) and VPU pipeline (rtl/tpu_vpu.sv)
  uint32_t a_rd_left = 0, a_out_left = 0, pool_count = 0;
  uint8_t a_pool = kPoolNone;
  bool a_residual = false;
  bool acc_rd_valid = false, s1_valid = false, s2_valid = false, pool_valid = false;
  bool s3_valid = false;  // the residual stage
  // ---- chip status registers (rtl/tpu_top.sv)
  bool progress_q = false;
  uint8_t issue_q = kWait;

  RunResult r;
  uint64_t quiet = 0;
  uint64_t next_progress = 0xffff;
  for (uint64_t cycle = 0;; ++cycle) {
    const bool hdma_busy = h_req_left || h_resp_left || h_rd_left || h_rd_pending || h_obuf;
    const bool wdma_busy = w_req_left || w_resp_left;
    const bool feed_busy = f_left || f_pending || f_buf;
    const bool in_flight = fl_count != 0;
    const bool mxu_busy = feed_busy || in_flight;
    const bool act_busy = a_out_left != 0;
    const uint8_t busy =
        static_cast<uint8_t>((hdma_busy << hw::kUnitHostDma) | (wdma_busy << hw::kUnitWeightDma) |
                             (mxu_busy << hw::kUnitMatrix) | (act_busy << hw::kUnitActivate));
    const bool all_idle = busy == 0;
    const uint64_t iq_count = fed - retired;
    const bool a_valid = f_buf != 0;
    const bool a_switch = a_valid && f_buf_sw[f_buf_head];
    const bool a_last = a_valid && f_buf_last[f_buf_head];
    const bool a_ready = !a_switch || shadow_full;

    // ---- how the run ends (sim/tpu_system.cc checks these before anything else)
    if (halted) {
      r.end = status == hw::Status::kOk ? RunEnd::kHalted : RunEnd::kError;
      r.cycles = cycle;
      break;
    }
    if (fed == count && iq_count == 0 && all_idle) {
      r.end = RunEnd::kNoHalt;
      r.cycles = cycle;
      break;
    }

    // ---- the system: memory ports and the instruction port
    bool moved = progress_q;
    const bool h_valid = h_write ? h_obuf != 0 : h_req_left != 0;
    const bool hm_ready = host_.Ready(cycle);
    const bool hm_fire = h_valid && hm_ready;
    if (hm_fire) {
      host_.Accept(cycle, !h_write);
      if (h_write && values) values_.HostWrite(h_req_addr, h_write_row);
      moved = true;
    }
    const bool hm_resp = host_.Respond(cycle);
    const bool room = w_outstanding + fifo_count < fifo_rows;
    const bool w_req_valid = w_req_left != 0 && room;
    const bool wm_ready = weight_.Ready(cycle);
    const bool wm_fire = w_req_valid && wm_ready;
    if (wm_fire) {
      weight_.Accept(cycle, true);
      moved = true;
    }
    const bool wm_resp = weight_.Respond(cycle);
    const bool instr_push = fed < count && iq_count < iq_depth;
    if (instr_push) moved = true;
    quiet = moved ? 0 : quiet + 1;
    if (quiet >= o.watchdog_cycles) {
      r.end = RunEnd::kWatchdog;
      r.cycles = cycle;
      r.stall.quiet_cycles = quiet;
      r.stall.pc = retired;
      r.stall.opcode = retired < fed ? words[hw::kInstructionBytes * retired] : -1;
      r.stall.issue = issue_q;
      r.stall.busy = busy;
      r.stall.wait_weights = a_valid && !a_ready;
      break;
    }

    // ---- controller: decode, checks, interlocks, issue
    const Decoded* d = iq_count != 0 ? &prog[retired] : nullptr;
    uint8_t issue;
    bool go = false;
    if (d == nullptr) {
      issue = kWait;
    } else if (d->check != hw::Status::kOk) {
      issue = kHalted;
    } else if (d->sync) {
      go = all_idle;
      issue = go ? kFire : kDrain;
    } else {
      bool unit_busy = false;
      switch (d->unit) {
        case hw::kUnitHostDma:
          unit_busy = hdma_busy;
          break;
        case hw::kUnitWeightDma:
          unit_busy = wdma_busy;
          break;
        case hw::kUnitMatrix:
          unit_busy = feed_busy;
          break;
        case hw::kUnitActivate:
          unit_busy = act_busy;
          break;
        default:
          break;
      }
      if (unit_busy) {
        issue = kUnitBusy;
      } else {
        bool ub_h = false, acc_h = false, par_h = false;
        const Footprint& f = d->fp;
        auto check = [&](const Footprint& u) {
          if (f.ub_use && u.ub_use && (f.ub_wr || u.ub_wr) &&
              Overlaps(f.ub_lo, f.ub_hi, u.ub_lo, u.ub_hi))
            ub_h = true;
          // The read-only second ranges (activate residual) against the other side's writes.
          if (f.ub2_use && u.ub_use && u.ub_wr && Overlaps(f.ub2_lo, f.ub2_hi, u.ub_lo, u.ub_hi))
            ub_h = true;
          if (f.ub_use && f.ub_wr && u.ub2_use && Overlaps(f.ub_lo, f.ub_hi, u.ub2_lo, u.ub2_hi))
            ub_h = true;
          if (f.acc_use && u.acc_use && (f.acc_wr || u.acc_wr) &&
              Overlaps(f.acc_lo, f.acc_hi, u.acc_lo, u.acc_hi))
            acc_h = true;
          if (f.par_use && u.par_use && (f.par_wr || u.par_wr) &&
              Overlaps(f.par_lo, f.par_hi, u.par_lo, u.par_hi))
            par_h = true;
        };
        if (hdma_busy) check(hdma_fp);
        if (act_busy) check(act_fp);
        // A unit's own matmuls run in order.
        if (feed_busy && d->unit != hw::kUnitMatrix) check(mxu_fp);
        if (drain_left != 0 && d->unit != hw::kUnitMatrix) check(drain_fp);
        if (ub_h)
          issue = kUbHazard;
        else if (acc_h)
          issue = kAccHazard;
        else if (par_h)
          issue = kParamHazard;
        else {
          issue = kFire;
          go = true;
        }
      }
    }
    const bool hdma_start = go && d->unit == hw::kUnitHostDma;
    const bool wdma_start = go && d->unit == hw::kUnitWeightDma;
    const bool feed_start = go && d->unit == hw::kUnitMatrix;
    const bool act_start = go && d->unit == hw::kUnitActivate;

    // ---- combinational signals of the units
    const bool h_resp_take = !h_write && hm_resp && h_resp_left != 0;
    const bool h_obuf_pop = hm_fire && h_write;
    const bool h_ub_read = h_write && h_rd_left != 0 && (h_obuf - h_obuf_pop + h_rd_pending < 2);
    const bool w_take = wm_resp && w_resp_left != 0;
    const bool a_fire = a_valid && a_ready;
    const bool switch_fire = a_fire && a_switch;
    const bool w_ready = !shadow_full || switch_fire;
    const bool mw_fire = fifo_count != 0 && w_ready;
    const bool f_rd = f_left != 0 && (f_buf - a_fire + f_pending < 2);
    const bool ub_rd0 = f_rd && !feed_start;
    const bool out_valid = in_flight && flight[fl_head] + latency == cycle;
    const bool acc_rd_en = a_rd_left != 0 && !act_start;
    const bool vpu_out = a_residual ? s3_valid : a_pool == kPoolNone ? s2_valid : pool_valid;
    const bool res_read = s1_valid && a_residual;  // the residual row of the row in stage 1

    // ---- the counters (rtl/tpu_top.sv): this cycle's increments, `k` times (more than
    // once for the cycles that repeat this one, below).
    // (Only values of this cycle, fixed before the clock edge below changes the registers.)
    const bool fifo_stall = w_req_left != 0 && !room;
    const bool host_stall = h_valid && !hm_ready, weight_stall = w_req_valid && !wm_ready;
    // What the matrix unit did (mxu_cycle_e of rtl/tpu_pkg.sv: stream, load, stall, drain, idle).
    const int mxu_cycle = a_fire ? 0 : mw_fire ? 1 : a_valid ? 2 : in_flight ? 3 : 4;
    const uint64_t ub_reads = uint64_t{ub_rd0} + h_ub_read + res_read;
    const uint64_t ub_writes = uint64_t{h_resp_take && !h_params} + vpu_out;
    const bool param_write = h_resp_take && h_params, vpu_in = acc_rd_valid;
    const uint64_t host_read = hm_fire && !h_write ? n : 0,
                   host_written = hm_fire && h_write ? n : 0;
    auto add_counts = [&](uint64_t k) {
      cnt[hw::kCounterCycles] += k;
      cnt[hw::kCounterBusyHostDma] += k * hdma_busy;
      cnt[hw::kCounterBusyWeightDma] += k * wdma_busy;
      cnt[hw::kCounterBusyMatrix] += k * mxu_busy;
      cnt[hw::kCounterBusyActivate] += k * act_busy;
      // Every cycle of the matrix unit is exactly one of these five.
      const int mxu = kMxuCounter[mxu_cycle];
      cnt[mxu] += k;
      // TPU v1's categories of the cycles the matrix unit does not work (rtl/tpu_top.sv).
      if (mxu == hw::kCounterMxuDrainCycles || mxu == hw::kCounterMxuIdleCycles) {
        const bool raw =
            issue == kUbHazard || issue == kAccHazard || issue == kParamHazard || issue == kDrain;
        cnt[hdma_busy ? hw::kCounterWaitInput
            : raw     ? hw::kCounterWaitRaw
                      : hw::kCounterWaitNonMatrix] += k;
      }
      if (issue != kHalted) cnt[hw::kIssueCounter[issue]] += k;
      cnt[hw::kCounterWeightDmaStallFifoFull] += k * fifo_stall;
      cnt[hw::kCounterHostMemStall] += k * host_stall;
      cnt[hw::kCounterWeightMemStall] += k * weight_stall;
      cnt[hw::kCounterUbReads] += k * ub_reads;
      cnt[hw::kCounterUbWrites] += k * ub_writes;
      cnt[hw::kCounterAccReads] += k * acc_rd_en;
      cnt[hw::kCounterAccWrites] += k * out_valid;
      cnt[hw::kCounterWeightFifoPushes] += k * w_take;
      cnt[hw::kCounterWeightFifoPops] += k * mw_fire;
      cnt[hw::kCounterWeightTiles] += k * switch_fire;
      cnt[hw::kCounterParamWrites] += k * param_write;
      cnt[hw::kCounterHostBytesRead] += k * host_read;
      cnt[hw::kCounterHostBytesWritten] += k * host_written;
      cnt[hw::kCounterWeightBytesRead] += k * (wm_fire ? n : 0);
      cnt[hw::kCounterMacs] += k * (a_fire ? n * n : 0);
      cnt[hw::kCounterVpuRowsIn] += k * vpu_in;
      cnt[hw::kCounterVpuRowsOut] += k * vpu_out;
    };
    add_counts(1);
    // obs_o (rtl/tpu_top.sv): the matrix unit's cycle, then the stalls.
    const uint8_t obs =
        static_cast<uint8_t>(mxu_cycle | host_stall << 3 | weight_stall << 4 | fifo_stall << 5);
    if (o.on_cycles) o.on_cycles(cycle, 1, issue, busy, obs);

    const bool progress_d = issue == kFire || instr_push || hm_fire || hm_resp || wm_fire ||
                            wm_resp || a_fire || mw_fire || out_valid || acc_rd_en || vpu_out;
    // Nothing changes but time: the registers hold, so the cycles up to the next event
    // (a memory port becoming ready or answering, a row leaving the array, the watchdog)
    // repeat this one exactly.
    const bool steady = !progress_d && !progress_q && issue_q == issue && drain_left == 0 &&
                        !h_ub_read && !h_rd_pending && !f_rd && !f_pending && !acc_rd_valid &&
                        !s1_valid && !s2_valid && !pool_valid && !s3_valid && issue != kHalted;

    // ---- the clock edge
    if (d != nullptr && d->check != hw::Status::kOk) {
      halted = true;
      status = d->check;
      error_pc = retired;
    }
    if (go) {
      if (values) values_.Issue(*d);
      if (d->op == static_cast<uint8_t>(hw::Opcode::kHalt)) halted = true;
      if (hdma_start) hdma_fp = d->fp;
      if (act_start) act_fp = d->fp;
      if (feed_start) mxu_fp = d->fp;
      ++retired;
    }
    if (instr_push) ++fed;

    // host DMA
    const bool h_obuf_push = h_rd_pending && h_obuf != 2;
    if (hdma_start) {
      const bool write = d->op == static_cast<uint8_t>(hw::Opcode::kWriteHost);
      const bool params = !write && (d->flags & hw::kFlagParams);
      const uint32_t rows = params ? d->len * hw::kParamRows : d->len;
      h_write = write;
      h_params = params;
      h_req_left = rows;
      h_req_addr = write ? d->dst : d->src;
      h_rd_left = write ? rows : 0;
      h_resp_left = write ? 0 : rows;
      h_write_row = d->src;
    } else {
      if (hm_fire) {
        h_req_addr += static_cast<uint32_t>(n);
        --h_req_left;
        if (h_write) ++h_write_row;
      }
      if (h_resp_take) --h_resp_left;
      if (h_ub_read) --h_rd_left;
      h_rd_pending = h_ub_read;
    }
    h_obuf = h_obuf + h_obuf_push - h_obuf_pop;

    // weight DMA and the weight FIFO
    if (wdma_start) {
      w_req_left = w_resp_left = d->len * static_cast<uint32_t>(n);
    } else {
      if (wm_fire) --w_req_left;
      if (w_take) --w_resp_left;
      w_outstanding = w_outstanding + wm_fire - w_take;
    }
    fifo_count = fifo_count + (w_take && fifo_count != fifo_rows) - (mw_fire && fifo_count != 0);

    // the drain footprint (rtl/tpu_controller.sv): a matmul's rows after its last entered
    if (a_fire && a_last) {
      Footprint nd;
      nd.acc_use = nd.acc_wr = true;
      nd.acc_lo = drain_left != 0 ? std::min(drain_fp.acc_lo, mxu_fp.acc_lo) : mxu_fp.acc_lo;
      nd.acc_hi = drain_left != 0 ? std::max(drain_fp.acc_hi, mxu_fp.acc_hi) : mxu_fp.acc_hi;
      drain_fp = nd;
      drain_left = 2 * n;
    } else if (drain_left != 0) {
      --drain_left;
    }

    // matrix feeder: a two-row buffer in front of the matrix unit
    const bool pending_sw_next = f_first && f_switch;
    const bool pending_last_next = f_left == 1;
    const bool f_buf_push = f_pending && f_buf != 2;
    if (feed_start) {
      f_left = d->len;
      f_first = true;
      f_switch = d->flags & hw::kFlagSwitch;
    } else if (f_rd) {
      --f_left;
      f_first = false;
    }
    if (a_fire) {
      f_buf_head ^= 1;
      --f_buf;
    }
    if (f_buf_push) {
      f_buf_sw[(f_buf_head + f_buf) & 1] = f_pending_sw;
      f_buf_last[(f_buf_head + f_buf) & 1] = f_pending_last;
      ++f_buf;
    }
    f_pending = f_rd && !feed_start;
    f_pending_sw = pending_sw_next;
    f_pending_last = pending_last_next;

    // matrix unit: shadow registers and the rows in flight
    if (switch_fire) shadow_full = false;
    if (mw_fire) {
      if (wr_row == n - 1) {
        wr_row = 0;
        shadow_full = true;
      } else {
        ++wr_row;
      }
    }
    if (out_valid) {
      fl_head = fl_head + 1 == flight.size() ? 0 : fl_head + 1;
      --fl_count;
    }
    if (a_fire) {
      size_t tail = fl_head + fl_count;
      if (tail >= flight.size()) tail -= flight.size();
      flight[tail] = cycle;
      ++fl_count;
    }

    // activation unit and VPU
    if (s2_valid && a_pool != kPoolNone) {
      pool_valid = pool_count == 3;
      pool_count = (pool_count + 1) & 3;
    } else {
      pool_valid = false;
    }
    s3_valid = s2_valid && a_residual;
    s2_valid = s1_valid;
    s1_valid = acc_rd_valid;
    acc_rd_valid = acc_rd_en;
    if (act_start) {
      a_rd_left = d->len;
      a_out_left = d->out_rows;
      a_pool = (d->flags & hw::kFlagPoolMax)   ? kPoolMax
               : (d->flags & hw::kFlagPoolAvg) ? kPoolAvg
                                               : kPoolNone;
      a_residual = d->flags & hw::kFlagResidual;
    } else {
      if (a_rd_left != 0) --a_rd_left;
      if (vpu_out) --a_out_left;
    }

    progress_q = progress_d;
    issue_q = issue;

    if (steady) {
      uint64_t next = std::min(host_.NextEvent(cycle), weight_.NextEvent(cycle));
      if (fl_count != 0) next = std::min(next, flight[fl_head] + latency);
      next = std::min(next, cycle + (o.watchdog_cycles - quiet));
      if (next > cycle + 1 && next != kNever) {
        const uint64_t k = next - cycle - 1;  // cycles cycle+1 .. next-1 repeat this one
        add_counts(k);
        if (o.on_cycles) o.on_cycles(cycle + 1, k, issue, busy, obs);
        quiet += k;
        cycle += k;
      }
    }
    if (o.progress && cycle >= next_progress && count > 0) {
      next_progress = cycle + 0x10000;
      o.progress(static_cast<double>(fed) / static_cast<double>(count));
    }
  }
  r.status = status;
  r.error_pc = error_pc;
  r.fed = fed;
  for (int i = 0; i < hw::kNumCounters; ++i) r.counters[i] = cnt[i];
  return r;
}

}  // namespace tpu::fast
