// Planning a lowered network on a chip (see graph_plan.h).
#include "host/compiler/graph_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/common/text.h"

namespace tpu::compiler {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// The segments of one mode, found by dynamic programming.
struct Segmentation {
  std::vector<PlanSegment> segments;
  double cost = kInfinite;
};

class Planner {
 public:
  Planner(const LoweredGraph& g, const config::TpuConfig& c, int batch, MapsOnChip maps,
          WeightPath weights)
      : g_(g),
        c_(c),
        n_(c.array_dim),
        b_(batch),
        ops_(static_cast<int>(g.ops.size())),
        zero_row_(UsesVectorUnit(g) ? c.ub_depth_rows - 1 : -1),
        stage_(weights == WeightPath::kVectorMemory ? WeightStageRows(c) : 0),
        ub_((zero_row_ >= 0 ? zero_row_ : c.ub_depth_rows) - stage_),
        maps_(maps) {
    last_.assign(g.tensors.size(), -1);
    for (size_t t = 0; t < g.tensors.size(); ++t)
      for (int r : g.tensors[t].readers) last_[t] = std::max(last_[t], r);
    last_[static_cast<size_t>(g.output)] = ops_;  // written to host memory at the end
    cross_.resize(static_cast<size_t>(ops_) + 1);
    for (int q = 0; q <= ops_; ++q)
      for (size_t t = 1; t < g.tensors.size(); ++t)
        if (Producer(static_cast<int>(t)) < q && last_[t] >= q &&
            Producer(static_cast<int>(t)) >= 0)
          cross_[static_cast<size_t>(q)].push_back(static_cast<int>(t));
    mark_.assign(g.tensors.size(), 0);
    for (int64_t k = 1; k <= b_; ++k) {
      const int64_t group = (b_ + k - 1) / k;
      if (groups_.empty() || groups_.back() != group) groups_.push_back(group);
    }
    for (int i = 0; i < ops_; ++i) {
      const GraphOp& op = g.ops[static_cast<size_t>(i)];
      int64_t terms = 0, tiles = 0;
      for (const auto& ts : op.terms) {
        terms += static_cast<int64_t>(ts.size());
        int prev = -1;
        for (const OpTerm& t : ts) tiles += t.tile != prev, prev = t.tile;
      }
      stream_.push_back(op.kind == OpKind::kVector ? VectorRows(op)
                                                   : static_cast<double>(op.rows * terms));
      const double tile = n_ * c.WeightRowCycles();
      wload_.push_back(static_cast<double>(tiles) * tile);
      wbytes_.push_back(static_cast<double>(tiles) * n_ * hw::RowBytes(c));
    }
  }

  // The cheaper plan (crossing tensors in the unified buffer, or spilled to host memory) that
  // can be allocated. Each mode's segmentation is found for the whole unified buffer first;
  // where first fit cannot place it (fragmentation), for a buffer a sixteenth smaller, and so
  // on down to half, so that a plan that keeps its tensors on chip is not given up for one
  // that spills merely because its rows did not pack.
  Plan Run() {
    std::string failed;
    std::optional<Plan> best;
    double best_cost = kInfinite;
    for (const bool spill : {false, true}) {
      for (int64_t k = 0; k <= 8; ++k) {
        const Segmentation seg = Segment(spill, ub_ - ub_ * k / 16);
        if (seg.cost == kInfinite || seg.cost >= best_cost) break;
        Plan p;
        p.maps = maps_;
        p.spill = spill;
        p.segments = seg.segments;
        if (AllocateShrinking(&p, &failed)) {
          best = std::move(p);
          best_cost = seg.cost;
          break;
        }
      }
    }
    if (best) return Layout(std::move(*best));
    Plan p;
    p.maps = maps_;
    p.why_not = !failed.empty()     ? failed
                : !why_not_.empty() ? why_not_
                                    : "the network does not fit the unified buffer";
    return p;
  }

