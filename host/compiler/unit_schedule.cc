// See unit_schedule.h.
#include "host/compiler/unit_schedule.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>

#include "fast/controller.h"
#include "fast/decode.h"
#include "host/engine/fast_engine.h"

namespace tpu::compiler {
namespace {

using hw::Opcode;

// How far an instruction may move up past others, in instructions.
constexpr size_t kWindow = 2048;
// The vector instructions after the vector unit's first not placed that may go before it.
constexpr size_t kOutOfOrder = 128;
// The stream of set_window and set_residual (the others': a unit's, or 8 (m + 1) for matrix
// unit m's).
constexpr int kRegisters = 1000;
// Op::unit's values are below it (a matrix unit's 8 (m + 1) + its unit).
constexpr int kUnits = 8 * (static_cast<int>(hw::kOpdMatmulMxu.Max()) + 3);
// Free's `from` before it has looked.
constexpr size_t kUnknown = SIZE_MAX;

struct Op {
  // Of the controller's decoding (fast::Decoded), what the estimate reads: a program of a
  // million instructions keeps a million of these.
  struct Decoded {
    fast::Footprint fp;
    int unit = -1;
    uint8_t mxu = 0;
  } d;
  int unit = -1;      // the estimate's unit: the controller's, per matrix unit where it has one
  double cycles = 1;  // the unit's time for it, estimated
  bool fence = false;
  // set_window or set_residual: kept in order with the instructions that read the register
  // (Ordered), not a fence: the controller retires it at once, and each matmul or activate
  // took the geometry or residual it set as it was decoded.
  Opcode reg = Opcode::kNop;
  // The instructions that keep their order among themselves: a matrix unit's with its
  // weight DMA's (its FIFO takes tiles in order), each other unit's; -1: a fence.
  int stream = -1;
  uint32_t tiles = 0;       // read_weights, load_weights: the tiles it brings its unit
  bool takes_tile = false;  // a matmul that starts the next tile (switch)
};

bool Overlap(bool a_use, uint32_t a_lo, uint32_t a_hi, bool b_use, uint32_t b_lo, uint32_t b_hi) {
  return a_use && b_use && fast::Overlaps(a_lo, a_hi, b_lo, b_hi);
}

// Whether a's and b's footprints share a row that one of them writes.
bool Conflict(const fast::Footprint& a, const fast::Footprint& b) {
  struct Range {
    bool use, wr;
    uint32_t lo, hi;
  };
  const Range ra[] = {{a.ub_use, a.ub_wr, a.ub_lo, a.ub_hi},
                      {a.ub2_use, false, a.ub2_lo, a.ub2_hi},
                      {a.ub3_use, false, a.ub3_lo, a.ub3_hi}};
  const Range rb[] = {{b.ub_use, b.ub_wr, b.ub_lo, b.ub_hi},
                      {b.ub2_use, false, b.ub2_lo, b.ub2_hi},
                      {b.ub3_use, false, b.ub3_lo, b.ub3_hi}};
  for (const Range& x : ra)
    for (const Range& y : rb)
      if ((x.wr || y.wr) && Overlap(x.use, x.lo, x.hi, y.use, y.lo, y.hi)) return true;
  if ((a.acc_wr || b.acc_wr) && a.acc_mxu == b.acc_mxu &&
      Overlap(a.acc_use, a.acc_lo, a.acc_hi, b.acc_use, b.acc_lo, b.acc_hi))
    return true;
  if ((a.par_wr || b.par_wr) &&
      Overlap(a.par_use, a.par_lo, a.par_hi, b.par_use, b.par_lo, b.par_hi))
    return true;
  return (a.wm_wr && (b.wm_rd || b.wm_wr)) || (b.wm_wr && a.wm_rd);
}

// The unit's time for `in` at the rates of the attainable bound (report/program_bound.h), a
// row over the host link at `link_cores` times its cycles: that many cores' programs run at
// once, and the link's arbiter takes their requests in turn (docs/timing.md, "Chips of
// several cores"), so that each gets 1 / link_cores of it while all of them read.
double CyclesOf(const isa::Instruction& in, const config::TpuConfig& c, int link_cores) {
  const double n = c.array_dim, len = in.length;
  switch (in.opcode) {
    case Opcode::kReadHost:
      return static_cast<double>(isa::ReadRows(in, hw::ElementBytes(c.dtype))) * c.HostRowCycles() *
                 link_cores +
             c.host_mem_latency_cycles;
    case Opcode::kWriteHost:
      return len * c.HostRowCycles();
    case Opcode::kReadHbm:
      return static_cast<double>(isa::ReadRows(in, hw::ElementBytes(c.dtype))) *
                 c.WeightRowCycles() +
             c.weight_mem_latency_cycles;
    case Opcode::kWriteHbm:
      return len * c.WeightRowCycles();
    case Opcode::kReadWeights:
      return len * n * c.WeightRowCycles() + c.weight_mem_latency_cycles;
    case Opcode::kLoadWeights:
      return (in.flags & hw::kFlagTranspose) ? len * (2 * n + 1) : len * n + 1;
    case Opcode::kMatmul:
    case Opcode::kActivate:
      return len;
    case Opcode::kVector:
      return c.VectorCycles(static_cast<hw::VectorOp>(hw::kOpdVectorOp.Get(in.aux)),
                            static_cast<int64_t>(in.length));
    default:
      return 1;
  }
}

// Whether a and b keep their order: one sets the window and the other is a matmul, or one
// sets the residual and the other is an activate.
bool Ordered(const Op& a, const Op& b) {
  auto reads = [](const Op& set, const Op& x) {
    return (set.reg == Opcode::kSetWindow && x.d.unit == hw::kUnitMatrix) ||
           (set.reg == Opcode::kSetResidual && x.d.unit == hw::kUnitActivate);
  };
  return reads(a, b) || reads(b, a);
}

// Decodes the program as the controller does; false where it refuses an instruction.
bool DecodeAll(const isa::Program& p, const config::TpuConfig& c, int link_cores,
               std::vector<Op>* ops) {
  const fast::ChipParams params = engine::FastEngine::ParamsFor(c);
  fast::Registers regs;
  ops->reserve(p.words.size());
  for (const isa::Word& w : p.words) {
    Op op;
    const fast::Decoded full = fast::Decode(w.data(), params, regs);
    if (full.check != hw::Status::kOk) return false;
    op.d = {full.fp, full.unit, full.mxu};
    const bool per_unit = op.d.unit == hw::kUnitMatrix || op.d.unit == hw::kUnitWeightDma;
    op.unit = op.d.unit < 0 ? -1 : op.d.unit + (per_unit ? 8 * (op.d.mxu + 1) : 0);
    const isa::Instruction in = isa::Decode(w);
    op.cycles = CyclesOf(in, c, link_cores);
    const bool weights = in.opcode == Opcode::kReadWeights || in.opcode == Opcode::kLoadWeights;
    op.tiles = weights ? in.length : 0;
    op.takes_tile = in.opcode == Opcode::kMatmul && (in.flags & hw::kFlagSwitch);
    // A sync, halt or barrier, and set_format (the number format every later instruction
    // reads), are fences; set_window and set_residual keep their order with each other
    // (a stream of their own) and with their readers (Ordered).
    if (in.opcode == Opcode::kSetWindow || in.opcode == Opcode::kSetResidual) op.reg = in.opcode;
    op.fence = full.sync || full.barrier || (op.d.unit < 0 && op.reg == Opcode::kNop);
    op.stream = op.fence                 ? -1
                : op.reg != Opcode::kNop ? kRegisters
                : per_unit               ? 8 * (op.d.mxu + 1)
                                         : op.d.unit;
    ops->push_back(op);
  }
  return true;
}

// The estimate: one instruction issued a cycle at most, each when its unit is free and the
// instructions still running whose footprints conflict with its own are done.
class Clock {
 public:
  Clock(double n, int fifo) : n_(n), fifo_(static_cast<size_t>(std::max(1, fifo))) {}
  double IssueAt(const Op& op) const {
    double at = Earliest(op);
    if (op.fence)
      for (const double free : free_) at = std::max(at, free);
    for (const auto& [other, done] : flight_)
      if (done > at && Conflict(other->d.fp, op.d.fp)) at = done;
    if (op.d.unit != hw::kUnitMatrix)  // (a unit's own matmuls run in order)
      for (const auto& [mxu, d] : drains_)
        if (d.end > at && Conflict(d.fp, op.d.fp)) at = d.end;
    return at;
  }
  // What IssueAt gives at the least for `op` (a fence waits for every unit too): the next
  // cycle, or its unit's free one.
  double Earliest(const Op& op) const {
    double at = t_ + 1;
    if (op.unit < 0) return at;
    return std::max(at, free_[static_cast<size_t>(op.unit)]);
  }
  void Issue(const Op& op) {
    t_ = IssueAt(op);
    double done = t_ + op.cycles;
    Fifo& f = fifos_[op.d.mxu];
    if (op.tiles > 0) {  // each tile waits for a slot: the tile `fifo` before it shifted out
      const double each = op.cycles / op.tiles;
      done = t_;
      for (uint32_t k = 0; k < op.tiles; ++k, ++f.pushed) {
        const size_t before = f.pushed >= fifo_ ? f.pushed - fifo_ : SIZE_MAX;
        if (before < f.popped.size()) done = std::max(done, f.popped[before]);
        done += each;
        f.arrive.push_back(done);
      }
    }
    if (op.takes_tile) {  // the unit waits for its tile, then shifts it in
      const double ready = f.arrive.empty() ? t_ : std::max(t_, f.arrive.front());
      if (!f.arrive.empty()) f.arrive.pop_front();
      f.popped.push_back(ready + n_);
      done = ready + std::max(op.cycles, n_);
    }
    if (op.unit >= 0) free_[static_cast<size_t>(op.unit)] = done;
    if (op.d.unit == hw::kUnitMatrix && op.d.fp.acc_use) Drains(op.d, done);
    flight_.emplace_back(&op, done);
    flight_.erase(std::remove_if(flight_.begin(), flight_.end(),
                                 [&](const auto& f) { return f.second <= t_; }),
                  flight_.end());
  }

