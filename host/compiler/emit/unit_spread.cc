// See unit_spread.h.
#include "host/compiler/emit/unit_spread.h"

#include <algorithm>

namespace tpu::compiler::emit {

void UnitSpread::Spread(int i, const std::vector<PassSpec>& passes) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const auto m = static_cast<size_t>(costs_.SpreadUnits(i));
  const auto nt = static_cast<size_t>(op.nt), per = passes.size() / nt;
  std::vector<std::vector<PassSpec>> groups;
  if (nt >= m && shapes_.LineUp(op)) {
    for (size_t j0 = 0; j0 < nt; j0 += m)
      for (size_t k = 0; k < per; ++k) {
        std::vector<PassSpec> g;
        for (size_t j = j0; j < std::min(nt, j0 + m); ++j) g.push_back(passes[j * per + k]);
        Together(i, g, &groups);
      }
  } else {
    for (size_t k = 0; k < passes.size(); k += m)
      Together(i,
               {passes.begin() + static_cast<std::ptrdiff_t>(k),
                passes.begin() + static_cast<std::ptrdiff_t>(std::min(passes.size(), k + m))},
               &groups);
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    int& units = s_.op_units[static_cast<size_t>(i)];
    units = std::max(units, static_cast<int>(groups[k].size()));
    Lanes(i, groups[k], k + 1 < groups.size() ? &groups[k + 1] : nullptr);
  }
}

void UnitSpread::Together(int i, const std::vector<PassSpec>& g,
                          std::vector<std::vector<PassSpec>>* out) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const auto& t0 = op.terms[static_cast<size_t>(g[0].j)];
  for (const PassSpec& ps : g) {
    if (!shapes_.Aligned(op.terms[static_cast<size_t>(ps.j)], t0)) {
      for (const PassSpec& one : g) out->push_back({one});
      return;
    }
  }
  out->push_back(g);
}

void UnitSpread::Lanes(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const size_t lanes = g.size();
  std::vector<uint64_t> acc(lanes), slot(lanes);
  auto sets = [&](const std::vector<PassSpec>& passes) {
    std::vector<int64_t> v;
    for (const PassSpec& ps : passes) v.push_back(op.first_param + ps.j);
    return v;
  };
  params_.Preload(sets(g), i);
  for (size_t l = 0; l < lanes; ++l) {
    s_.Unit(l);
    acc[l] =
        static_cast<uint64_t>(regions_.Region(shapes_.Regions(op), g[l].count * g[l].rows, false));
    slot[l] = params_.Slot(op.first_param + g[l].j, i);
  }
  LaneTiles(i, g, next, pass_.FirstTouch(i, g, acc));
  LaneReads& r = lane_reads_;
  const size_t terms = op.terms[static_cast<size_t>(g[0].j)].size();
  std::vector<bool> sw(lanes);
  std::vector<size_t> count(lanes, 1);
  const NextRead hand = next == nullptr ? shapes_.HandsOn(i, g) : NextRead::kNot;
  std::vector<std::vector<int64_t>> runs(lanes);
  for (size_t l = 0; l < lanes; ++l)
    runs[l] = hand != NextRead::kNot ? shapes_.Runs(g[l].count, g[l].rows, terms > 1)
                                     : std::vector{g[l].count};
  pass_.SideBySide(static_cast<int64_t>(lanes));
  for (size_t k = 0; k < terms; ++k) {
    const isa::Acc mode = k == 0 ? isa::Acc::kOverwrite : op.acc;
    // Matmul q of each unit's term k in turn.
    for (size_t q = 0; q < *std::max_element(count.begin(), count.end()); ++q) {
      for (size_t l = 0; l < lanes; ++l) {
        if (q > 0 && q >= count[l]) continue;
        s_.Unit(l);
        const OpTerm& t = op.terms[static_cast<size_t>(g[l].j)][k];
        if (q == 0) {
          sw[l] = t.tile != s_.active[l];
          s_.active[l] = t.tile;
          if (sw[l]) {
            if (r.read[l] <= r.used[l]) ReadWaiting(l);  // its tile not read yet
            ++r.used[l];
          }
        }
        bool first = false;
        count[l] = pass_.Term(i, t, g[l], k + 1 == terms ? runs[l] : std::vector{g[l].count},
                              acc[l], sw[l], mode, &first, k, nullptr, 0, q);
        // The passes before's activates once every unit streams, each once the matmuls
        // since the one before have streamed its rows (the vector unit takes one at a time,
        // and an activate emitted while it is busy holds back every matmul behind it).
        if ((k > 0 || q > 0 || l + 1 == lanes) && acts_.VpuFree()) acts_.Flush(1);
        const auto queued = static_cast<size_t>(std::count(r.waiting.begin(), r.waiting.end(), l));
        if (q == 0 && sw[l] && r.read[l] + queued < r.tiles[l].size()) r.waiting.push_back(l);
        r.clock += g[l].count * g[l].rows / static_cast<int64_t>(count[l] * lanes);
        PaceReads();
      }
    }
  }
  pass_.SideBySide(1);
  while (!r.waiting.empty()) ReadWaiting(r.waiting.front());
  for (size_t l = 0; l < lanes; ++l) {  // the next group's first tiles not read yet
    while (r.read[l] < r.tiles[l].size()) ReadNext(l, Consecutive(l, r.tiles[l].size()));
    ahead_read_[l] = r.read[l] - r.own[l];
  }
  if (next != nullptr) params_.Preload(sets(*next), i, slot);  // while the last matmuls stream
  if (hand == NextRead::kImageByImage)
    for (size_t l = 0; l < lanes; ++l) runs[l].assign(static_cast<size_t>(g[l].count), 1);
  LaneActivates(i, g, acc, slot, runs, hand != NextRead::kNot);
  s_.Unit(0);
}

