// The fast engine's cycle loop (see fast_chip.h). Each unit is a class shaped like its RTL
// module (fast/controller.h, dma.h, matrix_unit.h, activate_unit.h). A cycle is computed in
// three steps, as the SystemC system does it: the system answers the memory ports and
// hands over an instruction (sim/system/tpu_system.cc), every unit computes its combinational
// signals from its registers, then the clock edge updates every register at once.
#include "fast/fast_chip.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "fast/activate_unit.h"
#include "fast/controller.h"
#include "fast/dma.h"
#include "fast/matrix_unit.h"
#include "fast/mem_arbiter.h"
#include "fast/vector_unit.h"

namespace tpu::fast {
namespace {

// The parameters' ranges are the contract's (the same check a config makes); the queue
// holds at least one instruction.
void CheckParams(const ChipParams& p) {
  if (const hw::ParamInfo* bad = hw::FirstOutOfRange(p))
    throw std::invalid_argument(std::string(bad->name) + " is out of range for the fast engine");
  if (p.iq_depth < 1) throw std::invalid_argument("iq_depth must be at least 1");
  // A weight-memory port per matrix unit and one per host DMA, each core (TpuConfig::Validate).
  if (p.cores * (p.mxus_per_core + 1) > 64)
    throw std::invalid_argument("more than 64 weight-memory ports (cores x (mxus_per_core + 1))");
}

// A matrix unit with what only it uses: its weight DMA and FIFO and its feeder
// (rtl/tpu_top.sv g_mxu).
struct Lane {
  Lane(uint32_t fifo_rows, uint64_t n) : fifo(fifo_rows), mxu(n) {}
  WeightDma wdma;
  WeightFifo fifo;
  Feeder feed;
  MatrixUnit mxu;
};

// The chip's units as they are after reset.
struct Units {
  explicit Units(const ChipParams& p)
      : n(static_cast<uint32_t>(p.array_dim)),
        row_bytes(static_cast<uint32_t>(hw::RowBytes(p))),
        param_rows(static_cast<uint32_t>(hw::ParamRows(hw::ElementBytes(p.dtype)))),
        vec(static_cast<uint32_t>(p.vector_sublanes)) {
    for (int m = 0; m < p.mxus_per_core; ++m)
      lanes.emplace_back(static_cast<uint32_t>(p.weight_fifo_tiles) * n, n);
  }
  UnitsBusy Busy() const {
    UnitsBusy b;
    b.host_dma = hdma.Busy();
    for (size_t m = 0; m < lanes.size(); ++m) {
      const Lane& l = lanes[m];
      b.weight_dmas |= static_cast<uint8_t>(l.wdma.Busy() << m);
      b.feeders |= static_cast<uint8_t>(l.feed.Busy() << m);
      const bool busy = l.feed.Busy() || l.mxu.InFlight();
      b.mxus |= static_cast<uint8_t>(busy << m);
      b.matrix = b.matrix || busy;
    }
    b.weight_dma = b.weight_dmas != 0;
    b.activate = act.Busy();
    b.vector = vec.Busy();
    return b;
  }
  Controller ctl;
  HostDma hdma;
  std::vector<Lane> lanes;
  ActivateUnit act;
  uint32_t n, row_bytes, param_rows;  // the array's size, a row's bytes, a parameter set's rows
  VectorUnit vec;
};

// A matrix unit's signals in a cycle (rtl/tpu_top.sv g_mxu).
struct LaneCycle {
  // its weight DMA: a request asked for, taken, a row presented and into the FIFO, no room;
  // a unified-buffer row read (load_weights)
  bool wm_valid = false, wm_ready = false, wm_fire = false, wm_resp = false;
  bool w_take = false, fifo_full = false, ub_read = false;
  bool a_fire = false, a_last = false, switch_fire = false, load = false;
  bool f_rd = false, out = false;
  uint8_t mxu_cycle = hw::kMxuIdle;  // what it did (hw::MxuCycle)
};

// One cycle before its clock edge: what the ports did, what the issue stage decided, and
// the units' signals; from these, what the counters count (rtl/tpu_top.sv).
struct Cycle {
  UnitsBusy busy;
  bool moved = false;  // anything changed (the watchdog's progress)
  bool hm_valid = false, hm_ready = false, hm_fire = false, hm_resp = false;
  // the host DMA's weight-memory port (read_hbm): asked, taken, a row presented
  bool hb_valid = false, hb_ready = false, hb_fire = false, hb_resp = false;
  bool push = false;                             // an instruction into the queue
  bool host_write = false, host_params = false;  // the host DMA's direction, parameter rows
  Controller::Decision issue;
  HostDma::Signals h;
  std::array<LaneCycle, kMaxMxus> lane;
  int lanes = 1;
  bool acc_rd = false, vpu_in = false, vpu_out = false, res_read = false;
  uint64_t vec_reads = 0, vec_writes = 0;  // the vector unit's buffer rows read and written
  uint8_t mxu_cycle = hw::kMxuIdle;        // what the matrix units did: the first of theirs
  // How many matrix units did `what` this cycle.
  template <class F>
  uint64_t Lanes(F what) const {
    uint64_t k = 0;
    for (int m = 0; m < lanes; ++m) k += what(lane[static_cast<size_t>(m)]);
    return k;
  }

