// See vector_schedule.h.
#include "host/compiler/vector_schedule.h"

#include <algorithm>
#include <deque>
#include <map>

#include "fast/decode.h"
#include "host/engine/fast_engine.h"

namespace tpu::compiler {
namespace {

using hw::Opcode;

// How far back a vector instruction may move, in instructions: the estimate's horizon.
constexpr size_t kWindow = 2048;
// The vector instructions not placed yet that may be taken out of their order.
constexpr size_t kCandidates = 32;

struct Op {
  fast::Decoded d;
  int unit = -1;      // the estimate's unit: the controller's, per matrix unit where it has one
  double cycles = 1;  // the unit's time for it, estimated
  bool vector = false, fence = false;
  uint32_t tiles = 0;       // read_weights, load_weights: the tiles it brings its unit
  bool takes_tile = false;  // a matmul that starts the next tile (switch)
};

bool Overlap(bool a_use, uint32_t a_lo, uint32_t a_hi, bool b_use, uint32_t b_lo, uint32_t b_hi) {
  return a_use && b_use && a_lo < b_hi && b_lo < a_hi;
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

// The unit's time for `in` at the rates of the attainable bound (report/program_bound.h).
double CyclesOf(const isa::Instruction& in, const config::TpuConfig& c) {
  const double n = c.array_dim, len = in.length;
  switch (in.opcode) {
    case Opcode::kReadHost:
      return len * c.HostRowCycles() *
                 ((in.flags & hw::kFlagParams) ? hw::ParamRows(hw::ElementBytes(c.dtype)) : 1) +
             c.host_mem_latency_cycles;
    case Opcode::kWriteHost:
      return len * c.HostRowCycles();
    case Opcode::kReadHbm:
      return len * c.WeightRowCycles() + c.weight_mem_latency_cycles;
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

// Decodes the program as the controller does; false where it refuses an instruction.
bool DecodeAll(const isa::Program& p, const config::TpuConfig& c, std::vector<Op>* ops) {
  const fast::ChipParams params = engine::FastEngine::ParamsFor(c);
  fast::Registers regs;
  for (const isa::Word& w : p.words) {
    Op op;
    op.d = fast::Decode(w.data(), params, regs);
    if (op.d.check != hw::Status::kOk) return false;
    const bool per_unit = op.d.unit == hw::kUnitMatrix || op.d.unit == hw::kUnitWeightDma;
    op.unit = op.d.unit < 0 ? -1 : op.d.unit + (per_unit ? 8 * (op.d.mxu + 1) : 0);
    const isa::Instruction in = isa::Decode(w);
    op.cycles = CyclesOf(in, c);
    const bool weights = in.opcode == Opcode::kReadWeights || in.opcode == Opcode::kLoadWeights;
    op.tiles = weights ? in.length : 0;
    op.takes_tile = in.opcode == Opcode::kMatmul && (in.flags & hw::kFlagSwitch);
    op.vector = op.d.unit == hw::kUnitVector;
    op.fence = op.d.sync || op.d.barrier;
    ops->push_back(op);
  }
  return true;
}

// For each vector instruction, the last instruction of another unit before it that it may
// not pass (one whose footprint conflicts with its own, a fence, or the window's edge; the
// vector instructions it passes are checked as it goes, Hoistable); -1 for the others.
std::vector<int64_t> LastConflicts(const std::vector<Op>& ops) {
  std::vector<int64_t> last(ops.size(), -1);
  for (size_t v = 0; v < ops.size(); ++v) {
    if (!ops[v].vector) continue;
    const size_t stop = v > kWindow ? v - kWindow : 0;
    last[v] = static_cast<int64_t>(stop) - 1;
    for (size_t j = v; j-- > stop;) {
      if (ops[j].vector) continue;
      if (ops[j].fence || Conflict(ops[j].d.fp, ops[v].d.fp)) {
        last[v] = static_cast<int64_t>(j);
        break;
      }
    }
  }
  return last;
}

// The estimate: one instruction issued a cycle at most, each when its unit is free and the
// instructions still running whose footprints conflict with its own are done.
class Clock {
 public:
  explicit Clock(double n) : n_(n) {}
  double IssueAt(const Op& op) const {
    double at = t_ + 1;
    if (op.fence)
      for (const auto& [unit, free] : free_) at = std::max(at, free);
    if (op.unit >= 0) {
      auto it = free_.find(op.unit);
      if (it != free_.end()) at = std::max(at, it->second);
    }
    for (const auto& [other, done] : flight_)
      if (done > at && Conflict(other->d.fp, op.d.fp)) at = done;
    return at;
  }
  void Issue(const Op& op) {
    t_ = IssueAt(op);
    double done = t_ + op.cycles;
    std::deque<double>& tiles = tiles_[op.d.mxu];
    if (op.tiles > 0) tiles.insert(tiles.end(), op.tiles, done);
    if (op.takes_tile) {  // the unit waits for its tile, then shifts it in
      const double ready = tiles.empty() ? t_ : std::max(t_, tiles.front());
      if (!tiles.empty()) tiles.pop_front();
      done = ready + std::max(op.cycles, n_);
    }
    if (op.unit >= 0) free_[op.unit] = done;
    flight_.emplace_back(&op, done);
    flight_.erase(std::remove_if(flight_.begin(), flight_.end(),
                                 [&](const auto& f) { return f.second <= t_; }),
                  flight_.end());
  }

 private:
  double t_ = 0, n_;
  std::map<int, double> free_;
  std::map<int, std::deque<double>> tiles_;  // by matrix unit: when its tiles arrive, in order
  std::vector<std::pair<const Op*, double>> flight_;  // issued, not done: when they are
};

// A vector instruction after instruction i (not placed yet, nor a vector instruction) that
// may go before it: of the first kCandidates vector instructions not placed, the first that
// conflicts with none of the instructions not placed before it and issues, by the estimate,
// a cycle before i would; 0 where none does (instruction 0 is never after i).
size_t Hoistable(const std::vector<Op>& ops, const std::vector<int64_t>& last,
                 const std::vector<size_t>& vectors, size_t first, const std::vector<bool>& placed,
                 const Clock& clock, size_t i) {
  const double at = clock.IssueAt(ops[i]);
  std::vector<size_t> before;  // the candidates passed over, not placed
  for (size_t k = first; k < vectors.size() && before.size() < kCandidates; ++k) {
    const size_t v = vectors[k];
    if (placed[v]) continue;
    const bool free = last[v] < static_cast<int64_t>(i) &&
                      std::none_of(before.begin(), before.end(),
                                   [&](size_t u) { return Conflict(ops[u].d.fp, ops[v].d.fp); });
    if (free && clock.IssueAt(ops[v]) + 1 <= at) return v;
    before.push_back(v);
  }
  return 0;
}

// Whether `x`, the first instruction of another unit not placed (after the vector
// instruction i, the first not placed), may go before i: it is no sync, halt or barrier,
// conflicts with none of the at most kCandidates vector instructions not placed before it,
// and issues, by the estimate, a cycle before i would.
bool Passes(const std::vector<Op>& ops, const std::vector<size_t>& vectors, size_t first,
            const std::vector<bool>& placed, const Clock& clock, size_t i, size_t x) {
  if (ops[x].fence || x - i > kWindow) return false;
  size_t passed = 0;
  for (size_t k = first; k < vectors.size() && vectors[k] < x; ++k) {
    const size_t v = vectors[k];
    if (placed[v]) continue;
    if (++passed > kCandidates || Conflict(ops[v].d.fp, ops[x].d.fp)) return false;
  }
  return clock.IssueAt(ops[x]) + 1 <= clock.IssueAt(ops[i]);
}

}  // namespace

isa::Program HoistVectorWork(const isa::Program& program, std::vector<int32_t>* op_of,
                             const config::TpuConfig& config) {
  std::vector<Op> ops;
  if (!DecodeAll(program, config, &ops)) return program;
  const std::vector<int64_t> last = LastConflicts(ops);
  std::vector<size_t> vectors, others;
  for (size_t i = 0; i < ops.size(); ++i) (ops[i].vector ? vectors : others).push_back(i);
  std::vector<size_t> order;
  std::vector<bool> placed(ops.size(), false);
  Clock clock(config.array_dim);
  // vectors[first] and others[other] are the first of each not placed (the others are placed
  // in their order).
  size_t first = 0, other = 0;
  const auto place = [&](size_t i) {
    clock.Issue(ops[i]);
    order.push_back(i);
    placed[i] = true;
    while (first < vectors.size() && placed[vectors[first]]) ++first;
    while (other < others.size() && placed[others[other]]) ++other;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (placed[i]) continue;
    if (ops[i].vector)
      while (other < others.size() && Passes(ops, vectors, first, placed, clock, i, others[other]))
        place(others[other]);
    else if (!ops[i].fence)
      while (const size_t v = Hoistable(ops, last, vectors, first, placed, clock, i)) place(v);
    place(i);
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
