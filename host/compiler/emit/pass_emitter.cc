// See pass_emitter.h.
#include "host/compiler/emit/pass_emitter.h"

#include <algorithm>

namespace tpu::compiler::emit {

namespace {

constexpr int64_t kBackgroundRows = 512;  // rows per transfer between matmuls

}  // namespace

std::vector<PassSpec> PassEmitter::Collect(int i, int64_t g0, int64_t count) {
  collect_ = true;
  passes_.clear();
  OpPasses(i, g0, count);
  collect_ = false;
  return std::move(passes_);
}

void PassEmitter::OpPasses(int i, int64_t g0, int64_t count) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int64_t rows = op.rows, most = shapes_.Most(op);
  // Spread over units of their own images or rows (fewer output tiles than units): at
  // least a pass per unit, by images where there are enough, else by rows.
  const int64_t units = collect_ && (op.nt < costs_.SpreadUnits(i) || !shapes_.LineUp(op))
                            ? costs_.RowUnits(i, count * rows)
                            : 1;
  if (rows <= most && !op.stacked && (count >= units || rows < 2)) {  // whole images
    const int64_t fit = std::max<int64_t>(1, most / rows);
    int64_t passes = std::max((count + fit - 1) / fit, std::min(count, units));
    // Spread column by column with every image in one pass: two passes where each still
    // hides the units' reads of its tiles, so that the first's activates run while the
    // second streams (docs/compiler.md, "Two passes a column where the reads hide").
    if (collect_ && passes == 1 && count >= 2 &&
        count / 2 * rows >= costs_.SideBySide(costs_.SpreadUnits(i), costs_.TileReadCycles()))
      passes = 2;
    const int64_t per = (count + passes - 1) / passes;  // passes of equal size
    for (int64_t j = 0; j < op.nt; ++j) {
      for (int64_t i0 = g0; i0 < g0 + count; i0 += per)
        Pass(i, j, i0, std::min(per, g0 + count - i0), 0, rows, i0 + per >= g0 + count);
      // The model's output tile by tile: a tile goes after a later matmul once its activate
      // is done (Matmul, SendDone), Segment sends the rest.
      if (op.output == s_.g.output && s_.ViewOf(op.output).by_tile > 0 && !collect_ && !s_.share)
        host_.HoldOutput(i, g0, count, op.tile0 + j + 1);
    }
    return;
  }
  if (op.stacked) {  // one row per image: images in pieces of at most half the rows
    // The images form one tall map only where each fills whole rows: a packed input of
    // c x pixels bytes that does not (84 bytes on 8 lanes) goes one image per pass.
    const GraphTensor& in = s_.T(op.inputs[0]);
    const int64_t piece = in.packed && in.rows * s_.n != in.Pixels() * in.c ? 1 : most;
    for (int64_t j = 0; j < op.nt; ++j)
      for (int64_t i0 = g0; i0 < g0 + count; i0 += piece)
        Pass(i, j, i0, std::min(piece, g0 + count - i0), 0, 1, i0 + piece >= g0 + count);
    return;
  }
  // An image's rows are more than half the accumulators hold: chunks of equal size, so an
  // activate ends about when the next chunk's rows do. Spread over u units, twice as many
  // where each unit's chunk still hides the u units' tile reads of its group, side by side
  // on their weight DMAs (SideBySide): the activates of an image's last group, one per unit
  // on the one vector unit, then hold the next operation back half as long.
  int64_t pieces = std::max((rows + most - 1) / most, (units + count - 1) / count);
  const int64_t spread = collect_ ? std::min<int64_t>(costs_.SpreadUnits(i), pieces) : 1;
  if (spread > 1 && rows > most &&
      rows / (2 * pieces) >= costs_.SideBySide(spread, costs_.TileReadCycles()))
    pieces *= 2;
  int64_t chunk = (rows + pieces - 1) / pieces;
  if (op.window.pooled) chunk = (chunk + 3) / 4 * 4;
  for (int64_t j = 0; j < op.nt; ++j)
    for (int64_t im = g0; im < g0 + count; ++im)
      for (int64_t r0 = 0; r0 < rows; r0 += chunk)
        Pass(i, j, im, 1, r0, std::min(chunk, rows - r0),
             im + 1 == g0 + count && r0 + chunk >= rows);
}