 private:
  // Allocates p, giving the segment that did not fit (fragmentation) a smaller group each
  // time; false, with *why, when it cannot.
  bool AllocateShrinking(Plan* p, std::string* why) {
    for (int tries = 0; tries < 64; ++tries) {
      if (Allocate(p)) return true;
      PlanSegment& s = p->segments[static_cast<size_t>(failed_)];
      if (s.banded || s.group == 1) break;
      s.group =
          *std::find_if(groups_.begin(), groups_.end(), [&](int64_t x) { return x < s.group; });
    }
    *why = fmt::format(
        "the unified buffer ({} rows) cannot hold what operation '{}' needs", c_.ub_depth_rows,
        g_.ops[static_cast<size_t>(p->segments[static_cast<size_t>(failed_)].first)].name);
    return false;
  }

  int64_t Rows(int t) const { return g_.tensors[static_cast<size_t>(t)].rows; }
  // A kVector operation's time per image in rows of the array's: each step reads every row
  // of the output's shape, vector_sublanes a cycle.
  double VectorRows(const GraphOp& op) const {
    return static_cast<double>(op.steps.size()) * static_cast<double>(Rows(op.output)) /
           c_.vector_sublanes;
  }
  int Producer(int t) const { return g_.tensors[static_cast<size_t>(t)].producer; }
  // Tensors produced before position q and read at or after it (not the model's input).
  const std::vector<int>& Cross(int q) const { return cross_[static_cast<size_t>(q)]; }
  // The tensors operation i reads.
  std::vector<int> Reads(int i) const {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    std::vector<int> r = op.inputs;
    if (op.residual >= 0) r.push_back(op.residual);
    return r;
  }

  // The tensors from before p (or the model's input) that operations [p, q) read, each once
  // (marked with a new stamp: the planner's search asks this of every segment it weighs).
  std::vector<int> Outside(int p, int q) const {
    std::vector<int> outside;
    ++stamp_;
    const auto see = [&](int t) {
      if ((t == 0 || Producer(t) < p) && mark_[static_cast<size_t>(t)] != stamp_) {
        mark_[static_cast<size_t>(t)] = stamp_;
        outside.push_back(t);
      }
    };
    for (int i = p; i < q; ++i) {
      const GraphOp& op = g_.ops[static_cast<size_t>(i)];
      for (int t : op.inputs) see(t);
      if (op.residual >= 0) see(op.residual);
    }
    return outside;
  }

  // Unified-buffer rows segment [p, q) needs for groups of g: B-image crossing tensors (or
  // staging areas for them when spilled), and the group's own tensors at their peak; as
  // fixed + g x per_image, so that one count serves every group size.
  struct SegmentNeed {
    int64_t fixed = 0, per_image = 0;
    int64_t For(int64_t g) const { return fixed + g * per_image; }
  };
  SegmentNeed Need(int p, int q, bool spill) const {
    // With the maps on chip, the batch's input and output stay in the buffer throughout.
    SegmentNeed need;
    need.fixed = b_ * ((maps_.input ? Rows(0) : 0) + (maps_.output ? Rows(g_.output) : 0));
    for (int t : Outside(p, q)) {
      if ((t == 0 && !maps_.input) || (t != 0 && spill)) {
        need.per_image += 2 * Rows(t);  // staged per group, double-buffered
      }
    }
    if (!spill) {  // the tensors crossing p or q, each once
      ++stamp_;
      for (int q2 : {p, q})
        if (q2 > 0 && q2 < ops_)
          for (int t : Cross(q2))
            if (mark_[static_cast<size_t>(t)] != stamp_) {
              mark_[static_cast<size_t>(t)] = stamp_;
              need.fixed += b_ * Rows(t);
            }
    }
    need.per_image += Peak(p, q, spill);
    return need;
  }