void UnitSpread::LaneActivates(int i, const std::vector<PassSpec>& g,
                               const std::vector<uint64_t>& acc, const std::vector<uint64_t>& slot,
                               const std::vector<std::vector<int64_t>>& runs, bool split) {
  struct Piece {
    int64_t image, m, c;
    size_t l;
  };
  std::vector<Piece> pieces;
  for (size_t l = 0; l < g.size(); ++l) {
    int64_t m = 0;
    for (const int64_t c : split ? runs[l] : std::vector{g[l].count}) {
      pieces.push_back({g[l].i0 + m, m, c, l});
      m += c;
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.image < b.image; });
  for (const Piece& p : pieces) {
    const PassSpec& ps = g[p.l];
    s_.Unit(p.l);
    acts_.QueueActivate(i, ps.j, ps.i0 + p.m, p.c, ps.r0, ps.rows,
                        acc[p.l] + static_cast<uint64_t>(p.m * ps.rows), slot[p.l]);
    acts_.MarkSplit(split);
  }
}

void UnitSpread::LaneTiles(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next,
                           size_t before) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const size_t lanes = g.size();
  const auto fifo = static_cast<size_t>(s_.c.weight_fifo_tiles);
  LaneReads& r = lane_reads_;
  r = LaneReads{};
  r.tiles.resize(lanes);
  r.own.resize(lanes);
  r.read.resize(lanes);
  r.used.resize(lanes);
  r.free.assign(lanes, costs_.TileLoadCycles());
  r.op = i;
  for (size_t l = 0; l < lanes; ++l) {
    r.tiles[l] = shapes_.Switches(op, g[l], s_.active[l]);
    r.own[l] = r.tiles[l].size();
    if (next != nullptr && l < next->size()) {
      const std::vector<int> then =
          shapes_.Switches(op, (*next)[l], r.tiles[l].empty() ? s_.active[l] : r.tiles[l].back());
      r.tiles[l].insert(r.tiles[l].end(), then.begin(),
                        then.begin() + static_cast<std::ptrdiff_t>(std::min(fifo, then.size())));
    }
    r.read[l] = ahead_read_[l];
    ahead_read_[l] = 0;
  }
  int64_t covered = 0;  // read cycles since the last activate went
  uint64_t last = 0;    // that activate's rows
  for (size_t q = 0; q < fifo; ++q)
    for (size_t l = 0; l < lanes; ++l) {
      const size_t upto = std::min(fifo, r.tiles[l].size());
      if (r.read[l] >= upto) continue;
      const size_t n = Consecutive(l, std::min(costs_.RunTiles(), upto - r.read[l]));
      ReadNext(l, n);
      covered += costs_.ReadCycles(static_cast<int64_t>(n));
      if (before > 0 && covered >= static_cast<int64_t>(last)) {
        last = acts_.FirstRows();
        acts_.Flush(1);
        --before;
        covered = 0;
      }
    }
}

void UnitSpread::ReadNext(size_t l, size_t n) {
  LaneReads& r = lane_reads_;
  s_.Unit(l);
  s_.p.ReadWeights(
      static_cast<uint64_t>(r.tiles[l][r.read[l]]) * static_cast<uint64_t>(s_.n * s_.row), n);
  r.read[l] += n;
  s_.Rec(r.op);
}

size_t UnitSpread::Consecutive(size_t l, size_t most) const {
  const LaneReads& r = lane_reads_;
  size_t n = 1;
  while (n < most && r.read[l] + n < r.tiles[l].size() &&
         r.tiles[l][r.read[l] + n] == r.tiles[l][r.read[l]] + static_cast<int>(n))
    ++n;
  return n;
}

void UnitSpread::ReadRun(size_t l, size_t most) {
  LaneReads& r = lane_reads_;
  const auto queued = static_cast<size_t>(std::count(r.waiting.begin(), r.waiting.end(), l));
  const size_t n = Consecutive(l, std::min(most, queued));
  size_t left = n;
  for (auto it = r.waiting.begin(); it != r.waiting.end() && left > 0;)
    if (*it == l) {
      it = r.waiting.erase(it);
      --left;
    } else {
      ++it;
    }
  ReadNext(l, n);
  r.free[l] = r.clock + costs_.ReadCycles(static_cast<int64_t>(n));
  r.channel = r.clock + costs_.ChannelCycles(static_cast<int64_t>(n));
}

bool UnitSpread::RunReady(size_t l) const {
  const LaneReads& r = lane_reads_;
  const auto queued = static_cast<size_t>(std::count(r.waiting.begin(), r.waiting.end(), l));
  const size_t run = std::min(costs_.RunTiles(), r.tiles[l].size() - r.read[l]);
  return queued >= run || r.read[l] <= r.used[l] + 1;
}

void UnitSpread::PaceReads() {
  LaneReads& r = lane_reads_;
  for (auto it = r.waiting.begin(); it != r.waiting.end();) {
    if (r.clock >= r.free[*it] && r.clock >= r.channel && RunReady(*it)) {
      ReadRun(*it, costs_.RunTiles());
      it = r.waiting.begin();
    } else {
      ++it;
    }
  }
}

void UnitSpread::ReadWaiting(size_t l) {
  LaneReads& r = lane_reads_;
  while (std::find(r.waiting.begin(), r.waiting.end(), l) != r.waiting.end()) ReadRun(l, SIZE_MAX);
}

}  // namespace tpu::compiler::emit