  bool HostStall() const { return hm_valid && !hm_ready; }
  // Any weight-memory request not taken (a weight DMA's, the host DMA's); any weight DMA
  // with rows to ask for and no room for them.
  bool WeightStall() const {
    return (hb_valid && !hb_ready) ||
           Lanes([](const LaneCycle& l) { return l.wm_valid && !l.wm_ready; }) != 0;
  }
  bool FifoFull() const {
    return Lanes([](const LaneCycle& l) { return l.fifo_full; }) != 0;
  }
  // obs_o (rtl/tpu_top.sv; its layout is the contract's): the matrix unit's cycle, the stalls.
  uint8_t Obs() const {
    return static_cast<uint8_t>(mxu_cycle | (HostStall() ? hw::kObsHostMemStall : 0) |
                                (WeightStall() ? hw::kObsWeightMemStall : 0) |
                                (FifoFull() ? hw::kObsWeightDmaStallFifoFull : 0));
  }
  // rtl/tpu_top.sv's progress: anything fired or moved.
  bool Progress() const {
    const uint64_t lanes_moved = Lanes([](const LaneCycle& l) {
      return l.a_fire || l.load || l.out || l.wm_fire || l.wm_resp || l.ub_read || l.w_take;
    });
    return issue.issue == kFire || push || hm_fire || hm_resp || hb_fire || hb_resp ||
           lanes_moved != 0 || acc_rd || vpu_out || vec_reads != 0 || vec_writes != 0;
  }
  // n: the array size; row: a row's bytes.
  void Count(uint64_t* cnt, uint64_t k, uint64_t n, uint64_t row) const;
};

// This cycle's increments of every counter, `k` times (more than once for the cycles that
// repeat this one).
void Cycle::Count(uint64_t* cnt, uint64_t k, uint64_t n, uint64_t row) const {
  const uint8_t is = issue.issue;
  cnt[hw::kCounterCycles] += k;
  cnt[hw::kCounterBusyHostDma] += k * busy.host_dma;
  cnt[hw::kCounterBusyWeightDma] += k * busy.weight_dma;
  cnt[hw::kCounterBusyMatrix] += k * busy.matrix;
  cnt[hw::kCounterBusyActivate] += k * busy.activate;
  cnt[hw::kCounterBusyVector] += k * busy.vector;
  // Every cycle of the matrix unit is exactly one of these five.
  cnt[hw::kMxuCycleCounter[mxu_cycle]] += k;
  // TPU v1's categories of the cycles the matrix unit does not work (rtl/tpu_top.sv).
  if (mxu_cycle == hw::kMxuDrain || mxu_cycle == hw::kMxuIdle) {
    const bool raw = is == kUbHazard || is == kAccHazard || is == kParamHazard || is == kDrain;
    cnt[busy.host_dma ? hw::kCounterWaitInput
        : busy.vector ? hw::kCounterWaitVector
        : raw         ? hw::kCounterWaitRaw
                      : hw::kCounterWaitNonMatrix] += k;
  }
  if (is != kHalted) cnt[hw::kIssueCounter[is]] += k;
  cnt[hw::kCounterWeightDmaStallFifoFull] += k * FifoFull();
  cnt[hw::kCounterHostMemStall] += k * HostStall();
  cnt[hw::kCounterWeightMemStall] += k * WeightStall();
  // A feeder's read in the cycle its matmul starts reads nothing (rtl/tpu_mxu_feeder.sv).
  const int starting = issue.Starts(hw::kUnitMatrix) ? issue.d->mxu : -1;
  uint64_t f_reads = 0;
  for (int m = 0; m < lanes; ++m) f_reads += lane[static_cast<size_t>(m)].f_rd && m != starting;
  const uint64_t w_reads = Lanes([](const LaneCycle& l) { return l.ub_read; });
  cnt[hw::kCounterUbReads] += k * (f_reads + w_reads + h.ub_read + res_read + vec_reads);
  cnt[hw::kCounterUbWrites] += k * (uint64_t{h.resp_take && !host_params} + vpu_out + vec_writes);
  cnt[hw::kCounterAccReads] += k * acc_rd;
  cnt[hw::kCounterAccWrites] += k * Lanes([](const LaneCycle& l) { return l.out; });
  cnt[hw::kCounterWeightFifoPushes] += k * Lanes([](const LaneCycle& l) { return l.w_take; });
  cnt[hw::kCounterWeightFifoPops] += k * Lanes([](const LaneCycle& l) { return l.load; });
  cnt[hw::kCounterWeightTiles] += k * Lanes([](const LaneCycle& l) { return l.switch_fire; });
  cnt[hw::kCounterParamWrites] += k * (h.resp_take && host_params);
  cnt[hw::kCounterHostBytesRead] += k * (hm_fire && !host_write ? row : 0);
  cnt[hw::kCounterHostBytesWritten] += k * (hm_fire && host_write ? row : 0);
  cnt[hw::kCounterWeightBytesRead] +=
      k * row * ((hb_fire && !host_write) + Lanes([](const LaneCycle& l) { return l.wm_fire; }));
  cnt[hw::kCounterWeightBytesWritten] += k * (hb_fire && host_write ? row : 0);
  cnt[hw::kCounterMacs] += k * n * n * Lanes([](const LaneCycle& l) { return l.a_fire; });
  cnt[hw::kCounterVpuRowsIn] += k * vpu_in;
  cnt[hw::kCounterVpuRowsOut] += k * vpu_out;
}

// What the shared memories did for a core in a cycle: whether its host request was taken
// (the arbiter granted it and the memory was ready) and whether a read row came back for
// it; the same for each of its weight-memory ports (bit m: matrix unit m's weight DMA's, bit
// units: the host DMA's).
struct PortAnswer {
  bool hm_ready = false, hm_resp = false;
  uint32_t wm_ready = 0, wm_resp = 0;
};

// The row the host DMA's request writes in the cycle (write_host's into the host memory,
// write_hbm's into HBM), into the chip's memories.
void PortWrites(const Units& u, const Cycle& c, ChipValues* values, ValueWorker& worker) {
  if (!values || !c.host_write) return;
  if (c.hm_fire) worker.HostWrite(values, u.hdma.ReqAddr(), u.hdma.WriteRow());
  if (c.hb_fire) worker.HbmWrite(values, u.hdma.HbmAddr(), u.hdma.WriteRow());
}

// The system's side of a cycle for one core (sim/system/tpu_system.cc): its memory
// requests taken or not, a read row presented, and an instruction handed over while the
// queue has room (`feed`: the core still has words to take).
Cycle Ports(Units& u, const UnitsBusy& busy, const PortAnswer& a, ChipValues* values,
            ValueWorker& worker, bool feed, uint64_t iq_depth) {
  Cycle c;
  c.busy = busy;
  c.moved = u.ctl.ProgressQ();
  c.host_write = u.hdma.Writing();
  c.host_params = u.hdma.Params();
  c.hm_valid = u.hdma.ReqValid();
  c.hm_ready = a.hm_ready;
  c.hm_fire = c.hm_valid && c.hm_ready;
  c.moved = c.moved || c.hm_fire;
  c.hm_resp = a.hm_resp;
  c.lanes = static_cast<int>(u.lanes.size());
  const size_t hb = u.lanes.size();  // the host DMA's weight-memory port
  c.hb_valid = u.hdma.HbmReqValid();
  c.hb_ready = (a.wm_ready >> hb & 1u) != 0;
  c.hb_fire = c.hb_valid && c.hb_ready;
  PortWrites(u, c, values, worker);
  c.hb_resp = (a.wm_resp >> hb & 1u) != 0;
  c.moved = c.moved || c.hb_fire;
  for (size_t m = 0; m < u.lanes.size(); ++m) {
    const Lane& l = u.lanes[m];
    LaneCycle& lc = c.lane[m];
    lc.fifo_full = l.wdma.FifoFull(l.fifo, u.n);
    lc.wm_valid = l.wdma.ReqValid(l.fifo);
    lc.wm_ready = (a.wm_ready >> m & 1u) != 0;
    lc.wm_fire = lc.wm_valid && lc.wm_ready;
    lc.wm_resp = (a.wm_resp >> m & 1u) != 0;
    c.moved = c.moved || lc.wm_fire;
  }
  c.push = feed && u.ctl.Queued() < iq_depth;
  c.moved = c.moved || c.push;
  return c;
}

// Every unit's signals in the cycle, from its registers and what the ports and the issue
// stage did.
void Signals(const Units& u, uint64_t cycle, Cycle* c) {
  c->h = u.hdma.Cycle(c->hm_fire || c->hb_fire, c->hm_resp || c->hb_resp);
  c->mxu_cycle = hw::kMxuIdle;
  for (size_t m = 0; m < u.lanes.size(); ++m) {
    const Lane& l = u.lanes[m];
    LaneCycle& lc = c->lane[m];
    lc.w_take = l.wdma.Take(lc.wm_resp, l.fifo, u.n);
    lc.ub_read = l.wdma.UbRead(l.fifo, u.n);
    const bool a_valid = l.feed.Valid(), a_switch = l.feed.Switch();
    lc.a_last = l.feed.Last();
    lc.a_fire = a_valid && (!a_switch || l.mxu.ShadowFull());
    lc.switch_fire = lc.a_fire && a_switch;
    lc.load = l.fifo.NotEmpty() && l.mxu.WeightReady(lc.switch_fire);
    lc.f_rd = l.feed.Read(lc.a_fire);
    lc.mxu_cycle = lc.a_fire          ? hw::kMxuStream
                   : lc.load          ? hw::kMxuLoad
                   : a_valid          ? hw::kMxuStall
                   : l.mxu.InFlight() ? hw::kMxuDrain
                                      : hw::kMxuIdle;
    c->mxu_cycle = std::min(c->mxu_cycle, lc.mxu_cycle);
    lc.out = l.mxu.Out(cycle);
  }
  c->acc_rd = u.act.AccRead(c->issue.Starts(hw::kUnitActivate));
  c->vpu_in = u.act.RowIn();
  c->vpu_out = u.act.Out();
  c->res_read = u.act.ResidualRead();
  c->vec_reads = u.vec.ReadRows();
  c->vec_writes = u.vec.WriteRows();
}

// The clock edge that ends the cycle: every unit's registers at once; the instruction that
// issues takes effect on the chip's memories (ChipValues, through the worker).
void Edge(Units& u, const Cycle& c, uint64_t cycle, uint64_t n, ChipValues* values,
          ValueWorker& worker) {
  const Controller::Decision& s = c.issue;
  if (s.go && values) worker.Issue(values, s.d);
  auto start = [&s](int unit) { return s.Starts(unit) ? s.d : nullptr; };
  uint8_t last = 0;
  for (size_t m = 0; m < u.lanes.size(); ++m)
    last |= static_cast<uint8_t>((c.lane[m].a_fire && c.lane[m].a_last) << m);
  u.ctl.Edge(s, c.push, last, n, c.Progress());
  u.hdma.Edge(start(hw::kUnitHostDma), c.h, c.hm_fire || c.hb_fire, u.row_bytes, u.param_rows);
  const Decoded* wdma = start(hw::kUnitWeightDma);
  const Decoded* feed = start(hw::kUnitMatrix);
  for (size_t m = 0; m < u.lanes.size(); ++m) {
    Lane& l = u.lanes[m];
    const LaneCycle& lc = c.lane[m];
    l.wdma.Edge(wdma && wdma->mxu == m ? wdma : nullptr, lc.wm_fire || lc.ub_read, lc.ub_read,
                lc.w_take, static_cast<uint32_t>(n));
    l.fifo.Edge(lc.w_take, lc.load);
    l.feed.Edge(feed && feed->mxu == m ? feed : nullptr, lc.f_rd, lc.a_fire);
    l.mxu.Edge(cycle, lc.load, lc.switch_fire, lc.out, lc.a_fire);
  }
  u.act.Edge(start(hw::kUnitActivate), c.acc_rd, c.vpu_out);
  u.vec.Edge(start(hw::kUnitVector));
}

// The clock edges of cycles first .. first + k - 1, which repeat `c` (Repeats) but for
// whether the activation unit writes a row: each unit's edges at once, only their counts
// moving, the host DMA's rows written one by one, the activation unit's edges one by one
// while it runs. Returns how many of the cycles write a row.
uint64_t Edges(Units& u, const Cycle& c, uint64_t first, uint64_t k, ChipValues* values,
               ValueWorker& worker) {
  const bool fire = c.hm_fire || c.hb_fire;
  if (values && c.host_write && fire) {
    for (uint64_t i = 0; i < k; ++i) {
      PortWrites(u, c, values, worker);
      u.hdma.Edges(c.h, fire, 1, u.row_bytes);
    }
  } else {
    u.hdma.Edges(c.h, fire, k, u.row_bytes);
  }
  u.ctl.Edges(c.issue, k, c.Progress());
  for (size_t m = 0; m < u.lanes.size(); ++m) {
    Lane& l = u.lanes[m];
    const LaneCycle& lc = c.lane[m];
    l.wdma.Edges(lc.wm_fire || lc.ub_read, lc.ub_read, lc.w_take, k, u.n);
    l.fifo.Edges(lc.w_take, lc.load, k);
    l.feed.Edges(lc.f_rd, lc.a_fire, k);
    l.mxu.Edges(first, k, lc.load, lc.out, lc.a_fire);
  }
  u.vec.Edges(k);
  uint64_t outs = 0;
  for (uint64_t i = 0; i < k && !u.act.Idle(); ++i) {
    const bool out = u.act.Out();
    outs += out;
    u.act.Edge(nullptr, c.acc_rd, out);
  }
  return outs;
}

// Where a run that stopped moving is stuck.
sim::StallInfo Stuck(const Units& u, const UnitsBusy& busy, const uint8_t* words, uint64_t quiet) {
  sim::StallInfo st;
  st.quiet_cycles = quiet;
  st.pc = u.ctl.Retired();
  st.opcode = u.ctl.Retired() < u.ctl.Fed() ? words[hw::kInstructionBytes * u.ctl.Retired()] : -1;
  st.issue = u.ctl.IssueQ();
  st.busy = busy.Bits();
  st.wait_weights = false;
  for (const Lane& l : u.lanes)
    st.wait_weights = st.wait_weights || (l.feed.Switch() && !l.mxu.ShadowFull());
  return st;
}

// Nothing changes in the cycle but time: the registers hold, so the cycles up to the next
// event (a memory port becoming ready or answering, a row leaving the array, the
// watchdog) repeat it exactly.
bool Steady(const Units& u, const Cycle& c) {
  // An instruction failing its checks halts the chip at this edge; a halted controller
  // stays so.
  return !c.Progress() && !u.ctl.ProgressQ() && u.ctl.IssueQ() == c.issue.issue &&
         !u.ctl.Draining() && !c.h.ub_read && !u.hdma.RowsPending() &&
         c.Lanes([](const LaneCycle& l) { return l.f_rd; }) == 0 &&
         std::none_of(u.lanes.begin(), u.lanes.end(),
                      [](const Lane& l) { return l.feed.Pending() || l.wdma.UbPending(); }) &&
         u.act.PipeEmpty() && !u.vec.Busy() && (c.issue.issue != kHalted || u.ctl.Halted());
}

// How many cycles after `cycle` repeat its signals while rows move a row (or a group) a
// cycle, but for whether the activation unit writes a row (one in four with 2 x 2 pooling):
// a matmul streaming, rows leaving the array, an activate reading a row a cycle, a vector
// instruction in the middle of its rows, the host DMA's rows to or from a memory, weight
// rows into the FIFO and the shadow registers. The least that each unit allows (Repeats),
// provided the memories answer each of those cycles as they answered this one (the
// caller's to check). None where an instruction issues or is pushed, or nothing moves.
// Every other register then holds, and the units' edges move only their counts.
uint64_t Repeats(const Units& u, const Cycle& c, uint64_t cycle) {
  const Controller::Decision& s = c.issue;
  if (s.go || c.push || !c.Progress() || (s.issue == kHalted && !u.ctl.Halted())) return 0;
  uint64_t k = std::min({u.ctl.DrainRepeats(), u.act.Repeats(), u.vec.Repeats(),
                         u.hdma.Repeats(c.h, c.hm_fire || c.hb_fire, c.hm_resp || c.hb_resp)});
  for (size_t m = 0; m < u.lanes.size() && k > 0; ++m) {
    const Lane& l = u.lanes[m];
    const LaneCycle& lc = c.lane[m];
    k = std::min(
        {k, l.wdma.Repeats(l.fifo, lc.wm_fire, lc.wm_resp, lc.ub_read, lc.w_take, lc.load, u.n),
         l.mxu.LoadRepeats(lc.load, lc.switch_fire), l.feed.Repeats(lc.a_fire, lc.f_rd),
         l.mxu.Repeats(cycle, lc.out, lc.a_fire)});
  }
  return k;
}

}  // namespace

// A core's state in a run: its units, its program and its counters.
struct FastChip::Core {
  Core(const ChipParams& p, ChipValues* v) : u(p), values(v) {}
  Units u;
  ChipValues* values;  // null: timing only
  std::vector<Decoded> prog;
  const uint8_t* words = nullptr;
  size_t count = 0;
  uint64_t cnt[hw::kNumCounters] = {};
  bool ended = false;
  RunResult r;
  // This cycle.
  UnitsBusy busy;
  Cycle c;
  // Cycles observed but not yet reported (RunOptions::on_cycles): a run of alike cycles.
  struct Observed {
    uint64_t first = 0, count = 0;
    uint8_t issue = 0, busy = 0, obs = 0, mxus = 0;
  } observed;
  // Reports cycles [first, first + count) as on_cycles does, joining them to the run before
  // when they follow it and are alike. Cycles that issue an instruction are never joined:
  // an observer sees each instruction's issue on its own (timeline.h, cycle_attribution.h
  // open a unit on the edge after it). Calls on_cycles far less often than every cycle.
  void Observe(const RunOptions& o, int core, uint64_t first, uint64_t count) {
    Observed& p = observed;
    const uint8_t issue = c.issue.issue, bits = busy.Bits(), obs = c.Obs(), mxus = busy.mxus;
    const bool fire = issue == static_cast<uint8_t>(hw::Issue::kFire);
    if (p.count > 0 && p.first + p.count == first && !fire && p.issue == issue && p.busy == bits &&
        p.obs == obs && p.mxus == mxus) {
      p.count += count;
      return;
    }
    Flush(o, core);
    p = {first, count, issue, bits, obs, mxus};
    if (fire) Flush(o, core);
  }
  void Flush(const RunOptions& o, int core) {
    Observed& p = observed;
    if (p.count > 0) o.on_cycles(core, p.first, p.count, p.issue, p.busy, p.obs, p.mxus);
    p.count = 0;
  }
};

FastChip::FastChip(const ChipParams& p)
    : p_(p),
      external_((CheckParams(p), p)),
      host_(static_cast<uint64_t>(hw::RowBytes(p)),
            static_cast<uint64_t>(p.host_mem_bytes_per_cycle),
            static_cast<uint64_t>(p.host_mem_latency_cycles)),
      weight_(static_cast<uint64_t>(hw::RowBytes(p)),
              static_cast<uint64_t>(p.weight_mem_bytes_per_cycle),
              static_cast<uint64_t>(p.weight_mem_latency_cycles),
              std::clamp(p.cores, 1, MemArbiter::kMaxCores) *
                  (std::clamp(p.mxus_per_core, 1, kMaxMxus) + 1)) {
  if (p.cores < 1 || p.cores > MemArbiter::kMaxCores) {
    throw std::invalid_argument("a chip has 1 to 16 cores");
  }
  for (int i = 0; i < p.cores; ++i) values_.push_back(std::make_unique<ChipValues>(p, external_));
}

FastChip::~FastChip() = default;

RunResult FastChip::Run(const uint8_t* words, size_t count, const RunOptions& o) {
  ChipRunResult r = RunCores({{words, count}}, o);
  return r.cores[0];
}

namespace {

// A core's end (sim/system/tpu_system.cc checks these before anything else in a cycle):
// halted, or its program fed and every unit idle. Core 0 always runs; another core only
// with a program.
bool Ends(const Units& u, const UnitsBusy& busy, size_t count, RunResult* r) {
  if (!u.ctl.Halted() && !(u.ctl.Fed() == count && u.ctl.Queued() == 0 && busy.AllIdle())) {
    return false;
  }
  r->end = !u.ctl.Halted()                     ? RunEnd::kNoHalt
           : u.ctl.Status() == hw::Status::kOk ? RunEnd::kHalted
                                               : RunEnd::kError;
  return true;
}

// The run's end from its cores': an error on any, else the watchdog, else no halt, else
// halted (sim::TpuSystemBase::ChipState is the same rule).
RunEnd ChipEnd(const std::vector<RunResult>& cores) {
  RunEnd end = RunEnd::kHalted;
  for (const RunResult& r : cores) {
    if (r.end == RunEnd::kError) return RunEnd::kError;
    if (r.end == RunEnd::kWatchdog || (r.end == RunEnd::kNoHalt && end != RunEnd::kWatchdog)) {
      end = r.end;
    }
  }
  return end;
}

}  // namespace

bool FastChip::EndCores(std::vector<Core>* cores, uint64_t cycle) {
  bool all = true;
  for (Core& k : *cores) {
    k.busy = k.u.Busy();
    if (!k.ended && Ends(k.u, k.busy, k.count, &k.r)) {
      k.ended = true;
      k.r.cycles = cycle;
    }
    all = all && k.ended;
  }
  return all;
}

// What the cores ask of the memories this cycle: the host port (core c: bit c) and the
// weight-memory ports (core c's unit m: port c x (units + 1) + m, its host DMA's
// c x (units + 1) + units).
Requests FastChip::Asking(const std::vector<Core>& cores) {
  Requests r;
  const size_t units = cores[0].u.lanes.size(), ports = units + 1;
  for (size_t i = 0; i < cores.size(); ++i) {
    const Units& u = cores[i].u;
    r.host |= uint32_t{u.hdma.ReqValid()} << i;
    r.host_writing |= uint32_t{u.hdma.Writing()} << i;
    for (size_t m = 0; m < units; ++m) {
      const Lane& l = u.lanes[m];
      r.weight |= uint64_t{l.wdma.ReqValid(l.fifo)} << (i * ports + m);
    }
    r.weight |= uint64_t{u.hdma.HbmReqValid()} << (i * ports + units);
    r.weight_writing |= uint64_t{u.hdma.Writing()} << (i * ports + units);
  }
  return r;
}

// What the memories answer `r` in `cycle`, nothing taken yet: the host port's arbiter grants
// one core's request, which the memory takes when ready, and a read row comes back to the
// core that asked; the weight-memory ports take turns at the weight memory's channel, each
// getting its own rows.
Answers FastChip::Answer(const Requests& r, const MemArbiter& host_arb, uint64_t cycle) const {
  Answers a;
  a.host_grant = host_arb.Grant(r.host);
  a.host_taken = a.host_grant >= 0 && host_.Ready(cycle);
  a.host_resp = host_.Presents(cycle);
  a.weight_taken = weight_.WouldAccept(cycle, r.weight);
  const int ports = p_.cores * (p_.mxus_per_core + 1);
  for (int port = 0; port < ports; ++port)
    a.weight_resp |= uint64_t{weight_.Presents(cycle, port) >= 0} << port;
  return a;
}

// The clock edge of the memories' side: the requests Answer said are taken go in, the read
// rows presented leave, the arbiter moves on.
void FastChip::Take(const Requests& r, const Answers& a, MemArbiter* host_arb, uint64_t cycle) {
  if (a.host_taken) host_.Accept(cycle, (r.host_writing >> a.host_grant & 1u) == 0, a.host_grant);
  if (a.host_resp >= 0) host_.Respond(cycle);
  weight_.AcceptRequests(cycle, r.weight, r.weight_writing);
  host_arb->Edge(a.host_grant, a.host_taken);
  for (uint64_t w = a.weight_resp; w != 0; w &= w - 1) weight_.Respond(cycle, __builtin_ctzll(w));
}

// The memories' side of a cycle (Asking, Answer, Take), kept as the cycle's, then each
// core's ports (Ports). Whether anything moved.
bool FastChip::StepPorts(std::vector<Core>* cores, MemArbiter* host_arb, uint64_t cycle,
                         uint64_t iq_depth) {
  asked_ = Asking(*cores);
  answered_ = Answer(asked_, *host_arb, cycle);
  Take(asked_, answered_, host_arb, cycle);
  const uint32_t ports = static_cast<uint32_t>((*cores)[0].u.lanes.size()) + 1;
  const uint32_t mask = (1u << ports) - 1;
  bool moved = false;
  for (size_t i = 0; i < cores->size(); ++i) {
    Core& k = (*cores)[i];
    const int core = static_cast<int>(i);
    PortAnswer a{answered_.host_taken && answered_.host_grant == core, answered_.host_resp == core};
    a.wm_ready = static_cast<uint32_t>(answered_.weight_taken >> (i * ports)) & mask;
    a.wm_resp = static_cast<uint32_t>(answered_.weight_resp >> (i * ports)) & mask;
    k.c = Ports(k.u, k.busy, a, k.values, worker_, !k.ended && k.u.ctl.Fed() < k.count, iq_depth);
    moved = moved || k.c.moved;
  }
  return moved;
}

// Every core still running stops; the first is where the run was stuck.
void FastChip::StopOnWatchdog(std::vector<Core>* cores, uint64_t cycle, uint64_t quiet) {
  bool first = true;
  for (size_t i = 0; i < cores->size(); ++i) {
    Core& k = (*cores)[i];
    if (k.ended) continue;
    k.ended = true;
    k.r.end = RunEnd::kWatchdog;
    k.r.cycles = cycle;
    if (first) {
      k.r.stall = Stuck(k.u, k.busy, k.words, quiet);
      k.r.stall.core = static_cast<int>(i);
      first = false;
    }
  }
}

// Each core's program decoded (the controller's registers as the instructions leave
// them), its values' run begun; *total_words the instructions of all.
void FastChip::LoadCores(const std::vector<CoreProgram>& programs, bool timing_only,
                         std::vector<Core>* cores, uint64_t* total_words) {
  cores->reserve(values_.size());
  *total_words = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    cores->emplace_back(p_, timing_only ? nullptr : values_[i].get());
    Core& k = cores->back();
    if (i < programs.size()) {
      k.words = programs[i].words;
      k.count = programs[i].count;
    }
    k.ended = i > 0 && k.count == 0;  // not started: idle throughout
    Registers regs;
    k.prog.resize(k.count);
    for (size_t w = 0; w < k.count; ++w) {
      k.prog[w] = Decode(k.words + hw::kInstructionBytes * w, p_, regs);
    }
    if (k.values) k.values->BeginRun();
    *total_words += k.count;
  }
}