std::vector<int> PassEmitter::NextTiles(int i, int64_t j, const std::vector<OpTerm>& terms,
                                        bool last) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  next_pass_ = {i, j + 1};
  if (j + 1 >= op.nt) {  // the next operation of the group's segment, if any
    if (i + 1 >= s_.seg_end) return {};
    next_pass_ = {i + 1, 0};
  }
  const GraphOp& next_op = s_.g.ops[static_cast<size_t>(next_pass_.first)];
  if (costs_.Spreads(next_pass_.first)) return {};  // its units read their own tiles (Lanes)
  if (next_op.kind == OpKind::kVector) return {};   // no tiles: the vector unit's
  bool switches = false, one = true;
  int prev = s_.active[static_cast<size_t>(s_.unit)];
  for (const OpTerm& t : terms) {
    switches = switches || t.tile != prev;
    one = one && t.tile == terms.front().tile;
    prev = t.tile;
  }
  if (!switches || !(last || one)) return {};
  std::vector<int> next;
  for (const OpTerm& t : next_op.terms[static_cast<size_t>(next_pass_.second)]) {
    if (t.tile == prev) continue;
    if (!next.empty() && t.tile != next.back() + 1) return {};
    next.push_back(t.tile);
    prev = t.tile;
  }
  if (static_cast<int64_t>(next.size()) > s_.c.weight_fifo_tiles) return {};
  return next;
}

size_t PassEmitter::LastSwitch(const std::vector<OpTerm>& terms, int active) {
  size_t at = 0;
  int prev = active;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].tile != prev) at = k;
    prev = terms[k].tile;
  }
  return at;
}

void PassEmitter::Pass(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows,
                       bool last, const isa::WindowGeometry* band, int64_t first_pixel) {
  if (collect_) {
    passes_.push_back({j, i0, count, r0, rows});
    return;
  }
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int64_t acc_rows = count * rows;
  short_pass_ = shapes_.ShortPass(op, acc_rows);
  const uint64_t acc =
      static_cast<uint64_t>(regions_.Region(shapes_.Regions(op), acc_rows, short_pass_));
  const auto& terms = op.terms[static_cast<size_t>(j)];
  const bool takes = std::make_pair(i, j) == prefetched_for_;  // the tiles read ahead
  const std::vector<int64_t> reads = TileReads(terms, takes);
  if (takes) prefetched_.clear();  // TileReads left them out
  ahead_ = NextTiles(i, j, terms, last);
  ahead_after_ = LastSwitch(terms, s_.active[static_cast<size_t>(s_.unit)]);
  const uint64_t slot = params_.Slot(op.first_param + j, i);
  const NextRead next =
      last && j + 1 == op.nt ? shapes_.HandsOn(i, {{j, i0, count, r0, rows}}) : NextRead::kNot;
  const bool by_image = next == NextRead::kImageByImage;
  const std::vector<int64_t> runs =
      next != NextRead::kNot ? shapes_.Runs(count, rows, terms.size() > 1) : std::vector{count};
  bool first = true;
  for (size_t k = 0; k < terms.size(); ++k) {
    const OpTerm& t = terms[k];
    first = first || k == ahead_after_;
    if (reads[k] > 0) {  // the tiles of this term and the next ones, as one read
      s_.p.ReadWeights(static_cast<uint64_t>(t.tile) * static_cast<uint64_t>(s_.n * s_.row),
                       static_cast<uint64_t>(reads[k]));
      s_.Rec(i);
    }
    const bool sw = t.tile != s_.active[static_cast<size_t>(s_.unit)];
    s_.active[static_cast<size_t>(s_.unit)] = t.tile;
    const isa::Acc mode = k == 0 ? isa::Acc::kOverwrite : op.acc;
    Term(i, t, {j, i0, count, r0, rows}, k + 1 == terms.size() ? runs : std::vector{count}, acc, sw,
         mode, &first, k, band, first_pixel);
  }
  if (by_image || runs.size() > 1) {  // one activate per image, or per run
    const std::vector<int64_t> each = by_image ? std::vector<int64_t>(count, 1) : runs;
    int64_t m = 0;
    for (const int64_t c : each) {
      acts_.QueueActivate(i, j, i0 + m, c, r0, rows, acc + static_cast<uint64_t>(m * rows), slot);
      acts_.MarkSplit(true);
      m += c;
    }
  } else {
    acts_.QueueActivate(i, j, i0, count, r0, rows, acc, slot);
  }
}

