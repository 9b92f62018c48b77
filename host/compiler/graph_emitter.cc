// Emitting a planned network's program (see graph_emitter.h).
#include "host/compiler/graph_emitter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <optional>

#include "contract/tpu_contract.h"
#include "host/compiler/graph_bound.h"
#include "host/engine/cycle_observer.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler {
namespace {

constexpr int64_t kMaxRows = hw::kOpdMatmulFirst.Max();  // rows in one transfer (16 bits)
constexpr int64_t kBackgroundRows = 512;                 // rows per transfer between matmuls
constexpr size_t kRunTiles = 2;  // tiles a spread unit's read_weights takes where it can
constexpr int64_t kWindowSize = hw::kOpdSetWindowInH.Max();  // map lines a window holds
constexpr int64_t kMostPieces = 16;  // pieces of an image's first input at most (Pieces)
constexpr size_t kAll = SIZE_MAX;    // every matmul of a term (Term)

struct Range {
  int64_t lo = 0, hi = 0;  // [lo, hi)
  bool Overlaps(const Range& o) const { return lo < o.hi && o.lo < hi && lo < hi && o.lo < o.hi; }
};

// An activate waiting for the next pass's first matmul, and what it touches.
struct Act {
  int op = -1;
  uint64_t acc = 0, ub = 0, rows = 0, set = 0, stride = 1;
  bool relu = false;
  isa::Pool pool = isa::Pool::kNone;
  std::optional<isa::Residual> residual;
  // Accumulator rows (those of unit u from u x acc_depth_rows on); unified-buffer rows
  // written and read.
  Range acc_rows, writes, reads;
  bool split = false;  // one image or run of an operation's last pass
  int mxu = 0;         // the matrix unit whose accumulators it reads
};

// A pass: output tile j of images [i0, i0 + count), rows [r0, r0 + rows) of each.
struct PassSpec {
  int64_t j = 0, i0 = 0, count = 0, r0 = 0, rows = 0;
};

// Where the rows of one tensor lie for the images the current group or band works on.
struct View {
  int64_t ub = -1;    // row of image `first`
  int64_t first = 0;  // the first image it holds
  int64_t pitch = 0;  // rows from one image to the next
  int64_t lines = 0;  // pixel rows of the map it holds (a band: fewer than the map's)
  int64_t line0 = 0;  // the map's pixel row it starts at
  // 0: image by image (an image's rows, then the next image's); else tile by tile, the
  // rows of one pixel's tile t of every image from ub + t x by_tile (Plan::output_by_tile)
  int64_t by_tile = 0;
  int64_t Row(int64_t image) const { return ub + (image - first) * pitch; }
  // The row of `image`'s one pixel's tile `tile`.
  int64_t At(int64_t image, int64_t tile) const {
    return by_tile > 0 ? ub + tile * by_tile + (image - first) : Row(image) + tile;
  }
};

class Emitter {
 public:
  Emitter(const LoweredGraph& g, const Plan& plan, const config::TpuConfig& c, int batch,
          int sharers, const CoreShare* share)
      : g_(g),
        plan_(plan),
        c_(c),
        n_(c.array_dim),
        row_(hw::RowBytes(c)),
        set_bytes_(int64_t{hw::ParamRows(hw::ElementBytes(c.dtype))} * row_),
        b_(batch),
        half_(c.acc_depth_rows / 2),
        host_row_cycles_(c.HostRowCycles() * std::max(1, sharers)),
        bounds_(c.mxus_per_core > 1 ? BoundGraph(g, plan, c, batch) : std::vector<Bound>{}),
        share_(share) {}

  EmittedProgram Run() {
    if (c_.dtype == hw::Dtype::kBf16) {
      p_.SetFormat(true);
      Rec(-1);
    }
    const int64_t sets = static_cast<int64_t>(g_.params.size()) / set_bytes_;
    all_params_ = sets <= c_.param_sets;
    if (all_params_) {
      p_.ReadParams(plan_.params_addr, 0, static_cast<uint64_t>(sets));
      Rec(-1);
    }
    for (size_t s = 0; s < plan_.segments.size(); ++s) {
      seg_end_ = plan_.segments[s].banded ? plan_.segments[s].first + 1 : plan_.segments[s].end;
      Segment(static_cast<int>(s));
    }
    Flush();
    p_.Halt();
    Rec(-1);
    EmittedProgram out;
    out.program = p_.Take();
    out.op_of = std::move(op_of_);
    out.op_units = std::move(op_units_);
    return out;
  }

 private:
  // ---- bookkeeping

  void Rec(int op) { op_of_.resize(p_.program().words.size(), op); }
  const GraphTensor& T(int t) const { return g_.tensors[static_cast<size_t>(t)]; }
  int64_t Tiles(int t) const { return T(t).T(n_); }

  // Emits the waiting activates, in order, up to the last one that an instruction about to be
  // emitted touches (reads: unified-buffer rows it reads; writes: rows it writes; acc:
  // accumulator rows; set: a parameter set).
  void Touch(const Range& reads, const Range& writes, const Range& acc = {}, int64_t set = -1) {
    Flush(Touched(reads, writes, acc, set));
  }
  // How many of the waiting activates Touch would emit.
  size_t Touched(const Range& reads, const Range& writes, const Range& acc = {},
                 int64_t set = -1) const {
    size_t upto = 0;
    for (size_t k = 0; k < pending_.size(); ++k) {
      const Act& a = pending_[k];
      if (a.writes.Overlaps(reads) || a.writes.Overlaps(writes) || a.reads.Overlaps(writes) ||
          a.acc_rows.Overlaps(acc) || static_cast<int64_t>(a.set) == set)
        upto = k + 1;
    }
    return upto;
  }
  void Flush(size_t upto = SIZE_MAX) {
    upto = std::min(upto, pending_.size());
    for (size_t k = 0; k < upto; ++k) {
      const Act& a = pending_[k];
      if (a.residual) p_.SetResidual(*a.residual);
      p_.SetUnit(static_cast<uint64_t>(a.mxu));
      p_.Activate(a.acc, a.ub, a.rows, a.set, a.relu, a.pool, a.stride, a.residual.has_value());
      Rec(a.op);
      vpu_due_ = static_cast<int64_t>(a.rows) + (k > 0 ? vpu_due_ : 0);
      vpu_since_ = 0;
      after_acts_ = 0;
    }
    p_.SetUnit(static_cast<uint64_t>(unit_));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(upto));
  }

  // Where the current matrix unit's accumulator rows start in the one space of every unit's
  // rows that Touch compares.
  int64_t AccBase() const { return int64_t{unit_} * c_.acc_depth_rows; }

  // ---- host transfers