  // The most rows the segment's own tensors hold at once, a group image's: op j's output
  // lives from j to its last reader, or to the segment's end where it leaves the segment
  // (spilled; else a B-image crossing tensor, counted apart, as the model's output with the
  // maps on chip). One sweep, each output added where it is made and dropped after its last
  // reader.
  int64_t Peak(int p, int q, bool spill) const {
    std::vector<int64_t> drop(static_cast<size_t>(q - p) + 1, 0);
    int64_t peak = 0, live = 0;
    for (int i = p; i < q; ++i) {
      live -= drop[static_cast<size_t>(i - p)];
      const int t = g_.ops[static_cast<size_t>(i)].output;
      const int last = last_[static_cast<size_t>(t)];
      const bool leaves = last >= q;
      if ((leaves && !spill && t != g_.output) || (maps_.output && t == g_.output)) continue;
      if (!leaves && last < i) continue;  // read by nothing
      live += Rows(t);
      if (!leaves) drop[static_cast<size_t>(last + 1 - p)] += Rows(t);
      peak = std::max(peak, live);
    }
    return peak;
  }

  double Cost(int p, int q, int64_t g, bool spill) const {
    double cost = 0;
    const double groups = static_cast<double>((b_ + g - 1) / g);
    // Cycles: each operation streams its rows or reads its weights once per group, whichever
    // takes longer; and, to choose between plans of equal time, a hundredth of a cycle per
    // byte read from weight memory (energy).
    for (int i = p; i < q; ++i) {
      cost +=
          std::max(b_ * stream_[static_cast<size_t>(i)], groups * wload_[static_cast<size_t>(i)]);
      cost += 0.01 * groups * wbytes_[static_cast<size_t>(i)];
    }
    if (spill) {
      double bytes = 0;
      for (int t : Outside(p, q))
        if (t != 0) bytes += static_cast<double>(Rows(t));  // read in
      for (int t : Cross(q))
        if (Producer(t) >= p) bytes += static_cast<double>(Rows(t));  // written out
      cost += bytes * b_ * hw::RowBytes(c_) / c_.host_mem_bytes_per_cycle;
    }
    return cost;
  }

  // Output rows per band so that one op's band (double-buffered staging of its inputs,
  // residual and output) fits the unified buffer; 0 when not even one row does.
  int64_t Band(int i) const {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const GraphTensor& out = g_.tensors[static_cast<size_t>(op.output)];
    if (op.stacked || op.kind == OpKind::kDense || maps_.Any()) return 0;
    for (int64_t band = out.h; band >= 1; band = band > 1 ? (band + 1) / 2 : 0) {
      int64_t rows = 2 * band * out.w * out.T(n_);
      for (int t : Reads(i)) rows += 2 * BandRows(op, band, t);
      if (rows <= ub_) return band;
    }
    return 0;
  }

  // The cheapest segments whose needs fit `budget` unified-buffer rows.
  Segmentation Segment(bool spill, int64_t budget) {
    std::vector<double> f(static_cast<size_t>(ops_) + 1, kInfinite);
    std::vector<PlanSegment> choice(static_cast<size_t>(ops_) + 1);
    f[0] = 0;
    for (int q = 1; q <= ops_; ++q) {
      for (int p = q - 1; p >= 0; --p) {
        if (f[static_cast<size_t>(p)] == kInfinite) continue;
        bool any = false;
        const SegmentNeed need = Need(p, q, spill);
        for (int64_t g : groups_) {
          if (need.For(g) > budget) continue;
          any = true;
          // (A segment costs a cycle more: of equal plans, the one with fewer segments.)
          const double cost = f[static_cast<size_t>(p)] + Cost(p, q, g, spill) + 1;
          if (cost < f[static_cast<size_t>(q)]) {
            f[static_cast<size_t>(q)] = cost;
            choice[static_cast<size_t>(q)] = {p, q, g, false, 0};
          }
          break;  // the largest group that fits (smaller ones only cost more)
        }
        if (!any && q == p + 1 && spill) {  // one operation: bands of output rows
          const int64_t band = Band(p);
          if (band == 0) {
            why_not_ = fmt::format("not even one output row of '{}' fits the unified buffer",
                                   g_.ops[static_cast<size_t>(p)].name);
            continue;
          }
          const double cost = f[static_cast<size_t>(p)] + Cost(p, q, 1, true) +
                              static_cast<double>(b_ - 1) * wload_[static_cast<size_t>(p)];
          if (cost < f[static_cast<size_t>(q)]) {
            f[static_cast<size_t>(q)] = cost;
            choice[static_cast<size_t>(q)] = {p, q, 1, true, band};
          }
        }
      }
    }
    Segmentation s;
    s.cost = f[static_cast<size_t>(ops_)];
    if (s.cost == kInfinite) return s;
    for (int q = ops_; q > 0; q = choice[static_cast<size_t>(q)].first)
      s.segments.insert(s.segments.begin(), choice[static_cast<size_t>(q)]);
    return s;
  }

