// One matrix unit's passes (graph_emitter.h): an operation's passes, each output tile's terms
// as matmuls into an accumulator region, its tiles read from weight memory (the next pass's
// read ahead while this one streams), and its activate queued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "host/compiler/emit/acc_regions.h"
#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"
#include "host/compiler/emit/host_transfers.h"
#include "host/compiler/emit/param_sets.h"
#include "host/compiler/emit/pass_shapes.h"
#include "host/compiler/emit/unit_costs.h"

namespace tpu::compiler::emit {

class PassEmitter {
 public:
  PassEmitter(EmitState& s, const PassShapes& shapes, const UnitCosts& costs, Activates& acts,
              ParamSets& params, HostTransfers& host, AccRegions& regions)
      : s_(s),
        shapes_(shapes),
        costs_(costs),
        acts_(acts),
        params_(params),
        host_(host),
        regions_(regions) {}

  // Op i's passes for images [g0, g0 + count): whole images where a pass holds them, one row
  // per image for a stacked op, else chunks of an image's rows.
  void OpPasses(int i, int64_t g0, int64_t count);
  // One pass: output tile j of images [i0, i0 + count), accumulator rows [r0, r0 + rows) of
  // each (window pixels, or pixels), through every term of tile j. `band` gives the window
  // of a band (its lines, top padding, output rows) when the op runs in bands, and `first`
  // where the band's first window pixel is in that window's walk.
  void Pass(int i, int64_t j, int64_t i0, int64_t count, int64_t r0, int64_t rows, bool last,
            const isa::WindowGeometry* band = nullptr, int64_t first_pixel = 0);
  // The matmuls of term t (the k-th of its pass `ps`) into accumulator rows from `acc`: in
  // place, one per run of images (`runs`); through the window, one per image (all of a
  // stacked or tall pass's at once), of `band` where the op runs in bands. Only the
  // `only`-th of them where given (Lanes); returns how many there are.
  size_t Term(int i, const OpTerm& t, const PassSpec& ps, const std::vector<int64_t>& runs,
              uint64_t acc, bool sw, isa::Acc mode, bool* first, size_t k,
              const isa::WindowGeometry* band = nullptr, int64_t first_pixel = 0,
              size_t only = kAll);
  // How many of the waiting activates the first matmuls of group g (into accumulator rows
  // `acc` of each unit) touch, so that they go before them.
  size_t FirstTouch(int i, const std::vector<PassSpec>& g, const std::vector<uint64_t>& acc);
  // Op i's passes for images [g0, g0 + count), column by column, not emitted (UnitSpread
  // spreads them over the units).
  std::vector<PassSpec> Collect(int i, int64_t g0, int64_t count);
  // The matrix units that stream at once from now on (UnitSpread::Lanes; 1: one), whose
  // passes are not short.
  void SideBySide(int64_t units) {
    side_by_side_ = units;
    short_pass_ = false;
  }

 private:
  // The tiles of the next pass's column (column j + 1, or the first column of the next
  // operation of the group's segment), read while the last pass of column j streams: right
  // after the matmul that switches in this pass's last tile (the FIFO then holds none of this
  // pass's tiles and the weight DMA has brought them all, so the read neither waits for room
  // nor holds back the matmuls behind it; otherwise it would go before the next pass, after
  // column j's last matmul issued). A column of one tile keeps it in the array for its later
  // passes, so its first pass reads ahead. Only when they are one run in weight memory that
  // fits the FIFO, and when this pass switches a tile in at all. Sets next_pass_.
  std::vector<int> NextTiles(int i, int64_t j, const std::vector<OpTerm>& terms, bool last);
  // The term whose first matmul switches in this pass's last tile (the read-ahead follows it).
  static size_t LastSwitch(const std::vector<OpTerm>& terms, int active);
  // The matmuls of in-place term t (tile column t.ktile of rows `step` apart, from `src` on)
  // into accumulator rows from `acc`: one per run of images of `rows` rows each.
  // Only the `only`-th of them, where given.
  void InPlace(int i, const OpTerm& t, int64_t step, int64_t src, int64_t rows,
               const std::vector<int64_t>& runs, uint64_t acc, bool sw, isa::Acc mode, bool* first,
               size_t k, size_t only);
  // A matmul (emitted by `emit`) reading unified-buffer rows [src, src + span) into
  // accumulator rows [acc, acc + rows); the waiting activates go after the pass's first
  // (not in a short pass), except an operation's last pass's activates of one image or run
  // each, which go one per matmul.
  void Matmul(int op, int64_t src, int64_t span, const std::function<void()>& emit, uint64_t acc,
              int64_t rows, bool* first, size_t term);
  // Sets the window registers to w, unless they hold it.
  void SetWindow(const isa::WindowGeometry& w, int op);
  // Where the pass reads its tiles: for each term, the tiles one read_weights brings from
  // there (0: none starts there). A term whose tile is the one before it switches nothing and
  // reads nothing; the others' tiles are read in runs that lie one after another in weight
  // memory. Each read goes right before the matmuls that take its tiles, so that a read
  // waiting for FIFO room never stands in front of the matmuls that would make it.
  std::vector<int64_t> TileReads(const std::vector<OpTerm>& terms, bool takes) const;

  EmitState& s_;
  const PassShapes& shapes_;
  const UnitCosts& costs_;
  Activates& acts_;
  ParamSets& params_;
  HostTransfers& host_;
  AccRegions& regions_;
  int64_t side_by_side_ = 1;                       // units streaming at once (Lanes)
  std::vector<int> ahead_, prefetched_;            // tiles to read ahead; the tiles read ahead
  size_t ahead_after_ = 0;                         // the term whose first matmul they follow
  std::pair<int, int64_t> prefetched_for_{-1, 0};  // the operation and column that take them
  std::pair<int, int64_t> next_pass_{-1, 0};       // the operation and column after this one
  bool short_pass_ = false;                        // the current pass is short (ShortPass)
  bool probing_ = false;          // Matmul only finds the waiting activates it touches (FirstTouch)
  size_t touched_ = 0;            // how many (FirstTouch)
  bool collect_ = false;          // Pass records its pass in passes_ instead (Collect)
  std::vector<PassSpec> passes_;  // an operation's passes, column by column (Collect)
};

}  // namespace tpu::compiler::emit