size_t PassEmitter::Term(int i, const OpTerm& t, const PassSpec& ps,
                         const std::vector<int64_t>& runs, uint64_t acc, bool sw, isa::Acc mode,
                         bool* first, size_t k, const isa::WindowGeometry* band,
                         int64_t first_pixel, size_t only) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  const int in = op.inputs[static_cast<size_t>(t.input)];
  const View v = s_.ViewOf(in);
  const GraphTensor& tt = s_.T(in);
  if (!t.window) {  // one row per pixel, tile column t.ktile, `T` rows apart (or an image's
                    // row t.ktile, images a pitch apart: image_rows)
    const int64_t step = op.image_rows ? v.pitch : s_.Tiles(in);
    InPlace(i, t, step, v.Row(ps.i0) + ps.r0 * step, ps.rows, runs, acc, sw, mode, first, k, only);
    return runs.size();
  }
  const int64_t stack = band ? 1 : shapes_.Stack(op, ps.count);
  const isa::WindowGeometry w =
      band ? *band
           : shapes_.Window(op, v, stack, static_cast<int64_t>(op.window.pad_top),
                            static_cast<int64_t>(op.window.out_h));
  // While the input arrives in pieces, each matmul's window cut to the lines it reads.
  const bool cut = host_.Arriving() && !band && stack == 1 && !op.stacked && !op.window.pooled;
  if (!cut) SetWindow(w, i);
  const int64_t per = ps.count / stack, rows = ps.rows;
  for (int64_t im = 0; im < per; ++im) {
    if (only != kAll && static_cast<size_t>(im) != only) continue;
    const int64_t src = v.Row(ps.i0 + im);
    const int64_t n_rows = op.stacked ? ps.count : stack * rows;
    const isa::WindowGeometry wm = cut ? shapes_.CutWindow(w, first_pixel + ps.r0 + n_rows - 1) : w;
    if (cut) SetWindow(wm, i);
    const int64_t map_rows = ((static_cast<int64_t>(wm.in_h) * tt.w - 1) * tt.pixel_bytes +
                              static_cast<int64_t>(wm.channels) + s_.n - 1) /
                             s_.n;
    Matmul(
        i, src, map_rows,
        [&] {
          s_.p.MatmulWindow(static_cast<uint64_t>(src), acc + static_cast<uint64_t>(im * rows),
                            static_cast<uint64_t>(n_rows),
                            static_cast<uint64_t>(op.stacked ? 0 : first_pixel + ps.r0),
                            static_cast<uint64_t>(t.ktile), sw && im == 0, mode);
        },
        acc + static_cast<uint64_t>(im * rows), n_rows, first, k);
  }
  return static_cast<size_t>(per);
}

void PassEmitter::InPlace(int i, const OpTerm& t, int64_t step, int64_t src, int64_t rows,
                          const std::vector<int64_t>& runs, uint64_t acc, bool sw, isa::Acc mode,
                          bool* first, size_t k, size_t only) {
  int64_t m = 0;
  for (size_t q = 0; q < runs.size(); m += runs[q++]) {
    if (only != kAll && q != only) continue;
    const int64_t from = src + m * rows * step + t.ktile, n = runs[q] * rows;
    const uint64_t to = acc + static_cast<uint64_t>(m * rows);
    Matmul(
        i, from, (n - 1) * step + 1,
        [&] {
          s_.p.Matmul(static_cast<uint64_t>(from), to, static_cast<uint64_t>(n), sw && m == 0, mode,
                      static_cast<uint64_t>(step));
        },
        to, n, first, k);
  }
}

