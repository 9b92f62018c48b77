// See host_transfers.h.
#include "host/compiler/emit/host_transfers.h"

#include <algorithm>
#include <cmath>

namespace tpu::compiler::emit {

namespace {

constexpr int64_t kMostPieces = 16;  // pieces of an image's first input at most (Pieces)

}  // namespace

void HostTransfers::StageNext(int s, int64_t g0, int buffer) {
  const PlanSegment& seg = s_.plan.segments[static_cast<size_t>(s)];
  const int64_t count = std::min<int64_t>(seg.group, s_.b - g0);
  for (const Staging& st : s_.plan.staging[static_cast<size_t>(s)])
    background_.push_back(
        {s_.HostRow(st.tensor, g0), st.ub[buffer], count * s_.T(st.tensor).rows, seg.first});
  streamed_ = 0;
  due_ = 0;
}

void HostTransfers::PiecesDone() {
  while (!arriving_.empty()) ArriveNext();
  arrived_ = -1;
}

void HostTransfers::DrainBackground() {
  while (!background_.empty()) Background(background_.front().rows);
}

void HostTransfers::ReadHost(uint64_t host, int64_t ub, int64_t rows, int op) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const int64_t r = std::min(kMaxRows, rows - r0);
    acts_.Touch({}, {ub + r0, ub + r0 + r});
    s_.p.ReadHost(host + static_cast<uint64_t>(r0 * s_.row), static_cast<uint64_t>(ub + r0),
                  static_cast<uint64_t>(r));
    s_.Rec(op);
  }
}

void HostTransfers::WriteHost(int64_t ub, uint64_t host, int64_t rows, int op) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const int64_t r = std::min(kMaxRows, rows - r0);
    acts_.Touch({ub + r0, ub + r0 + r}, {});
    s_.p.WriteHost(static_cast<uint64_t>(ub + r0), host + static_cast<uint64_t>(r0 * s_.row),
                   static_cast<uint64_t>(r));
    s_.Rec(op);
  }
}

void HostTransfers::Exchange(int i, int64_t g0, int64_t count) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int64_t t = s_.Tiles(op.output), rows = s_.T(op.output).rows;
  const int64_t ub = s_.ViewOf(op.output).Row(g0);
  const uint64_t area = s_.share->exchange[exchanges_++ % 2];
  acts_.Flush();
  for (int64_t r = op.tile0; r < count * rows; r += t)
    WriteHost(ub + r, area + static_cast<uint64_t>(r * s_.row), op.nt, i);
  s_.p.Barrier((uint64_t{1} << s_.share->cores) - 1);
  s_.Rec(i);
  ReadHost(area, ub, count * rows, i);
}

void HostTransfers::SendTiles(int i, int64_t g0, int64_t count, int64_t upto) {
  const View v = s_.ViewOf(s_.g.output);
  auto host = [&](int64_t tile) {
    return s_.plan.output_addr + static_cast<uint64_t>((tile * s_.b + g0) * s_.row);
  };
  if (sent_ < upto && count == s_.b && count == v.by_tile) {
    WriteHost(v.At(g0, sent_), host(sent_), (upto - sent_) * count, i);
    sent_ = upto;
  }
  for (; sent_ < upto; ++sent_) WriteHost(v.At(g0, sent_), host(sent_), count, i);
  unsent_.reset();
}

void HostTransfers::SendDone() {
  if (!unsent_ || !background_.empty() || Arriving() || !acts_.Done()) return;
  const Unsent u = *unsent_;
  const View v = s_.ViewOf(s_.g.output);
  if (acts_.Touched({v.At(u.g0, sent_), v.At(u.g0, u.upto - 1) + u.count}, {}) > 0) return;
  SendTiles(u.op, u.g0, u.count, u.upto);
}

void HostTransfers::StageFirst(int s) {
  const PlanSegment& seg = s_.plan.segments[static_cast<size_t>(s)];
  const int64_t count = std::min<int64_t>(seg.group, s_.b);
  for (const Staging& st : s_.plan.staging[static_cast<size_t>(s)]) {
    const int64_t image = s_.T(st.tensor).rows, rows = count * image;
    const int64_t pieces = Pieces(seg.first, st.tensor, count);
    if (pieces == 1) {
      ReadHost(s_.HostRow(st.tensor, 0), st.ub[0], rows, seg.first);
      continue;
    }
    const int64_t size = (image + pieces - 1) / pieces;
    for (int64_t r0 = 0; r0 < rows; r0 += size)
      arriving_.push_back({s_.HostRow(st.tensor, 0) + static_cast<uint64_t>(r0 * s_.row),
                           st.ub[0] + r0, std::min(size, rows - r0), seg.first});
  }
  if (arriving_.empty()) return;
  // The next operation's first sets too, where they fit beside the first's: read later,
  // they would wait behind the pieces and hold back the matmuls behind them.
  if (seg.first + 1 < s_.seg_end &&
      params_.FirstSets(seg.first) + params_.FirstSets(seg.first + 1) <= s_.c.param_sets)
    params_.LoadNext(seg.first);
  ArriveNext();  // the first piece; the next goes with the first matmul that reads it
}

int64_t HostTransfers::Pieces(int i, int t, int64_t count) const {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  if (!shapes_.Windowed(op) || op.inputs[0] != t || op.stacked || op.window.pooled ||
      shapes_.Stack(op, count) != 1)
    return 1;
  const int64_t units = op.nt < costs_.SpreadUnits(i) ? costs_.SpreadUnits(i) : 1;
  const double c = static_cast<double>(op.rows * static_cast<int64_t>(op.terms[0].size()) / units);
  const double k =
      std::sqrt(c / static_cast<double>(std::max<int64_t>(1, s_.c.host_mem_latency_cycles)));
  return std::clamp<int64_t>(std::llround(k), 1, kMostPieces);
}

void HostTransfers::Arrive(int64_t hi) {
  while (!arriving_.empty() && arriving_.front().ub < hi) ArriveNext();
  if (arrived_ >= hi) return;
  arrived_ = -1;  // read now
  if (!arriving_.empty()) ArriveNext();
}

bool HostTransfers::Arriving() const { return !arriving_.empty() || arrived_ >= 0; }

void HostTransfers::ArriveNext() {
  const Transfer t = arriving_.front();
  arriving_.pop_front();
  ReadHost(t.host, t.ub, t.rows, t.op);
  arrived_ = t.ub;
}

void HostTransfers::Background(int64_t rows) {
  Transfer& t = background_.front();
  const int64_t r = std::min(rows, t.rows);
  ReadHost(t.host, t.ub, r, t.op);
  due_ = s_.c.host_mem_latency_cycles +
         static_cast<int64_t>(std::ceil(static_cast<double>(r) * host_row_cycles_));
  streamed_ = 0;
  t.host += static_cast<uint64_t>(r * s_.row);
  t.ub += r;
  t.rows -= r;
  if (t.rows == 0) background_.erase(background_.begin());
}

}  // namespace tpu::compiler::emit