  void ReadHost(uint64_t host, int64_t ub, int64_t rows, int op) {
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
      const int64_t r = std::min(kMaxRows, rows - r0);
      Touch({}, {ub + r0, ub + r0 + r});
      p_.ReadHost(host + static_cast<uint64_t>(r0 * row_), static_cast<uint64_t>(ub + r0),
                  static_cast<uint64_t>(r));
      Rec(op);
    }
  }
  void WriteHost(int64_t ub, uint64_t host, int64_t rows, int op) {
    for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
      const int64_t r = std::min(kMaxRows, rows - r0);
      Touch({ub + r0, ub + r0 + r}, {});
      p_.WriteHost(static_cast<uint64_t>(ub + r0), host + static_cast<uint64_t>(r0 * row_),
                   static_cast<uint64_t>(r));
      Rec(op);
    }
  }
  // Model parallel: the core's tiles of operation i's output map, pixel by pixel, to the next
  // exchange area; a barrier of every core (their writes are posted, so they have landed
  // once each core's DMA is idle); then the whole map back, the core's own tiles included
  // (the same values), as one transfer. Two areas in turn: a core writes an area again only
  // after the barrier of the exchange between, which every core passes with its reads of
  // the area done.
  void Exchange(int i, int64_t g0, int64_t count) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const int64_t t = Tiles(op.output), rows = T(op.output).rows;
    const int64_t ub = ViewOf(op.output).Row(g0);
    const uint64_t area = share_->exchange[exchanges_++ % 2];
    Flush();
    for (int64_t r = op.tile0; r < count * rows; r += t)
      WriteHost(ub + r, area + static_cast<uint64_t>(r * row_), op.nt, i);
    p_.Barrier((uint64_t{1} << share_->cores) - 1);
    Rec(i);
    ReadHost(area, ub, count * rows, i);
  }
  // Tiles [sent_, upto) of the model's output for images [g0, g0 + count), laid out tile by
  // tile (View::by_tile): in host memory, tile t of image i is row t x B + i. One transfer
  // where the tiles follow each other in both (a group of the whole batch, its area's size).
  void SendTiles(int i, int64_t g0, int64_t count, int64_t upto) {
    const View v = ViewOf(g_.output);
    auto host = [&](int64_t tile) {
      return plan_.output_addr + static_cast<uint64_t>((tile * b_ + g0) * row_);
    };
    if (sent_ < upto && count == b_ && count == v.by_tile) {
      WriteHost(v.At(g0, sent_), host(sent_), (upto - sent_) * count, i);
      sent_ = upto;
    }
    for (; sent_ < upto; ++sent_) WriteHost(v.At(g0, sent_), host(sent_), count, i);
    unsent_.reset();
  }
  // The output's tiles whose passes are done (unsent_), sent where the transfer would hold
  // back nothing behind it: their activates emitted and, by the rows the matmuls emitted
  // after them stream, done (the transfer waits for them, and the chip issues in order), and
  // no other host transfer under way or due.
  void SendDone() {
    if (!unsent_ || !background_.empty() || Arriving() || after_acts_ < vpu_due_) return;
    const Unsent u = *unsent_;
    const View v = ViewOf(g_.output);
    if (Touched({v.At(u.g0, sent_), v.At(u.g0, u.upto - 1) + u.count}, {}) > 0) return;
    SendTiles(u.op, u.g0, u.count, u.upto);
  }
  uint64_t HostRow(int t, int64_t image) const {
    return plan_.places[static_cast<size_t>(t)].host_addr +
           static_cast<uint64_t>(image * T(t).rows * row_);
  }

  // ---- parameter sets

  // The parameter-set slot that holds set `set` (loaded now if it is not there).
  uint64_t Slot(int64_t set, int op) {
    if (all_params_) return static_cast<uint64_t>(set);
    if (slot_of_.count(set) == 0) Load(set, 1, op);
    return static_cast<uint64_t>(slot_of_.at(set));
  }
  // Sets `sets` that are not in a slot, loaded with one read where they follow each other
  // and their slots in turn do too (else Slot loads each when it is used): each read_host
  // pays the host link's latency, and one emitted while the host DMA is busy holds back
  // every instruction behind it. Not into slots `keep` (sets still to be used).
  void Preload(const std::vector<int64_t>& sets, int op, const std::vector<uint64_t>& keep = {}) {
    if (all_params_) return;
    std::vector<int64_t> missing;
    for (const int64_t set : sets)
      if (slot_of_.count(set) == 0) missing.push_back(set);
    for (size_t k = 1; k < missing.size(); ++k)
      if (missing[k] != missing[0] + static_cast<int64_t>(k)) return;
    const auto n = static_cast<int64_t>(missing.size());
    for (const uint64_t slot : keep)
      if (static_cast<int64_t>(slot) >= next_slot_ && static_cast<int64_t>(slot) < next_slot_ + n)
        return;
    if (n > 1 && next_slot_ + n <= c_.param_sets) Load(missing[0], n, op);
  }
  // Sets [first, first + n) into the next n slots in turn (which do not wrap).
  void Load(int64_t first, int64_t n, int op) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t slot = next_slot_ + k;
      if (const auto old = set_in_.find(slot); old != set_in_.end()) slot_of_.erase(old->second);
      Touch({}, {}, {}, slot);
      slot_of_[first + k] = slot;
      set_in_[slot] = first + k;
    }
    p_.ReadParams(plan_.params_addr + static_cast<uint64_t>(first * set_bytes_),
                  static_cast<uint64_t>(next_slot_), static_cast<uint64_t>(n));
    Rec(op);
    next_slot_ = (next_slot_ + n) % c_.param_sets;
  }

  // ---- segments and groups

  void Segment(int s) {
    const PlanSegment& seg = plan_.segments[static_cast<size_t>(s)];
    if (seg.banded) return Banded(s);
    const auto& staging = plan_.staging[static_cast<size_t>(s)];
    int buffer = 0;
    if (!staging.empty()) {
      LoadNext(seg.first - 1);  // not behind the group's input
      StageFirst(s);
    }
    for (int64_t g0 = 0; g0 < b_; g0 += seg.group, buffer ^= 1) {
      const int64_t count = std::min<int64_t>(seg.group, b_ - g0);
      if (!staging.empty() && g0 + seg.group < b_) {  // the next group's, between the matmuls
        const int64_t next = std::min<int64_t>(seg.group, b_ - g0 - seg.group);
        for (const Staging& st : staging)
          background_.push_back({HostRow(st.tensor, g0 + seg.group), st.ub[buffer ^ 1],
                                 next * T(st.tensor).rows, seg.first});
        streamed_ = 0;
        due_ = 0;
      }
      views_.clear();
      sent_ = 0;
      for (const Staging& st : staging)
        views_[st.tensor] = {st.ub[buffer], g0, T(st.tensor).rows, T(st.tensor).h, 0};
      for (int i = seg.first; i < seg.end; ++i) {
        Op(i, g0, count);
        while (!arriving_.empty()) ArriveNext();  // what the first operation left
        arrived_ = -1;
        const int out = g_.ops[static_cast<size_t>(i)].output;
        const bool sends = !share_ || share_->core == 0 || out != g_.output;
        if (plan_.places[static_cast<size_t>(out)].host && sends) {  // spilled, or the output
          const View v = ViewOf(out);
          if (v.by_tile > 0) {
            SendTiles(i, g0, count, Tiles(out));
          } else {
            WriteHost(v.Row(g0), HostRow(out, g0), count * T(out).rows, i);
          }
        }
        if (share_ && share_->split[static_cast<size_t>(i)]) Exchange(i, g0, count);
      }
      while (!background_.empty()) Background(background_.front().rows);
    }
  }

  // The first group's staged input, which no group's matmuls hide: in pieces (arriving_)
  // where the segment's first operation reads it through a window, so that its first
  // matmuls start once the lines they read are in (docs/compiler.md, "The first input in
  // pieces"); the rest whole.
  void StageFirst(int s) {
    const PlanSegment& seg = plan_.segments[static_cast<size_t>(s)];
    const int64_t count = std::min<int64_t>(seg.group, b_);
    for (const Staging& st : plan_.staging[static_cast<size_t>(s)]) {
      const int64_t image = T(st.tensor).rows, rows = count * image;
      const int64_t pieces = Pieces(seg.first, st.tensor, count);
      if (pieces == 1) {
        ReadHost(HostRow(st.tensor, 0), st.ub[0], rows, seg.first);
        continue;
      }
      const int64_t size = (image + pieces - 1) / pieces;
      for (int64_t r0 = 0; r0 < rows; r0 += size)
        arriving_.push_back({HostRow(st.tensor, 0) + static_cast<uint64_t>(r0 * row_),
                             st.ub[0] + r0, std::min(size, rows - r0), seg.first});
    }
    if (arriving_.empty()) return;
    // The next operation's first sets too, where they fit beside the first's: read later,
    // they would wait behind the pieces and hold back the matmuls behind them.
    if (seg.first + 1 < seg_end_ &&
        FirstSets(seg.first) + FirstSets(seg.first + 1) <= c_.param_sets)
      LoadNext(seg.first);
    ArriveNext();  // the first piece; the next goes with the first matmul that reads it
  }
  // The parameter sets of op i's first pass (one a unit it spreads over; LoadNext).
  int64_t FirstSets(int i) const {
    return std::min<int64_t>(g_.ops[static_cast<size_t>(i)].nt, SpreadUnits(i));
  }
  // The pieces of each image of tensor t that op i's first matmuls read: where a window
  // over its lines can be cut to the lines a matmul reads (CutWindow), about sqrt(C / L),
  // C the cycles the op's matmuls take per image and column, L the host link's latency,
  // which a piece pays: the last lands about k x L later than one transfer would, and the
  // matmuls on it take C / k after it (docs/compiler.md).
  int64_t Pieces(int i, int t, int64_t count) const {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    if (!Windowed(op) || op.inputs[0] != t || op.stacked || op.window.pooled ||
        Stack(op, count) != 1)
      return 1;
    const int64_t units = op.nt < SpreadUnits(i) ? SpreadUnits(i) : 1;
    const double c =
        static_cast<double>(op.rows * static_cast<int64_t>(op.terms[0].size()) / units);
    const double k =
        std::sqrt(c / static_cast<double>(std::max<int64_t>(1, c_.host_mem_latency_cycles)));
    return std::clamp<int64_t>(std::llround(k), 1, kMostPieces);
  }
  // Emits, before a matmul that reads unified-buffer rows below `hi`, the pieces of
  // arriving_ those rows lie in, and where the last piece emitted is one of them, the next
  // piece too: its read_host issues once the DMA has brought the piece the matmul waits for
  // anyway, and it streams while the matmuls on the pieces before run (the chip issues in
  // order, so a read_host emitted while the DMA is busy holds back every instruction behind
  // it: one piece ahead, and only of a matmul that waits for the one before).
  void Arrive(int64_t hi) {
    while (!arriving_.empty() && arriving_.front().ub < hi) ArriveNext();
    if (arrived_ >= hi) return;
    arrived_ = -1;  // read now
    if (!arriving_.empty()) ArriveNext();
  }
  // Whether pieces are still to be emitted, or the last one emitted still streams in ahead
  // of the matmuls that read it (no other transfer goes before they do).
  bool Arriving() const { return !arriving_.empty() || arrived_ >= 0; }
  void ArriveNext() {
    const Transfer t = arriving_.front();
    arriving_.pop_front();
    ReadHost(t.host, t.ub, t.rows, t.op);
    arrived_ = t.ub;
  }
  // Window w of op cut to the lines its output pixels up to `last` read: the same values
  // (the lines below it are never read), a footprint that ends where those lines do.
  isa::WindowGeometry CutWindow(const isa::WindowGeometry& w, int64_t last) const {
    isa::WindowGeometry cut = w;
    const auto y = static_cast<uint64_t>(last) / w.out_w;
    cut.out_h = y + 1;
    cut.in_h = std::min<uint64_t>(w.in_h, y * w.stride_y + w.kh - w.pad_top);
    return cut;
  }

  // Where tensor t's rows are for the current group: staged, or its own area.
  View ViewOf(int t) const {
    const auto it = views_.find(t);
    if (it != views_.end()) return it->second;
    const TensorPlace& place = plan_.places[static_cast<size_t>(t)];
    const int64_t first = place.images >= b_ ? 0 : group0_;
    const bool by_tile = t == g_.output && plan_.output_by_tile;
    return {place.ub, first, T(t).rows, T(t).h, 0, by_tile ? place.images : 0};
  }

  // Operation i for images [g0, g0 + count): its passes, on a core of several matrix units
  // spread over them (Spread).
  void Op(int i, int64_t g0, int64_t count) {
    group0_ = g0;
    if (Spreads(i)) {
      collect_ = true;
      passes_.clear();
      OpPasses(i, g0, count);
      collect_ = false;
      return Spread(i);
    }
    OpPasses(i, g0, count);
  }
  void OpPasses(int i, int64_t g0, int64_t count) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const int64_t rows = op.rows, most = Most(op);
    // Spread over units of their own images or rows (fewer output tiles than units): at
    // least a pass per unit, by images where there are enough, else by rows.
    const int64_t units =
        collect_ && (op.nt < SpreadUnits(i) || !LineUp(op)) ? RowUnits(i, count * rows) : 1;
    if (rows <= most && !op.stacked && (count >= units || rows < 2)) {  // whole images
      const int64_t fit = std::max<int64_t>(1, most / rows);
      int64_t passes = std::max((count + fit - 1) / fit, std::min(count, units));
      // Spread column by column with every image in one pass: two passes where each still
      // hides the units' reads of its tiles, so that the first's activates run while the
      // second streams (docs/compiler.md, "Two passes a column where the reads hide").
      if (collect_ && passes == 1 && count >= 2 &&
          count / 2 * rows >= SideBySide(SpreadUnits(i), TileReadCycles()))
        passes = 2;
      const int64_t per = (count + passes - 1) / passes;  // passes of equal size
      for (int64_t j = 0; j < op.nt; ++j) {
        for (int64_t i0 = g0; i0 < g0 + count; i0 += per)
          Pass(i, j, i0, std::min(per, g0 + count - i0), 0, rows, i0 + per >= g0 + count);
        // The model's output tile by tile: a tile goes after a later matmul once its activate
        // is done (Matmul, SendDone), Segment sends the rest.
        if (op.output == g_.output && ViewOf(op.output).by_tile > 0 && !collect_ && !share_)
          unsent_ = Unsent{i, g0, count, op.tile0 + j + 1};
      }
      return;
    }
    if (op.stacked) {  // one row per image: images in pieces of at most half the rows
      // The images form one tall map only where each fills whole rows: a packed input of
      // c x pixels bytes that does not (84 bytes on 8 lanes) goes one image per pass.
      const GraphTensor& in = T(op.inputs[0]);
      const int64_t piece = in.packed && in.rows * n_ != in.Pixels() * in.c ? 1 : most;
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
    const int64_t spread = collect_ ? std::min<int64_t>(SpreadUnits(i), pieces) : 1;
    if (spread > 1 && rows > most && rows / (2 * pieces) >= SideBySide(spread, TileReadCycles()))
      pieces *= 2;
    int64_t chunk = (rows + pieces - 1) / pieces;
    if (op.window.pooled) chunk = (chunk + 3) / 4 * 4;
    for (int64_t j = 0; j < op.nt; ++j)
      for (int64_t im = g0; im < g0 + count; ++im)
        for (int64_t r0 = 0; r0 < rows; r0 += chunk)
          Pass(i, j, im, 1, r0, std::min(chunk, rows - r0),
               im + 1 == g0 + count && r0 + chunk >= rows);
  }

  // The tiles of the next pass's column (column j + 1, or the first column of the next
  // operation of the group's segment), read while the last pass of column j streams: right
  // after the matmul that switches in this pass's last tile (the FIFO then holds none of this
  // pass's tiles and the weight DMA has brought them all, so the read neither waits for room
  // nor holds back the matmuls behind it; otherwise it would go before the next pass, after
  // column j's last matmul issued). A column of one tile keeps it in the array for its later
  // passes, so its first pass reads ahead. Only when they are one run in weight memory that
  // fits the FIFO, and when this pass switches a tile in at all. Sets next_pass_.
  std::vector<int> NextTiles(int i, int64_t j, const std::vector<OpTerm>& terms, bool last) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    next_pass_ = {i, j + 1};
    if (j + 1 >= op.nt) {  // the next operation of the group's segment, if any
      if (i + 1 >= seg_end_) return {};
      next_pass_ = {i + 1, 0};
    }
    const GraphOp& next_op = g_.ops[static_cast<size_t>(next_pass_.first)];
    if (Spreads(next_pass_.first)) return {};  // its units read their own tiles (Lanes)
    bool switches = false, one = true;
    int prev = active_[static_cast<size_t>(unit_)];
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
    if (static_cast<int64_t>(next.size()) > c_.weight_fifo_tiles) return {};
    return next;
  }
  // The term whose first matmul switches in this pass's last tile (the read-ahead follows it).
  static size_t LastSwitch(const std::vector<OpTerm>& terms, int active) {
    size_t at = 0;
    int prev = active;
    for (size_t k = 0; k < terms.size(); ++k) {
      if (terms[k].tile != prev) at = k;
      prev = terms[k].tile;
    }
    return at;
  }

  // Passes are sized so that the accumulators hold the rows of two (one fills while the VPU
  // empties the other), or of three for an operation whose passes each stream one tile: a
  // pass then need not wait for the activate two passes back to finish reading, which ends 2N
  // cycles after the rows it reads arrived (more passes cost nothing there: the tile stays in
  // the array). Region() places them so that this holds across operations too.
  int Regions(const GraphOp& op) const {
    for (const auto& ts : op.terms)
      for (const OpTerm& t : ts)
        if (t.tile != ts.front().tile) return 2;
    return 3;
  }
  // Where a pass of `rows` rows starts: the next region in turn that overlaps none of the
  // last regions - 1 passes (whose activates may still wait or run), else the next that
  // overlaps not the last pass, else the next in turn. (Regions in turn alone put the first
  // pass of an operation of three regions on the rows of the last activate of one of two:
  // resnet18's downsample waited 1,571 cycles for it. Where the two passes before fill both
  // halves, as mobilenet_v2's depthwise and projection convolutions do, the last one's rows
  // are the ones whose activates still wait.) A short pass (ShortPass) goes right after the
  // last pass's rows instead, or from row 0 where they do not fit, when that is clear of the
  // last two passes: its activate waits, so the short passes after it must not take its rows.
  int64_t Region(int regions, int64_t rows, bool short_pass) {
    const int64_t size = 2 * half_ / regions;
    std::vector<Range>& recent = recent_[static_cast<size_t>(unit_)];
    int64_t& seq = seq_[static_cast<size_t>(unit_)];
    auto clear = [&](int64_t at, int passes) {  // of the last `passes` passes' rows
      const Range r{at, at + rows};
      for (int b = 0; b < passes && b < static_cast<int>(recent.size()); ++b)
        if (r.Overlaps(recent[recent.size() - 1 - static_cast<size_t>(b)])) return false;
      return true;
    };
    if (short_pass && !recent.empty()) {
      const int64_t after = recent.back().hi, at = after + rows <= 2 * half_ ? after : 0;
      if (clear(at, 2)) return Take({at, at + rows});
    }
    int64_t k = seq % regions;
    bool found = false;
    for (int passes = regions - 1; passes >= 1 && !found; --passes)
      for (int t = 0; t < regions && !found; ++t)
        if (clear((seq + t) % regions * size, passes)) {
          k = (seq + t) % regions;
          found = true;
        }
    seq = k + 1;
    return Take({k * size, k * size + rows});
  }
  int64_t Take(const Range& r) {
    std::vector<Range>& recent = recent_[static_cast<size_t>(unit_)];
    recent.push_back(r);
    if (recent.size() > 2) recent.erase(recent.begin());
    return r.lo;
  }
  // A pass of fewer rows than the 2N cycles a matmul's rows take to drain, all through one
  // tile: its matmuls stream back to back and each extends the draining footprint (timing.md),
  // so an activate placed after its first matmul would wait for the whole pass, holding back
  // the matmuls behind it. The pass before's activates stay waiting instead (Matmul), until
  // an instruction touches their rows or a longer pass begins. (resnet50's global average
  // pooling: eight passes of one output tile, 49 matmuls of 8 rows each, waited 512 cycles
  // each: 8,559 cycles, 2.73 x its bound.) A pass that switches tiles leaves the activate
  // the gaps of its tile loads: with those too, edge-32 took 0.1-0.4 % more at batch 1.
  bool ShortPass(const GraphOp& op, int64_t rows) const {
    return Regions(op) == 3 && rows < 2 * n_;
  }

  // How the operation after op i in its segment reads op i's output with its first term:
  // through window matmuls of one image each (then op i's last pass activates image by
  // image, and each of those matmuls waits only for its own image's rows), in place (then op
  // i's last pass hands its images on in runs, Runs, each activated on its own), or not.
  enum class NextRead { kNot, kImageByImage, kInPlace };
  NextRead NextReads(int i) const {
    if (i + 1 >= seg_end_) return NextRead::kNot;
    const GraphOp& next = g_.ops[static_cast<size_t>(i + 1)];
    const OpTerm& t = next.terms.front().front();
    if (next.stacked ||
        next.inputs[static_cast<size_t>(t.input)] != g_.ops[static_cast<size_t>(i)].output)
      return NextRead::kNot;
    if (!t.window) return NextRead::kInPlace;
    return next.tall ? NextRead::kNot : NextRead::kImageByImage;
  }
  // The images of each matmul of the last in-place term of a pass that hands its images on:
  // runs of at least 2N rows, a shorter rest joined to the run before, and where a term of
  // the pass went before (`alone`), the first image alone before them (its activate then
  // runs while the rest stream). A matmul whose last row enters while the one before still
  // drains extends that one's draining footprint (timing.md), so the activate of the one
  // before would wait for both: a lone image right after the pass before's last matmul would
  // hold back that pass's activate. One run where no second reaches 2N.
  std::vector<int64_t> Runs(int64_t count, int64_t rows, bool alone) const {
    const int64_t need = (2 * n_ + rows - 1) / rows, after = count - (alone ? 1 : 0);
    if (after < (alone ? need : 2 * need)) return {count};  // no second run of 2N rows
    std::vector<int64_t> runs;
    if (alone) runs.push_back(1);
    for (int64_t rest = after; rest > 0;) {
      const int64_t run = rest - need < need ? rest : need;
      runs.push_back(run);
      rest -= run;
    }
    return runs;
  }

  // The rows of one pass.
  int64_t Most(const GraphOp& op) const {
    const int64_t size = 2 * half_ / Regions(op);
    return op.window.pooled ? size - size % 4 : size;
  }

  // The window of op over map view v (its lines), for images stacked or one at a time.
  isa::WindowGeometry Window(const GraphOp& op, const View& v, int64_t stack, int64_t pad_top,
                             int64_t out_h) const {
    const GraphTensor& in = T(op.inputs[0]);
    isa::WindowGeometry w = op.window;
    w.in_h = static_cast<uint64_t>(stack * v.lines);
    w.in_w = static_cast<uint64_t>(in.w);
    w.pad_top = static_cast<uint64_t>(pad_top);
    if (op.stacked) {  // one window per image: the images' maps on top of each other
      w.stride_y = static_cast<uint64_t>(in.h);
      w.out_h = static_cast<uint64_t>(stack);
    } else {
      w.out_h = static_cast<uint64_t>(stack * out_h);
    }
    return w;
  }
  // The images one window matmul of op streams at once: all of a pass's, stacked (a stacked
  // or tall op, while the tall map fits the window registers), else one.
  int64_t Stack(const GraphOp& op, int64_t count) const {
    if (op.stacked) return count;
    const int64_t lines = T(op.inputs[0]).h;
    return op.tall && count * lines <= kWindowSize ? count : 1;
  }

  // One pass: output tile j of images [i0, i0 + count), accumulator rows [r0, r0 + rows) of
  // each (window pixels, or pixels), through every term of tile j. `band` gives the window
  // of a band (its lines, top padding, output rows) when the op runs in bands, and `first`
  // where the band's first window pixel is in that window's walk.
  void Pass(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows, bool last,
            const isa::WindowGeometry* band = nullptr, int64_t first_pixel = 0) {
    if (collect_) {
      passes_.push_back({j, i0, count, r0, rows});
      return;
    }
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const int64_t acc_rows = count * rows;
    short_pass_ = ShortPass(op, acc_rows);
    const uint64_t acc = static_cast<uint64_t>(Region(Regions(op), acc_rows, short_pass_));
    const auto& terms = op.terms[static_cast<size_t>(j)];
    const bool takes = std::make_pair(i, j) == prefetched_for_;  // the tiles read ahead
    const std::vector<int64_t> reads = TileReads(terms, takes);
    if (takes) prefetched_.clear();  // TileReads left them out
    ahead_ = NextTiles(i, j, terms, last);
    ahead_after_ = LastSwitch(terms, active_[static_cast<size_t>(unit_)]);
    const uint64_t slot = Slot(op.first_param + j, i);
    const NextRead next =
        last && j + 1 == op.nt ? HandsOn(i, {{j, i0, count, r0, rows}}) : NextRead::kNot;
    const bool by_image = next == NextRead::kImageByImage;
    const std::vector<int64_t> runs =
        next != NextRead::kNot ? Runs(count, rows, terms.size() > 1) : std::vector{count};
    bool first = true;
    for (size_t k = 0; k < terms.size(); ++k) {
      const OpTerm& t = terms[k];
      first = first || k == ahead_after_;
      if (reads[k] > 0) {  // the tiles of this term and the next ones, as one read
        p_.ReadWeights(static_cast<uint64_t>(t.tile) * static_cast<uint64_t>(n_ * row_),
                       static_cast<uint64_t>(reads[k]));
        Rec(i);
      }
      const bool sw = t.tile != active_[static_cast<size_t>(unit_)];
      active_[static_cast<size_t>(unit_)] = t.tile;
      const isa::Acc mode = k == 0 ? isa::Acc::kOverwrite : op.acc;
      Term(i, t, {j, i0, count, r0, rows}, k + 1 == terms.size() ? runs : std::vector{count}, acc,
           sw, mode, &first, k, band, first_pixel);
    }
    if (by_image || runs.size() > 1) {  // one activate per image, or per run
      const std::vector<int64_t> each = by_image ? std::vector<int64_t>(count, 1) : runs;
      int64_t m = 0;
      for (const int64_t c : each) {
        QueueActivate(i, j, i0 + m, c, r0, rows, acc + static_cast<uint64_t>(m * rows), slot);
        pending_.back().split = true;
        m += c;
      }
    } else {
      QueueActivate(i, j, i0, count, r0, rows, acc, slot);
    }
  }

  // The matmuls of term t (the k-th of its pass `ps`) into accumulator rows from `acc`: in
  // place, one per run of images (`runs`); through the window, one per image (all of a
  // stacked or tall pass's at once), of `band` where the op runs in bands. Only the
  // `only`-th of them where given (Lanes); returns how many there are.
  size_t Term(int i, const OpTerm& t, const PassSpec& ps, const std::vector<int64_t>& runs,
              uint64_t acc, bool sw, isa::Acc mode, bool* first, size_t k,
              const isa::WindowGeometry* band = nullptr, int64_t first_pixel = 0,
              size_t only = kAll) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const int in = op.inputs[static_cast<size_t>(t.input)];
    const View v = ViewOf(in);
    const GraphTensor& tt = T(in);
    if (!t.window) {  // one row per pixel, tile column t.ktile, `T` rows apart (or an image's
                      // row t.ktile, images a pitch apart: image_rows)
      const int64_t step = op.image_rows ? v.pitch : Tiles(in);
      InPlace(i, t, step, v.Row(ps.i0) + ps.r0 * step, ps.rows, runs, acc, sw, mode, first, k,
              only);
      return runs.size();
    }
    const int64_t stack = band ? 1 : Stack(op, ps.count);
    const isa::WindowGeometry w =
        band ? *band
             : Window(op, v, stack, static_cast<int64_t>(op.window.pad_top),
                      static_cast<int64_t>(op.window.out_h));
    // While the input arrives in pieces, each matmul's window cut to the lines it reads.
    const bool cut = Arriving() && !band && stack == 1 && !op.stacked && !op.window.pooled;
    if (!cut) SetWindow(w, i);
    const int64_t per = ps.count / stack, rows = ps.rows;
    for (int64_t im = 0; im < per; ++im) {
      if (only != kAll && static_cast<size_t>(im) != only) continue;
      const int64_t src = v.Row(ps.i0 + im);
      const int64_t n_rows = op.stacked ? ps.count : stack * rows;
      const isa::WindowGeometry wm = cut ? CutWindow(w, first_pixel + ps.r0 + n_rows - 1) : w;
      if (cut) SetWindow(wm, i);
      const int64_t map_rows = ((static_cast<int64_t>(wm.in_h) * tt.w - 1) * tt.pixel_bytes +
                                static_cast<int64_t>(wm.channels) + n_ - 1) /
                               n_;
      Matmul(
          i, src, map_rows,
          [&] {
            p_.MatmulWindow(static_cast<uint64_t>(src), acc + static_cast<uint64_t>(im * rows),
                            static_cast<uint64_t>(n_rows),
                            static_cast<uint64_t>(op.stacked ? 0 : first_pixel + ps.r0),
                            static_cast<uint64_t>(t.ktile), sw && im == 0, mode);
          },
          acc + static_cast<uint64_t>(im * rows), n_rows, first, k);
    }
    return static_cast<size_t>(per);
  }

  // The matmuls of in-place term t (tile column t.ktile of rows `step` apart, from `src` on)
  // into accumulator rows from `acc`: one per run of images of `rows` rows each.
  // Only the `only`-th of them, where given.
  void InPlace(int i, const OpTerm& t, int64_t step, int64_t src, int64_t rows,
               const std::vector<int64_t>& runs, uint64_t acc, bool sw, isa::Acc mode, bool* first,
               size_t k, size_t only) {
    int64_t m = 0;
    for (size_t q = 0; q < runs.size(); m += runs[q++]) {
      if (only != kAll && q != only) continue;
      const int64_t from = src + m * rows * step + t.ktile, n = runs[q] * rows;
      const uint64_t to = acc + static_cast<uint64_t>(m * rows);
      Matmul(
          i, from, (n - 1) * step + 1,
          [&] {
            p_.Matmul(static_cast<uint64_t>(from), to, static_cast<uint64_t>(n), sw && m == 0, mode,
                      static_cast<uint64_t>(step));
          },
          to, n, first, k);
    }
  }

  // A matmul (emitted by `emit`) reading unified-buffer rows [src, src + span) into
  // accumulator rows [acc, acc + rows); the waiting activates go after the pass's first
  // (not in a short pass), except an operation's last pass's activates of one image or run
  // each, which go one per matmul.
  template <typename F>
  void Matmul(int op, int64_t src, int64_t span, F&& emit, uint64_t acc, int64_t rows, bool* first,
              size_t term) {
    const Range acc_rows{AccBase() + static_cast<int64_t>(acc),
                         AccBase() + static_cast<int64_t>(acc) + rows};
    if (probing_) {
      touched_ = std::max(touched_, Touched({src, src + span}, {}, acc_rows));
      return;
    }
    if (Arriving()) Arrive(src + span);  // the pieces of its rows not read yet
    Touch({src, src + span}, {}, acc_rows);
    emit();
    Rec(op);
    after_acts_ += rows / side_by_side_;  // (Flush, below or in Touch, counts from 0)
    if (*first && term == ahead_after_ && !ahead_.empty()) {  // the next pass's tiles
      p_.ReadWeights(static_cast<uint64_t>(ahead_.front()) * static_cast<uint64_t>(n_ * row_),
                     ahead_.size());
      Rec(op);
      prefetched_ = std::move(ahead_);
      prefetched_for_ = next_pass_;
      ahead_.clear();
    }
    if (*first && term == 0 && !short_pass_) {  // the pass before's, but one image at a time
      size_t upto = 0;
      while (upto < pending_.size() && !pending_[upto].split) ++upto;
      Flush(std::max<size_t>(upto, 1));
    } else if (!pending_.empty() && pending_.front().split && side_by_side_ == 1) {
      Flush(1);
    }
    *first = false;
    streamed_ += rows / side_by_side_;  // the units of a group stream at once (Lanes)
    vpu_since_ += rows / side_by_side_;
    SendDone();
    if (!background_.empty() && !Arriving() && streamed_ >= due_) {
      LoadNext(op);  // not behind the transfer
      Background(kBackgroundRows);
    }
  }
  // The parameter sets the first pass of the operation after op takes (one a unit it
  // spreads over), loaded now where they are not in a slot: before a host transfer, which
  // would hold back a read_host of them emitted behind it for all its rows.
  void LoadNext(int op) {
    if (all_params_ || op + 1 >= seg_end_) return;
    const GraphOp& next = g_.ops[static_cast<size_t>(op + 1)];
    std::vector<int64_t> sets;
    for (int64_t j = 0; j < FirstSets(op + 1); ++j) sets.push_back(next.first_param + j);
    Preload(sets, op + 1);
    for (const int64_t set : sets) Slot(set, op + 1);
  }

  // The next `rows` rows (at most) of the waiting transfers. The host DMA takes one transfer
  // at a time, and the chip issues in order: a read_host emitted while the DMA is busy holds
  // back every instruction after it. So a group's transfers for the next group go between
  // its matmuls, each once the matmuls emitted since the one before have streamed as many
  // rows as that one takes cycles (its latency and rows at this core's part of the link: on a
  // chip whose cores run their shares at once, the link's rows a cycle divided among them;
  // a transfer paced at the whole link would still be running when the next is emitted, and
  // hold back the matmuls behind it. A stalled matmul only takes longer).
  void Background(int64_t rows) {
    Transfer& t = background_.front();
    const int64_t r = std::min(rows, t.rows);
    ReadHost(t.host, t.ub, r, t.op);
    due_ = c_.host_mem_latency_cycles +
           static_cast<int64_t>(std::ceil(static_cast<double>(r) * host_row_cycles_));
    streamed_ = 0;
    t.host += static_cast<uint64_t>(r * row_);
    t.ub += r;
    t.rows -= r;
    if (t.rows == 0) background_.erase(background_.begin());
  }

  void SetWindow(const isa::WindowGeometry& w, int op) {
    if (probing_ || (window_ && *window_ == w)) return;
    p_.SetWindow(w);
    Rec(op);
    window_ = w;
  }

  // Where the pass reads its tiles: for each term, the tiles one read_weights brings from
  // there (0: none starts there). A term whose tile is the one before it switches nothing and
  // reads nothing; the others' tiles are read in runs that lie one after another in weight
  // memory. Each read goes right before the matmuls that take its tiles, so that a read
  // waiting for FIFO room never stands in front of the matmuls that would make it.
  std::vector<int64_t> TileReads(const std::vector<OpTerm>& terms, bool takes) const {
    std::vector<int64_t> reads(terms.size(), 0);
    int prev = active_[static_cast<size_t>(unit_)];
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

  // The pass's activate: accumulator rows to output tile j of the images' output rows.
  void QueueActivate(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows,
                     uint64_t acc, uint64_t slot) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const int64_t tiles = Tiles(op.output), pooled = op.window.pooled ? 4 : 1;
    const int64_t outs = count * rows / pooled, o0 = r0 / pooled;
    const View out = ViewOf(op.output);
    Act a;
    a.op = i;
    a.acc = acc;
    a.ub = static_cast<uint64_t>(out.At(i0, op.tile0 + j) + o0 * tiles);
    a.rows = static_cast<uint64_t>(count * rows);
    a.set = slot;
    a.stride = static_cast<uint64_t>(out.by_tile > 0 ? 1 : tiles);
    a.relu = op.relu;
    a.pool = op.pool;
    a.acc_rows = {AccBase() + static_cast<int64_t>(acc),
                  AccBase() + static_cast<int64_t>(acc) + count * rows};
    a.mxu = unit_;
    a.writes = {static_cast<int64_t>(a.ub),
                static_cast<int64_t>(a.ub) + (outs - 1) * static_cast<int64_t>(a.stride) + 1};
    if (op.residual >= 0) {
      isa::Residual r = op.residual_mul;
      r.ub = static_cast<uint64_t>(ViewOf(op.residual).Row(i0) + o0 * tiles + op.tile0 + j);
      a.residual = r;
      a.reads = {static_cast<int64_t>(r.ub), static_cast<int64_t>(r.ub) + (outs - 1) * tiles + 1};
    }
    pending_.push_back(a);
  }

  // ---- several matrix units (docs/compiler.md, "Several matrix units")

  // The matrix units op i's passes spread over: the u (up to the core's M) whose estimate
  // is least, the fewest of equals (graph_bound.h's terms for the core, the array term A
  // over M; docs/compiler.md, "Which operations, over how many units"). One unit: max(M x A,
  // weights, vector, host). u units: the reads of the first f tiles, which their FIFOs take
  // before the group's first matmuls (LaneTiles; the one-unit schedule reads them while the
  // operation before streams), then max(M / u x A, the other tiles' reads, vector, host);
  // the reads RunTiles at a time, the u units' side by side (SideBySide).
  int SpreadUnits(int i) const {
    const int m = c_.mxus_per_core;
    if (m == 1) return 1;
    const Bound& b = bounds_[static_cast<size_t>(i)];
    int best = 1;
    const double tiles = b.weights / (static_cast<double>(n_) * c_.CoreWeightRowCycles());
    const double fifo = c_.weight_fifo_tiles;
    const double run =  // a tile's share of a read
        static_cast<double>(ReadCycles(RunTiles())) / static_cast<double>(RunTiles());
    double least =  // one unit: its weight DMA reads every tile
        std::max({b.array * m, tiles * static_cast<double>(n_) * c_.WeightRowCycles(), b.vector,
                  b.host});
    for (int u = 2; u <= m; ++u) {
      const double fill = std::min(tiles, u * fifo);
      const double share =  // a tile's, where the u weight DMAs read side by side
          std::max(run, static_cast<double>(ChannelCycles(u))) / u;
      const double t =
          fill * share + std::max({b.array * m / u, (tiles - fill) * share, b.vector, b.host});
      if (t < least) best = u, least = t;
    }
    return best;
  }
  bool Spreads(int i) const { return SpreadUnits(i) > 1; }
  // Over how many units operation i, of fewer output tiles than it spreads over, shares
  // `rows` rows of a column (each unit its own images or rows, each reading every tile of
  // the column): the fewest that make a tile's time least. On u units that is u tile reads,
  // side by side on the units' weight DMAs (SideBySide), against a unit's rows through the
  // tile, at least N (a tile's shift hides behind N rows).
  int64_t RowUnits(int i, int64_t rows) const {
    const int64_t load = TileLoadCycles(), most = SpreadUnits(i);
    int64_t best = 1, least = INT64_MAX;
    for (int64_t u = 1; u <= most; ++u) {
      const int64_t t = std::max(SideBySide(u, load), std::max((rows + u - 1) / u, n_));
      if (t < least) best = u, least = t;
    }
    return best;
  }
  // The cycles a read of one weight tile keeps the weight DMA busy (docs/timing.md).
  int64_t TileLoadCycles() const { return ReadCycles(1); }
  // The cycles u units take to read a tile each, side by side on their own weight DMAs:
  // one read's (`per`), or the channel's for the u tiles where it binds.
  int64_t SideBySide(int64_t u, int64_t per) const { return std::max(per, ChannelCycles(u)); }
  // The cycles the weight memory's channel takes to move `tiles` tiles' bytes, which the
  // core's weight DMAs share (docs/timing.md, "Chips of several cores").
  int64_t ChannelCycles(int64_t tiles) const {
    const int64_t bytes = tiles * n_ * row_, bw = c_.weight_mem_bytes_per_cycle;
    return (bytes + bw - 1) / bw;
  }
  // The cycles a tile keeps the weight DMA busy where a spread unit reads two at a time
  // (RunTiles; PaceReads).
  int64_t TileReadCycles() const {
    const auto run = static_cast<int64_t>(RunTiles());
    return (ReadCycles(run) + run - 1) / run;
  }
  // ... and a read of `tiles` tiles (the memory's latency once).
  int64_t ReadCycles(int64_t tiles) const {
    return c_.weight_mem_latency_cycles +
           static_cast<int64_t>(std::ceil(static_cast<double>(tiles * n_) * c_.WeightRowCycles()));
  }

  // The current matrix unit: the one the next read_weights, matmul and activate name, whose
  // accumulator regions and tile Region and the passes use.
  void Unit(size_t u) {
    unit_ = static_cast<int>(u);
    p_.SetUnit(u);
  }

  // Op i's passes (passes_, column by column) over m = SpreadUnits(i) of the core's matrix
  // units, m at a time: an operation of at least m output tiles gives each unit a column of
  // its own (the units read the same rows, each only its own tiles); one of fewer gives each
  // unit its own images or rows (each reads the column's tiles).
  void Spread(int i) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const auto m = static_cast<size_t>(SpreadUnits(i));
    const auto nt = static_cast<size_t>(op.nt), per = passes_.size() / nt;
    std::vector<std::vector<PassSpec>> groups;
    if (nt >= m && LineUp(op)) {
      for (size_t j0 = 0; j0 < nt; j0 += m)
        for (size_t k = 0; k < per; ++k) {
          std::vector<PassSpec> g;
          for (size_t j = j0; j < std::min(nt, j0 + m); ++j) g.push_back(passes_[j * per + k]);
          Together(i, g, &groups);
        }
    } else {
      for (size_t k = 0; k < passes_.size(); k += m)
        Together(i,
                 {passes_.begin() + static_cast<std::ptrdiff_t>(k),
                  passes_.begin() + static_cast<std::ptrdiff_t>(std::min(passes_.size(), k + m))},
                 &groups);
    }
    for (size_t k = 0; k < groups.size(); ++k) {
      int& units = op_units_[static_cast<size_t>(i)];
      units = std::max(units, static_cast<int>(groups[k].size()));
      Lanes(i, groups[k], k + 1 < groups.size() ? &groups[k + 1] : nullptr);
    }
  }
  // Whether two output tiles' terms line up (as many, each of the same kind), so that the
  // units can stream them side by side, term by term.
  static bool Aligned(const std::vector<OpTerm>& a, const std::vector<OpTerm>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].window != b[k].window || a[k].input != b[k].input) return false;
    return true;
  }
  // Whether all of op's output tiles line up, so that its columns can go to the units side
  // by side; else each column's passes are spread.
  static bool LineUp(const GraphOp& op) {
    return std::all_of(op.terms.begin(), op.terms.end(),
                       [&](const std::vector<OpTerm>& t) { return Aligned(t, op.terms[0]); });
  }
  // Passes g as one group where their terms line up, else each alone.
  void Together(int i, const std::vector<PassSpec>& g, std::vector<std::vector<PassSpec>>* out) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const auto& t0 = op.terms[static_cast<size_t>(g[0].j)];
    for (const PassSpec& ps : g) {
      if (!Aligned(op.terms[static_cast<size_t>(ps.j)], t0)) {
        for (const PassSpec& one : g) out->push_back({one});
        return;
      }
    }
    out->push_back(g);
  }
  // The tiles pass `ps` switches in on a unit whose array holds tile `active`, in order.
  std::vector<int> Switches(const GraphOp& op, const PassSpec& ps, int active) const {
    std::vector<int> tiles;
    for (const OpTerm& t : op.terms[static_cast<size_t>(ps.j)]) {
      if (t.tile != active) tiles.push_back(t.tile);
      active = t.tile;
    }
    return tiles;
  }

  // Passes g at once, pass l on unit l: each unit its accumulator region and tiles, the
  // matmuls term by term in turn over the units (a matmul waits only for its own unit's
  // feeder, so the units stream side by side), each unit's tiles read up to the FIFO's depth
  // ahead of the matmul that switches them in (each read after the matmul that made its room,
  // so none waits for a matmul behind it; paced, PaceReads), the waiting activates once every
  // unit streams. `next`: the operation's next group, whose first tiles each unit reads as
  // this group's switches make room, or null.
  void Lanes(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const size_t lanes = g.size();
    std::vector<uint64_t> acc(lanes), slot(lanes);
    short_pass_ = false;
    auto sets = [&](const std::vector<PassSpec>& passes) {
      std::vector<int64_t> v;
      for (const PassSpec& ps : passes) v.push_back(op.first_param + ps.j);
      return v;
    };
    Preload(sets(g), i);
    for (size_t l = 0; l < lanes; ++l) {
      Unit(l);
      acc[l] = static_cast<uint64_t>(Region(Regions(op), g[l].count * g[l].rows, false));
      slot[l] = Slot(op.first_param + g[l].j, i);
    }
    LaneTiles(i, g, next, FirstTouch(i, g, acc));
    LaneReads& r = lane_reads_;
    const size_t terms = op.terms[static_cast<size_t>(g[0].j)].size();
    std::vector<bool> sw(lanes);
    std::vector<size_t> count(lanes, 1);
    const NextRead hand = next == nullptr ? HandsOn(i, g) : NextRead::kNot;
    std::vector<std::vector<int64_t>> runs(lanes);
    for (size_t l = 0; l < lanes; ++l)
      runs[l] =
          hand != NextRead::kNot ? Runs(g[l].count, g[l].rows, terms > 1) : std::vector{g[l].count};
    side_by_side_ = static_cast<int64_t>(lanes);
    for (size_t k = 0; k < terms; ++k) {
      const isa::Acc mode = k == 0 ? isa::Acc::kOverwrite : op.acc;
      // Matmul q of each unit's term k in turn.
      for (size_t q = 0; q < *std::max_element(count.begin(), count.end()); ++q) {
        for (size_t l = 0; l < lanes; ++l) {
          if (q > 0 && q >= count[l]) continue;
          Unit(l);
          const OpTerm& t = op.terms[static_cast<size_t>(g[l].j)][k];
          if (q == 0) {
            sw[l] = t.tile != active_[l];
            active_[l] = t.tile;
            if (sw[l]) {
              if (r.read[l] <= r.used[l]) ReadWaiting(l);  // its tile not read yet
              ++r.used[l];
            }
          }
          bool first = false;
          count[l] = Term(i, t, g[l], k + 1 == terms ? runs[l] : std::vector{g[l].count}, acc[l],
                          sw[l], mode, &first, k, nullptr, 0, q);
          // The passes before's activates once every unit streams, each once the matmuls
          // since the one before have streamed its rows (the vector unit takes one at a time,
          // and an activate emitted while it is busy holds back every matmul behind it).
          if ((k > 0 || q > 0 || l + 1 == lanes) && !pending_.empty() && vpu_since_ >= vpu_due_)
            Flush(1);
          const auto queued =
              static_cast<size_t>(std::count(r.waiting.begin(), r.waiting.end(), l));
          if (q == 0 && sw[l] && r.read[l] + queued < r.tiles[l].size()) r.waiting.push_back(l);
          r.clock += g[l].count * g[l].rows / static_cast<int64_t>(count[l] * lanes);
          PaceReads();
        }
      }
    }
    side_by_side_ = 1;
    while (!r.waiting.empty()) ReadWaiting(r.waiting.front());
    for (size_t l = 0; l < lanes; ++l) {  // the next group's first tiles not read yet
      while (r.read[l] < r.tiles[l].size()) ReadNext(l, Consecutive(l, r.tiles[l].size()));
      ahead_read_[l] = r.read[l] - r.own[l];
    }
    if (next != nullptr) Preload(sets(*next), i, slot);  // while the last matmuls stream
    if (hand == NextRead::kImageByImage)
      for (size_t l = 0; l < lanes; ++l) runs[l].assign(static_cast<size_t>(g[l].count), 1);
    LaneActivates(i, g, acc, slot, runs, hand != NextRead::kNot);
    Unit(0);
  }
  // How the operation after op i reads the output of its last pass, or group g of passes
  // (NextReads), where they can hand their images on (whole images, several, not stacked):
  // image by image or in place, their last term's matmuls then go in runs and their
  // activates one per image or run.
  NextRead HandsOn(int i, const std::vector<PassSpec>& g) const {
    if (g_.ops[static_cast<size_t>(i)].stacked) return NextRead::kNot;
    for (const PassSpec& ps : g)
      if (ps.r0 != 0 || ps.count < 2) return NextRead::kNot;
    return NextReads(i);
  }
  // The activates of group g: each unit's pass in one, or (`split`) one per image run of
  // `runs`, in the order of the images, so that the next operation starts on the first.
  void LaneActivates(int i, const std::vector<PassSpec>& g, const std::vector<uint64_t>& acc,
                     const std::vector<uint64_t>& slot,
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
      Unit(p.l);
      QueueActivate(i, ps.j, ps.i0 + p.m, p.c, ps.r0, ps.rows,
                    acc[p.l] + static_cast<uint64_t>(p.m * ps.rows), slot[p.l]);
      pending_.back().split = split;
    }
  }
  // How many of the waiting activates the first matmuls of group g (into accumulator rows
  // `acc` of each unit) touch, so that they go before them.
  size_t FirstTouch(int i, const std::vector<PassSpec>& g, const std::vector<uint64_t>& acc) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    probing_ = true;
    touched_ = 0;
    for (size_t l = 0; l < g.size(); ++l) {
      Unit(l);
      bool first = false;
      Term(i, op.terms[static_cast<size_t>(g[l].j)][0], g[l], {g[l].count}, acc[l], false,
           isa::Acc::kOverwrite, &first, 0, nullptr, 0, 0);
    }
    probing_ = false;
    return touched_;
  }
  // The tiles each unit of group g switches in (lane_reads_), and the first of them read,
  // up to the FIFO's depth each, in turn, RunTiles at a time where they follow each other in
  // weight memory (one read, the latency once); between them the first `before` waiting
  // activates (those the group's first matmuls touch): each after reads that take about as
  // long as the activate before it, so that the weight DMAs and the vector unit work side by
  // side.
  void LaneTiles(int i, const std::vector<PassSpec>& g, const std::vector<PassSpec>* next,
                 size_t before) {
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const size_t lanes = g.size();
    const auto fifo = static_cast<size_t>(c_.weight_fifo_tiles);
    LaneReads& r = lane_reads_;
    r = LaneReads{};
    r.tiles.resize(lanes);
    r.own.resize(lanes);
    r.read.resize(lanes);
    r.used.resize(lanes);
    r.free.assign(lanes, TileLoadCycles());
    r.op = i;
    for (size_t l = 0; l < lanes; ++l) {
      r.tiles[l] = Switches(op, g[l], active_[l]);
      r.own[l] = r.tiles[l].size();
      if (next != nullptr && l < next->size()) {
        const std::vector<int> then =
            Switches(op, (*next)[l], r.tiles[l].empty() ? active_[l] : r.tiles[l].back());
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
        const size_t n = Consecutive(l, std::min(RunTiles(), upto - r.read[l]));
        ReadNext(l, n);
        covered += ReadCycles(static_cast<int64_t>(n));
        if (before > 0 && covered >= static_cast<int64_t>(last)) {
          last = pending_.front().rows;
          Flush(1);
          --before;
          covered = 0;
        }
      }
  }
  // Unit l's next `n` tiles of lane_reads_ (one after another in weight memory), read now
  // in one read_weights.
  void ReadNext(size_t l, size_t n = 1) {
    LaneReads& r = lane_reads_;
    Unit(l);
    p_.ReadWeights(static_cast<uint64_t>(r.tiles[l][r.read[l]]) * static_cast<uint64_t>(n_ * row_),
                   n);
    r.read[l] += n;
    Rec(r.op);
  }
  // How many of unit l's next tiles, at most `most`, lie one after another in weight memory.
  size_t Consecutive(size_t l, size_t most) const {
    const LaneReads& r = lane_reads_;
    size_t n = 1;
    while (n < most && r.read[l] + n < r.tiles[l].size() &&
           r.tiles[l][r.read[l] + n] == r.tiles[l][r.read[l]] + static_cast<int>(n))
      ++n;
    return n;
  }
  // Unit l's read of as many of its waiting reads (each the room one switch made) as one
  // read_weights can take (Consecutive), which leave the queue.
  void ReadRun(size_t l, size_t most) {
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
    r.free[l] = r.clock + ReadCycles(static_cast<int64_t>(n));
    r.channel = r.clock + ChannelCycles(static_cast<int64_t>(n));
  }
  // Whether unit l's waiting reads go now: it has room for a run of kRunTiles (or its last
  // tiles), or at most one tile read ahead of its next switch.
  bool RunReady(size_t l) const {
    const LaneReads& r = lane_reads_;
    const auto queued = static_cast<size_t>(std::count(r.waiting.begin(), r.waiting.end(), l));
    const size_t run = std::min(RunTiles(), r.tiles[l].size() - r.read[l]);
    return queued >= run || r.read[l] <= r.used[l] + 1;
  }
  size_t RunTiles() const {
    return std::max<size_t>(1, std::min(kRunTiles, static_cast<size_t>(c_.weight_fifo_tiles) / 2));
  }
  // A unit's next tiles are read after the matmuls that made room for them, but not while
  // its weight DMA still reads: the chip issues in order, so a read_weights emitted while
  // its unit's DMA is busy holds back every matmul behind it. The reads wait in turn, and a
  // unit's goes once the units have streamed, since that unit's read before, as many rows as
  // that read takes cycles (each unit has its own DMA: docs/timing.md), and the weight
  // memory's channel has moved the bytes of the read before (ChannelCycles). A unit's reads go
  // kRunTiles at a time where its tiles follow each other in weight memory (one read pays
  // the memory's latency once), as long as it keeps more than one tile ahead of its switches.
  void PaceReads() {
    LaneReads& r = lane_reads_;
    for (auto it = r.waiting.begin(); it != r.waiting.end();) {
      if (r.clock >= r.free[*it] && r.clock >= r.channel && RunReady(*it)) {
        ReadRun(*it, RunTiles());
        it = r.waiting.begin();
      } else {
        ++it;
      }
    }
  }
  // Unit l's waiting reads, all now (before a switch whose tile is not read yet).
  void ReadWaiting(size_t l) {
    LaneReads& r = lane_reads_;
    while (std::find(r.waiting.begin(), r.waiting.end(), l) != r.waiting.end())
      ReadRun(l, SIZE_MAX);
  }

  // ---- one operation in bands of output rows, every tensor staged through the buffer

  bool Windowed(const GraphOp& op) const {
    return op.kind == OpKind::kConv || op.kind == OpKind::kMaxPool;
  }

  void Banded(int s) {
    const PlanSegment& seg = plan_.segments[static_cast<size_t>(s)];
    const int i = seg.first;
    const GraphOp& op = g_.ops[static_cast<size_t>(i)];
    const GraphTensor& out = T(op.output);
    const int64_t k = op.window.pooled ? 2 : 1;  // window rows (and columns) per output row
    int buffer = 0;
    for (int64_t im = 0; im < b_; ++im) {
      for (int64_t y0 = 0; y0 < out.h; y0 += seg.band, buffer ^= 1) {
        const int64_t y1 = std::min(out.h, y0 + seg.band);
        views_.clear();
        isa::WindowGeometry w = op.window;
        int64_t first = 0;  // the band's first window pixel in the staged map's walk
        for (const Staging& st : plan_.staging[static_cast<size_t>(s)]) {
          const GraphTensor& t = T(st.tensor);
          views_[st.tensor] = {st.ub[buffer], im, 0, 0, 0};
          if (st.tensor == op.output) continue;
          int64_t row0 = y0 * t.w * Tiles(st.tensor), rows = (y1 - y0) * t.w * Tiles(st.tensor);
          if (st.tensor == op.inputs[0] && Windowed(op)) {
            const int64_t sy = static_cast<int64_t>(op.window.stride_y);
            const int64_t pt = static_cast<int64_t>(op.window.pad_top);
            const int64_t kh = static_cast<int64_t>(op.window.kh);
            if (t.packed) {  // the model's packed input: the whole map (planned so)
              row0 = 0;
              rows = t.rows;
              w.in_h = static_cast<uint64_t>(t.h);
              first = y0 * out.w * k * k;
            } else {  // the lines the band's windows read, with the padding above them
              const int64_t l0 = std::max<int64_t>(0, k * y0 * sy - pt);
              const int64_t l1 = std::min<int64_t>(t.h, (k * y1 - 1) * sy - pt + kh);
              row0 = l0 * t.w * Tiles(st.tensor);
              rows = (l1 - l0) * t.w * Tiles(st.tensor);
              w.in_h = static_cast<uint64_t>(l1 - l0);
              w.pad_top = static_cast<uint64_t>(std::max<int64_t>(0, pt - k * y0 * sy));
              w.out_h = static_cast<uint64_t>(k * (y1 - y0));
            }
            w.in_w = static_cast<uint64_t>(t.w);
          }
          ReadHost(HostRow(st.tensor, im) + static_cast<uint64_t>(row0 * row_), st.ub[buffer], rows,
                   i);
        }
        const int64_t rows = (y1 - y0) * out.w * k * k;
        const int64_t most = Most(op);
        const int64_t pieces = (rows + most - 1) / most;
        int64_t chunk = (rows + pieces - 1) / pieces;
        if (op.window.pooled) chunk = (chunk + 3) / 4 * 4;
        for (int64_t j = 0; j < op.nt; ++j)
          for (int64_t r0 = 0; r0 < rows; r0 += chunk)
            Pass(i, j, im, 1, r0, std::min(chunk, rows - r0), r0 + chunk >= rows,
                 Windowed(op) ? &w : nullptr, first);
        const int64_t out_rows = (y1 - y0) * out.w * Tiles(op.output);
        WriteHost(
            views_[op.output].ub,
            HostRow(op.output, im) + static_cast<uint64_t>(y0 * out.w * Tiles(op.output) * row_),
            out_rows, i);
      }
    }
  }

  const LoweredGraph& g_;
  const Plan& plan_;
  const config::TpuConfig& c_;
  const int64_t n_;
  const int64_t row_, set_bytes_;  // a row's bytes (N, or 2N in bf16), a parameter set's
  const int64_t b_, half_;
  isa::ProgramBuilder p_;
  std::vector<int32_t> op_of_;
  std::vector<int> op_units_ = std::vector<int>(g_.ops.size(), 1);  // EmittedProgram::op_units
  std::vector<Act> pending_;
  struct Transfer {
    uint64_t host = 0;
    int64_t ub = 0, rows = 0;
    int op = -1;
  };
  std::vector<Transfer> background_;  // host reads for the next group, not yet emitted
  std::deque<Transfer> arriving_;     // the first group's input pieces, not yet emitted
  int64_t arrived_ = -1;  // the first row of the last piece emitted, until a matmul reads it
  const double host_row_cycles_;         // a host row's cycles for this core (Background)
  int64_t side_by_side_ = 1;             // units streaming at once (Lanes)
  int64_t after_acts_ = 0;               // rows the matmuls emitted after the last activate stream
  int64_t vpu_due_ = 0, vpu_since_ = 0;  // rows of the activates emitted last; rows streamed since
  int64_t streamed_ = 0, due_ = 0;       // rows streamed since the last of them; its cycles
  std::map<int, View> views_;            // staged tensors of the current group or band
  int64_t group0_ = 0;                   // the current group's first image
  int64_t sent_ = 0;                     // the output's tiles sent for the group (SendTiles)
  // Output tiles [sent_, upto) of op's images [g0, g0 + count) whose passes are emitted, sent
  // after a later matmul once their activates are done (SendDone).
  struct Unsent {
    int op = -1;
    int64_t g0 = 0, count = 0, upto = 0;
  };
  std::optional<Unsent> unsent_;
  // Per matrix unit (unit_ the current one; docs/compiler.md, "Several matrix units"): the
  // next pass's region in turn, the accumulator rows of its last two passes, the weight
  // tile in its array.
  int unit_ = 0;
  std::array<int64_t, engine::kMaxMxus> seq_ = {};
  std::array<std::vector<Range>, engine::kMaxMxus> recent_;
  std::array<int, engine::kMaxMxus> active_ = [] {
    std::array<int, engine::kMaxMxus> a;
    a.fill(-1);
    return a;
  }();
  std::vector<int> ahead_, prefetched_;            // tiles to read ahead; the tiles read ahead
  size_t ahead_after_ = 0;                         // the term whose first matmul they follow
  std::pair<int, int64_t> prefetched_for_{-1, 0};  // the operation and column that take them
  std::pair<int, int64_t> next_pass_{-1, 0};       // the operation and column after this one
  bool short_pass_ = false;                        // the current pass is short (ShortPass)
  bool probing_ = false;  // Matmul only finds the waiting activates it touches (FirstTouch)
  size_t touched_ = 0;    // how many (FirstTouch)
  bool collect_ = false;  // Pass records its pass in passes_ instead (Op, Spread)
  // The tiles of the group Lanes emits, per unit: this group's `own`, then the next group's
  // first, up to the FIFO's depth (read ahead as this group's switches make room); how many
  // are read (some ahead, by the group before) and how many switched in; the reads waiting
  // (PaceReads, each the room one switch made), the rows the units streamed (a clock) and
  // when each unit's weight DMA is free of its last read.
  struct LaneReads {
    std::vector<std::vector<int>> tiles;
    std::vector<size_t> own, read, used;
    std::deque<size_t> waiting;
    int64_t clock = 0, channel = 0;  // ... and when the channel is free of the last read
    std::vector<int64_t> free;
    int op = -1;
  } lane_reads_;
  std::array<size_t, engine::kMaxMxus> ahead_read_ =
      {};                                      // per unit, the next group's tiles read (Lanes)
  const std::vector<Bound> bounds_;            // each operation's, on a core of several units
  const CoreShare* share_ = nullptr;           // model parallel: this core's part
  int64_t exchanges_ = 0;                      // maps exchanged so far
  std::vector<PassSpec> passes_;               // an operation's passes, column by column
  int seg_end_ = 0;                            // the current segment's end (operations)
  std::optional<isa::WindowGeometry> window_;  // the window set last
  bool all_params_ = true;
  std::map<int64_t, int64_t> slot_of_, set_in_;  // parameter set <-> slot (when streamed)
  int64_t next_slot_ = 0;
};

}  // namespace

EmittedProgram EmitGraph(const LoweredGraph& graph, const Plan& plan,
                         const config::TpuConfig& config, int batch, int sharers,
                         const CoreShare* share) {
  return Emitter(graph, plan, config, batch, sharers, share).Run();
}

}  // namespace tpu::compiler