  // ---- unified-buffer allocation: first fit over lifetimes (operation indices)

  struct Request {
    int64_t start = 0, end = 0, rows = 0;  // alive for operations [start, end]
    int64_t* where = nullptr;              // the row it gets
    int segment = 0;
  };

  bool Allocate(Plan* p) {
    const size_t nt = g_.tensors.size();
    p->places.assign(nt, TensorPlace{});
    p->staging.assign(p->segments.size(), {});
    std::vector<int> seg_of(static_cast<size_t>(ops_));
    for (size_t s = 0; s < p->segments.size(); ++s)
      for (int i = p->segments[s].first; i < p->segments[s].end; ++i)
        seg_of[static_cast<size_t>(i)] = static_cast<int>(s);
    std::vector<Request> reqs;
    p->places[0].host = !maps_.input;  // the model's input
    p->places[static_cast<size_t>(g_.output)].host = !maps_.output;
    if (maps_.input) {  // the batch's input, in the buffer from the start
      p->places[0].images = b_;
      reqs.push_back({0, ops_ - 1, b_ * Rows(0), &p->places[0].ub, 0});
    }
    for (size_t t = 1; t < nt; ++t) {
      const int prod = Producer(static_cast<int>(t));
      const PlanSegment& ps = p->segments[static_cast<size_t>(seg_of[static_cast<size_t>(prod)])];
      if (maps_.output && static_cast<int>(t) == g_.output) {  // the batch's output, left there
        p->places[t].images = b_;
        reqs.push_back({prod, ops_ - 1, b_ * Rows(static_cast<int>(t)), &p->places[t].ub,
                        seg_of[static_cast<size_t>(prod)]});
        continue;
      }
      const int64_t last = std::min<int64_t>(last_[t], ops_ - 1);
      const bool crosses = last_[t] >= ps.end;
      TensorPlace& place = p->places[t];
      if (crosses && p->spill) place.host = true;
      if (ps.banded) continue;  // staged band by band
      if (crosses && !p->spill && static_cast<int>(t) != g_.output) {
        place.images = b_;
        reqs.push_back(
            {ps.first, p->segments[static_cast<size_t>(seg_of[static_cast<size_t>(last)])].end - 1,
             b_ * Rows(static_cast<int>(t)), &place.ub, seg_of[static_cast<size_t>(prod)]});
      } else {
        place.images = ps.group;
        const int64_t end = crosses ? ps.end - 1 : last;
        reqs.push_back({prod, end, ps.group * Rows(static_cast<int>(t)), &place.ub,
                        seg_of[static_cast<size_t>(prod)]});
      }
    }
    StagingRequests(p, &reqs);
    return FirstFit(p, &reqs);
  }

  // The staging areas: host tensors each segment reads (a group of images, or bands), and
  // a banded operation's output bands.
  void StagingRequests(Plan* p, std::vector<Request>* reqs) {
    for (size_t s = 0; s < p->segments.size(); ++s) {
      const PlanSegment& seg = p->segments[s];
      std::set<int> outside;
      for (int i = seg.first; i < seg.end; ++i)
        for (int t : Reads(i))
          if (p->places[static_cast<size_t>(t)].host && (t == 0 || Producer(t) < seg.first))
            outside.insert(t);
      if (seg.banded) outside.insert(g_.ops[static_cast<size_t>(seg.first)].output);
      for (int t : outside) {
        Staging st;
        st.tensor = t;
        st.rows = seg.banded ? BandRows(g_.ops[static_cast<size_t>(seg.first)], seg.band, t)
                             : seg.group * Rows(t);
        p->staging[s].push_back(st);
      }
    }
    for (size_t s = 0; s < p->segments.size(); ++s)
      for (Staging& st : p->staging[s])
        for (int k = 0; k < 2; ++k)
          reqs->push_back({p->segments[s].first, p->segments[s].end - 1, st.rows, &st.ub[k],
                           static_cast<int>(s)});
  }