 private:
  // A matrix unit's weight FIFO: when its tiles arrive (those not taken yet, in order), how
  // many were pushed, when each taken one had shifted into the array (its slot free).
  struct Fifo {
    std::deque<double> arrive;
    size_t pushed = 0;
    std::vector<double> popped;
  };
  // A matrix unit's accumulator rows still draining from its array, 2N cycles after its
  // last row entered: a matmul whose last row enters while the one before drains adds its
  // rows to that one's (the range from the lowest to the highest) and the drain starts
  // again (fast/controller.h). Only other units' instructions wait for it.
  struct Drain {
    double end = 0;
    fast::Footprint fp;
  };
  void Drains(const Op::Decoded& d, double last_row) {
    Drain& dr = drains_[d.mxu];
    const bool merge = dr.end > last_row;
    dr.fp.acc_use = dr.fp.acc_wr = true;
    dr.fp.acc_mxu = d.fp.acc_mxu;
    dr.fp.acc_lo = merge ? std::min(dr.fp.acc_lo, d.fp.acc_lo) : d.fp.acc_lo;
    dr.fp.acc_hi = merge ? std::max(dr.fp.acc_hi, d.fp.acc_hi) : d.fp.acc_hi;
    dr.end = last_row + 2 * n_;
  }

  double t_ = 0, n_;
  size_t fifo_;
  std::map<int, Drain> drains_;                                  // by matrix unit
  std::vector<double> free_ = std::vector<double>(kUnits, 0.0);  // by Op::unit
  std::map<int, Fifo> fifos_;                                    // by matrix unit
  std::vector<std::pair<const Op*, double>> flight_;             // issued, not done: when they are
};

// The instructions not placed yet and what each stream may place next: its first
// instruction not placed, where nothing before it that is not placed conflicts with it
// (checked from the earliest one it might conflict with, which only moves on).
class Ready {
 public:
  explicit Ready(const std::vector<Op>& ops)
      : ops_(ops), placed_(ops.size(), false), from_(ops.size(), kUnknown) {
    for (size_t i = 0; i < ops.size(); ++i) streams_[ops[i].stream].order.push_back(i);
  }
  bool Done() const { return lowest_ >= ops_.size(); }
  size_t Lowest() const { return lowest_; }
  void Place(size_t i) {
    placed_[i] = true;
    Stream& s = streams_[ops_[i].stream];
    for (; s.next < s.order.size() && placed_[s.order[s.next]]; ++s.next) s.from = kUnknown;
    while (lowest_ < ops_.size() && placed_[lowest_]) ++lowest_;
  }
  // Each stream's first instruction not placed that may go now (none before the lowest).
  std::vector<size_t> Candidates() {
    std::vector<size_t> out;
    for (auto& [key, s] : streams_) {
      if (key < 0 || s.next >= s.order.size()) continue;
      const size_t c = s.order[s.next];
      if (c == lowest_ || (c - lowest_ <= kWindow && Free(c, &s.from))) out.push_back(c);
      if (key != hw::kUnitVector) continue;
      // The vector unit's next few may go out of their order (one vector instruction's rows
      // are not another's): the context's staging beside the softmax.
      for (size_t k = s.next + 1, seen = 0; k < s.order.size() && seen < kOutOfOrder; ++k) {
        const size_t v = s.order[k];
        if (placed_[v]) continue;
        ++seen;
        if (v - lowest_ <= kWindow && Free(v, &from_[v])) out.push_back(v);
      }
    }
    return out;
  }