void PassEmitter::Matmul(int op, int64_t src, int64_t span, const std::function<void()>& emit,
                         uint64_t acc, int64_t rows, bool* first, size_t term) {
  const Range acc_rows{s_.AccBase() + static_cast<int64_t>(acc),
                       s_.AccBase() + static_cast<int64_t>(acc) + rows};
  if (probing_) {
    touched_ = std::max(touched_, acts_.Touched({src, src + span}, {}, acc_rows));
    return;
  }
  if (host_.Arriving()) host_.Arrive(src + span);  // the pieces of its rows not read yet
  acts_.Touch({src, src + span}, {}, acc_rows);
  emit();
  s_.Rec(op);
  acts_.Streamed(rows / side_by_side_);  // (Flush, below or in Touch, counts from 0)
  if (*first && term == ahead_after_ && !ahead_.empty()) {  // the next pass's tiles
    s_.p.ReadWeights(static_cast<uint64_t>(ahead_.front()) * static_cast<uint64_t>(s_.n * s_.row),
                     ahead_.size());
    s_.Rec(op);
    prefetched_ = std::move(ahead_);
    prefetched_for_ = next_pass_;
    ahead_.clear();
  }
  if (*first && term == 0 && !short_pass_) {  // the pass before's, but one image at a time
    acts_.FlushUnsplit();
  } else if (acts_.FirstSplit() && side_by_side_ == 1) {
    acts_.Flush(1);
  }
  *first = false;
  host_.Streamed(rows / side_by_side_);  // the units of a group stream at once (Lanes)
  acts_.VpuStreamed(rows / side_by_side_);
  host_.SendDone();
  if (host_.BackgroundDue()) {
    params_.LoadNext(op);  // not behind the transfer
    host_.Background(kBackgroundRows);
  }
}

void PassEmitter::SetWindow(const isa::WindowGeometry& w, int op) {
  if (probing_ || (s_.window && *s_.window == w)) return;
  s_.p.SetWindow(w);
  s_.Rec(op);
  s_.window = w;
}

std::vector<int64_t> PassEmitter::TileReads(const std::vector<OpTerm>& terms, bool takes) const {
  std::vector<int64_t> reads(terms.size(), 0);
  int prev = s_.active[static_cast<size_t>(s_.unit)];
  size_t start = 0;
  int64_t run = 0;
  size_t taken = 0;  // of the tiles read while the pass before streamed
  for (size_t k = 0; k < terms.size(); ++k) {
    const int tile = terms[k].tile;
    if (takes && taken < prefetched_.size() && tile == prefetched_[taken]) {
      ++taken;
      prev = tile;
      continue;
    }
    if (tile == prev) continue;
    if (run > 0 && terms[start].tile + run == tile && run < kMaxRows) {
      ++run;
    } else {
      if (run > 0) reads[start] = run;
      start = k;
      run = 1;
    }
    prev = tile;
  }
  if (run > 0) reads[start] = run;
  return reads;
}

size_t PassEmitter::FirstTouch(int i, const std::vector<PassSpec>& g,
                               const std::vector<uint64_t>& acc) {
  const GraphOp& op = s_.g.ops[static_cast<size_t>(i)];
  probing_ = true;
  touched_ = 0;
  for (size_t l = 0; l < g.size(); ++l) {
    s_.Unit(l);
    bool first = false;
    Term(i, op.terms[static_cast<size_t>(g[l].j)][0], g[l], {g[l].count}, acc[l], false,
         isa::Acc::kOverwrite, &first, 0, nullptr, 0, 0);
  }
  probing_ = false;
  return touched_;
}

}  // namespace tpu::compiler::emit