// Each core's controller decides this cycle (knowing which cores are at a barrier or
// halted: rtl/tpu_chip.sv), its signals and counters follow; whether every core's state
// would repeat unchanged next cycle.
bool FastChip::DecideAndCount(std::vector<Core>* cores, uint64_t cycle, const RunOptions& o,
                              uint64_t* repeats) {
  const uint64_t n = static_cast<uint64_t>(p_.array_dim);
  uint32_t arrived = 0;
  for (size_t i = 0; i < cores->size(); ++i) {
    const Core& k = (*cores)[i];
    if (k.u.ctl.Halted() || k.u.ctl.AtBarrier(k.prog, k.busy)) arrived |= uint32_t{1} << i;
  }
  bool steady = true;
  *repeats = kNever;
  for (size_t i = 0; i < cores->size(); ++i) {
    Core& k = (*cores)[i];
    k.c.issue = k.u.ctl.Decide(k.prog, k.busy, arrived);
    Signals(k.u, cycle, &k.c);
    steady = steady && Steady(k.u, k.c);
    if (*repeats > 0) *repeats = std::min(*repeats, Repeats(k.u, k.c, cycle));
    if (!k.u.ctl.Halted()) k.c.Count(k.cnt, 1, n, k.u.row_bytes);
    if (o.on_cycles && !k.ended) k.Observe(o, static_cast<int>(i), cycle, 1);
  }
  return steady;
}