 private:
  struct Stream {
    std::vector<size_t> order;
    // from: the first instruction before order[next] that conflicts with it (kUnknown: not
    // looked for yet), or order[next] itself where none does.
    size_t next = 0, from = kUnknown;
  };
  // Whether no instruction not placed before c conflicts with it (`from` moved to the first
  // that does, or to c).
  bool Free(size_t c, size_t* from) const {
    // Where the first that conflicts is still not placed, it still conflicts: no need to ask.
    if (*from != kUnknown && *from >= lowest_ && *from < c && !placed_[*from]) return false;
    size_t j = *from == kUnknown ? lowest_ : std::max(*from, lowest_);
    for (; j < c; ++j)
      if (!placed_[j] &&
          (ops_[j].fence || Ordered(ops_[j], ops_[c]) || Conflict(ops_[j].d.fp, ops_[c].d.fp)))
        break;
    *from = j;
    return j == c;
  }

  const std::vector<Op>& ops_;
  std::vector<bool> placed_;
  std::map<int, Stream> streams_;
  std::vector<size_t> from_;  // each instruction's Free's from, where it goes out of its order
  size_t lowest_ = 0;
};

// Of two instructions that issue at once by the estimate, which goes first: the earlier in
// the program, but of two vector instructions the shorter (a short one is most often a
// head's staging, which a matrix unit waits for; a long one a step of a softmax or a
// LayerNorm over many rows, which can wait).
bool Before(const std::vector<Op>& ops, size_t a, size_t b) {
  const Op &x = ops[a], &y = ops[b];
  if (x.unit == hw::kUnitVector && y.unit == hw::kUnitVector && x.cycles != y.cycles)
    return x.cycles < y.cycles;
  return a < b;
}

}  // namespace

isa::Program ScheduleUnits(const isa::Program& program, std::vector<int32_t>* op_of,
                           const config::TpuConfig& config, int link_cores) {
  std::vector<Op> ops;
  if (!DecodeAll(program, config, std::max(1, link_cores), &ops)) return program;
  Ready ready(ops);
  Clock clock(config.array_dim, config.weight_fifo_tiles);
  std::vector<size_t> order;
  while (!ready.Done()) {
    // The lowest instruction not placed may always go; another stream's first goes instead
    // where, by the estimate, it issues sooner (where as soon: Before).
    size_t best = ready.Lowest();
    double at = clock.IssueAt(ops[best]);
    if (!ops[best].fence)
      for (const size_t c : ready.Candidates()) {
        // It issues at Earliest or later: where that cannot go first, no need to know when.
        const double e = clock.Earliest(ops[c]);
        if (e > at || (e == at && !Before(ops, c, best))) continue;
        const double t = clock.IssueAt(ops[c]);
        if (t < at || (t == at && Before(ops, c, best))) best = c, at = t;
      }
    clock.Issue(ops[best]);
    ready.Place(best);
    order.push_back(best);
  }
  isa::Program out;
  std::vector<int32_t> of;
  for (const size_t i : order) {
    out.words.push_back(program.words[i]);
    if (op_of && !op_of->empty()) of.push_back((*op_of)[i]);
  }
  if (op_of && !op_of->empty()) *op_of = std::move(of);
  return out;
}

}  // namespace tpu::compiler