  // Rows of one band of `band` output rows of tensor t for op: an input's lines with their
  // halo (the packed model input: all of it), the band's own pixels otherwise.
  int64_t BandRows(const GraphOp& op, int64_t band, int t) const {
    const GraphTensor& tt = g_.tensors[static_cast<size_t>(t)];
    if (tt.packed) return tt.rows;
    int64_t lines = band;
    if (t == op.inputs[0] && (op.kind == OpKind::kConv || op.kind == OpKind::kMaxPool)) {
      const int64_t k = op.window.pooled ? 2 : 1;
      lines = std::min<int64_t>(tt.h, (k * band - 1) * static_cast<int64_t>(op.window.stride_y) +
                                          static_cast<int64_t>(op.window.kh));
    }
    return lines * tt.w * tt.T(n_);
  }

  bool FirstFit(Plan* p, std::vector<Request>* reqs) {
    std::stable_sort(reqs->begin(), reqs->end(), [](const Request& a, const Request& b) {
      return a.start != b.start ? a.start < b.start : a.rows > b.rows;
    });
    std::vector<const Request*> placed;
    int64_t top = 0;
    for (Request& r : *reqs) {
      // The intervals of rows already taken by requests alive at the same time.
      std::vector<std::pair<int64_t, int64_t>> taken;
      for (const Request* o : placed)
        if (o->start <= r.end && r.start <= o->end)
          taken.push_back({*o->where, *o->where + o->rows});
      std::sort(taken.begin(), taken.end());
      int64_t at = 0;
      for (const auto& [lo, hi] : taken) {
        if (at + r.rows <= lo) break;
        at = std::max(at, hi);
      }
      if (at + r.rows > ub_) {
        failed_ = r.segment;
        return false;
      }
      *r.where = at;
      top = std::max(top, at + r.rows);
      placed.push_back(&r);
    }
    p->zero_row = zero_row_;
    p->weight_stage = stage_ > 0 ? ub_ : -1;
    p->ub_rows = top + (zero_row_ >= 0 ? 1 : 0) + stage_;
    return true;
  }

  // Host memory: the images, the parameter sets, the spilled tensors, the output.
  Plan Layout(Plan p) {
    const auto row = static_cast<uint64_t>(hw::RowBytes(c_));  // a row's bytes
    auto align = [](uint64_t a) { return (a + 63) / 64 * 64; };
    uint64_t at = static_cast<uint64_t>(b_ * Rows(0)) * row;
    p.places[0].host_addr = 0;
    p.params_addr = align(at);
    at = p.params_addr + g_.params.size();
    for (size_t t = 1; t < g_.tensors.size(); ++t) {
      if (!p.places[t].host || static_cast<int>(t) == g_.output) continue;
      p.places[t].host_addr = align(at);
      at = p.places[t].host_addr + static_cast<uint64_t>(b_ * Rows(static_cast<int>(t))) * row;
    }
    p.output_addr = align(at);
    p.places[static_cast<size_t>(g_.output)].host_addr = p.output_addr;
    p.host_bytes = p.output_addr + static_cast<uint64_t>(b_ * Rows(g_.output)) * row;
    p.output_by_tile = OutputByTile(p);
    p.weights_bytes = static_cast<uint64_t>(g_.tiles.size()) * static_cast<uint64_t>(n_) * row;
    if (p.host_bytes > static_cast<uint64_t>(c_.host_mem_bytes)) {
      p.why_not = fmt::format(
          "a batch of {} needs {} bytes of host memory; the config has {} (host_mem_bytes): use "
          "a smaller {} or {} host_mem_bytes=...",
          b_, Grouped(static_cast<int64_t>(p.host_bytes)), Grouped(c_.host_mem_bytes),
          Field("batch"), Field("set"));
    } else if (p.weights_bytes > static_cast<uint64_t>(c_.weight_mem_bytes)) {
      p.why_not =
          fmt::format("the weights need {} bytes; weight memory holds {} (weight_mem_bytes)",
                      Grouped(static_cast<int64_t>(p.weights_bytes)), Grouped(c_.weight_mem_bytes));
    }
    return p;
  }