// A steady chip repeats this cycle until the next event of a memory or a matrix unit, or
// the watchdog: those cycles counted at once, *cycle and *quiet moved past them.
void FastChip::SkipSteady(std::vector<Core>* cores, uint64_t* cycle, uint64_t* quiet,
                          const RunOptions& o) {
  const uint64_t n = static_cast<uint64_t>(p_.array_dim);
  uint64_t next = std::min(
      {host_.NextEvent(*cycle), weight_.NextEvent(*cycle), *cycle + (o.watchdog_cycles - *quiet)});
  for (const Core& k : *cores)
    for (const Lane& l : k.u.lanes) next = std::min(next, l.mxu.NextOut());
  if (next <= *cycle + 1 || next == kNever) return;
  const uint64_t skip = next - *cycle - 1;  // cycles cycle+1 .. next-1 repeat this one
  for (size_t i = 0; i < cores->size(); ++i) {
    Core& k = (*cores)[i];
    if (!k.u.ctl.Halted()) k.c.Count(k.cnt, skip, n, k.u.row_bytes);
    if (o.on_cycles && !k.ended) k.Observe(o, static_cast<int>(i), *cycle + 1, skip);
  }
  *quiet += skip;
  *cycle += skip;
}

// A chip whose cores repeat this cycle's signals for up to `k` more cycles (Repeats) while
// rows move: each of those cycles whose memories answer the cycle's requests as they
// answered this cycle's is taken, up to the first that they answer otherwise (with nothing
// asked or presented, up to the memories' next event); the memories one cycle at a time,
// then the units' clock edges (Edges), the counters and observations at once (the cycles
// that write a row and those that do not); *cycle moves past them. Whatever moves, the
// watchdog's count stays at zero.
void FastChip::SkipRegular(std::vector<Core>* cores, MemArbiter* host_arb, uint64_t* cycle,
                           uint64_t k, const RunOptions& o) {
  uint64_t taken = 0;
  if (asked_.host == 0 && asked_.weight == 0 && answered_.host_resp < 0 &&
      answered_.weight_resp == 0) {
    const uint64_t next = std::min(host_.NextEvent(*cycle), weight_.NextEvent(*cycle));
    taken = next == kNever ? k : std::min(k, next - *cycle - 1);
    if (taken == kNever) return;
  } else {
    k = std::min<uint64_t>(k, uint64_t{1} << 20);  // then a cycle of its own, to look again
    for (; taken < k; ++taken) {
      const uint64_t t = *cycle + taken + 1;
      if (!(Answer(asked_, *host_arb, t) == answered_)) break;
      Take(asked_, answered_, host_arb, t);
    }
  }
  if (taken == 0) return;
  const uint64_t n = static_cast<uint64_t>(p_.array_dim);
  for (size_t i = 0; i < cores->size(); ++i) {
    Core& c = (*cores)[i];
    const uint64_t outs = Edges(c.u, c.c, *cycle + 1, taken, c.values, worker_);
    if (!c.u.ctl.Halted()) {
      c.c.vpu_out = true;
      c.c.Count(c.cnt, outs, n, c.u.row_bytes);
      c.c.vpu_out = false;
      c.c.Count(c.cnt, taken - outs, n, c.u.row_bytes);
    }
    if (o.on_cycles && !c.ended) c.Observe(o, static_cast<int>(i), *cycle + 1, taken);
  }
  *cycle += taken;
}

// Each core's end, status and counters; the programs' cores only.
ChipRunResult FastChip::Results(std::vector<Core>* cores, size_t programs, uint64_t cycles) {
  ChipRunResult result;
  result.cycles = cycles;
  for (Core& k : *cores) {
    k.r.status = k.u.ctl.Status();
    k.r.error_pc = k.u.ctl.ErrorPc();
    k.r.fed = k.u.ctl.Fed();
    for (int i = 0; i < hw::kNumCounters; ++i) k.r.counters[i] = k.cnt[i];
    result.cores.push_back(k.r);
  }
  result.cores.resize(programs);
  result.end = ChipEnd(result.cores);
  return result;
}

ChipRunResult FastChip::RunCores(const std::vector<CoreProgram>& programs, const RunOptions& o) {
  if (programs.empty() || programs.size() > values_.size()) {
    throw std::invalid_argument("RunCores takes one program per core, at most " +
                                std::to_string(values_.size()));
  }
  const uint64_t iq_depth = static_cast<uint64_t>(p_.iq_depth);
  std::vector<Core> cores;
  uint64_t total_words = 0;
  LoadCores(programs, o.timing_only, &cores, &total_words);
  // The values handed over refer to the cores' programs: applied before those go, whatever
  // ends the run.
  struct Drain {
    ValueWorker& w;
    ~Drain() {
      try {
        w.Finish();
      } catch (...) {  // the run is ending with an exception of its own
      }
    }
  } drain{worker_};
  host_.Reset();
  weight_.Reset();
  MemArbiter host_arb(Cores());
  uint64_t quiet = 0, next_progress = 0xffff, cycle = 0;
  for (;; ++cycle) {
    if (EndCores(&cores, cycle)) break;
    const bool moved = StepPorts(&cores, &host_arb, cycle, iq_depth);
    quiet = moved ? 0 : quiet + 1;
    if (quiet >= o.watchdog_cycles) {
      StopOnWatchdog(&cores, cycle, quiet);
      break;
    }
    uint64_t repeats = 0;
    const bool steady = DecideAndCount(&cores, cycle, o, &repeats);
    for (Core& k : cores)
      Edge(k.u, k.c, cycle, static_cast<uint64_t>(p_.array_dim), k.values, worker_);
    if (steady) {
      SkipSteady(&cores, &cycle, &quiet, o);
    } else if (repeats > 0) {
      SkipRegular(&cores, &host_arb, &cycle, repeats, o);
    }
    if (o.progress && cycle >= next_progress && total_words > 0) {
      next_progress = cycle + 0x10000;
      uint64_t fed = 0;
      for (const Core& k : cores) fed += k.u.ctl.Fed();
      o.progress(static_cast<double>(fed) / static_cast<double>(total_words));
    }
  }
  if (o.on_cycles) {
    for (size_t i = 0; i < cores.size(); ++i) cores[i].Flush(o, static_cast<int>(i));
  }
  worker_.Finish();
  return Results(&cores, programs.size(), cycle);
}

}  // namespace tpu::fast