  // Whether the output goes tile by tile (Plan::output_by_tile): where the program sends it
  // (not left on chip), an operation writes it whole image rows at a time (not in bands, not
  // pooled, no residual read in its layout), it has T > 1 tiles of one pixel, and a tile's
  // rows take the host link at least its latency L. Sent whole after the last activate, the
  // output takes L + T g r (g images of its group, r cycles a row); tile by tile, the first
  // T - 1 go while the matrix unit computes the later tiles and the last takes L + g r: the
  // end comes (T - 1) g r sooner, and the link is busy (T - 1) L longer, no more than that
  // where g r >= L (docs/compiler.md, "The output tile by tile").
  bool OutputByTile(const Plan& p) const {
    const GraphTensor& out = g_.tensors[static_cast<size_t>(g_.output)];
    const int op = out.producer;
    if (p.maps.output || op < 0 || out.Pixels() != 1 || out.T(n_) < 2 ||
        p.places[static_cast<size_t>(g_.output)].ub < 0)
      return false;
    const GraphOp& o = g_.ops[static_cast<size_t>(op)];
    if (o.window.pooled || o.residual >= 0) return false;
    for (const PlanSegment& s : p.segments) {
      if (op < s.first || op >= s.end) continue;
      const double tile = static_cast<double>(std::min(s.group, b_)) * c_.HostRowCycles();
      return !s.banded && tile >= static_cast<double>(c_.host_mem_latency_cycles);
    }
    return false;
  }

  const LoweredGraph& g_;
  const config::TpuConfig& c_;
  const int64_t n_, b_;
  const int ops_;
  const int64_t zero_row_;  // Plan::zero_row
  const int64_t stage_;     // the weights' staging rows (Plan::weight_stage), 0: none
  const int64_t ub_;  // the unified-buffer rows tensors may take: all but the zero and staging rows
  std::vector<int> last_;                // per tensor, its last reader (ops_: the host)
  std::vector<std::vector<int>> cross_;  // per position q, Cross(q)
  mutable std::vector<int64_t> mark_;    // per tensor, the stamp it was last seen with
  mutable int64_t stamp_ = 0;
  std::vector<int64_t> groups_;  // group sizes worth trying, largest first
  // Per operation: rows per image, weight cycles and bytes per group.
  std::vector<double> stream_, wload_, wbytes_;
  std::string why_not_;
  int failed_ = 0;
  MapsOnChip maps_;
};

}  // namespace

Plan PlanGraph(const LoweredGraph& graph, const config::TpuConfig& config, int batch,
               MapsOnChip maps, WeightPath weights) {
  if (!graph.why_not.empty()) {
    Plan p;
    p.why_not = graph.why_not;
    return p;
  }
  if (weights == WeightPath::kVectorMemory && WeightStageRows(config) * 2 > config.ub_depth_rows) {
    Plan p;
    p.why_not = fmt::format(
        "the weights' staging rows in vector memory ({} x {} tiles of {} rows a matrix unit) "
        "would take more than half of the {} unified-buffer rows; use --weights fifo",
        kWeightSlots, config.weight_fifo_tiles, config.array_dim, config.ub_depth_rows);
    return p;
  }
  return Planner(graph, config, batch, maps, weights).Run();
}

int64_t WeightStageRows(const config::TpuConfig& config) {
  return int64_t{kWeightSlots} * config.weight_fifo_tiles * config.array_dim * config.mxus_per_core;
}

}  // namespace tpu::compiler
