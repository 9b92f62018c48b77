// The program's host transfers (graph_emitter.h): reads and writes in pieces of at most
// kMaxRows rows; the next group's inputs read between the current group's matmuls, paced at
// the host link's rate; the first group's input in pieces; the model's output tile by tile;
// and model parallel's exchanges of maps through host memory.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "host/compiler/emit/activates.h"
#include "host/compiler/emit/emit_state.h"
#include "host/compiler/emit/param_sets.h"
#include "host/compiler/emit/pass_shapes.h"
#include "host/compiler/emit/unit_costs.h"

namespace tpu::compiler::emit {

class HostTransfers {
 public:
  HostTransfers(EmitState& s, const PassShapes& shapes, const UnitCosts& costs, Activates& acts,
                ParamSets& params, double host_row_cycles)
      : s_(s),
        shapes_(shapes),
        costs_(costs),
        acts_(acts),
        params_(params),
        host_row_cycles_(host_row_cycles) {}

  // Host rows to the unified buffer, and back, in transfers of at most kMaxRows rows, each
  // after the waiting activates whose rows it touches.
  void ReadHost(uint64_t host, int64_t ub, int64_t rows, int op);
  void WriteHost(int64_t ub, uint64_t host, int64_t rows, int op);
  // Model parallel: the core's tiles of operation i's output map, pixel by pixel, to the next
  // exchange area; a barrier of every core (their writes are posted, so they have landed
  // once each core's DMA is idle); then the whole map back, the core's own tiles included
  // (the same values), as one transfer. Two areas in turn: a core writes an area again only
  // after the barrier of the exchange between, which every core passes with its reads of
  // the area done.
  void Exchange(int i, int64_t g0, int64_t count);
  // Tiles [sent_, upto) of the model's output for images [g0, g0 + count), laid out tile by
  // tile (View::by_tile): in host memory, tile t of image i is row t x B + i. One transfer
  // where the tiles follow each other in both (a group of the whole batch, its area's size).
  void SendTiles(int i, int64_t g0, int64_t count, int64_t upto);
  // The output's tiles whose passes are done (unsent_), sent where the transfer would hold
  // back nothing behind it: their activates emitted and, by the rows the matmuls emitted
  // after them stream, done (the transfer waits for them, and the chip issues in order), and
  // no other host transfer under way or due.
  void SendDone();
  // The first group's staged input, which no group's matmuls hide: in pieces (arriving_)
  // where the segment's first operation reads it through a window, so that its first
  // matmuls start once the lines they read are in (docs/compiler.md, "The first input in
  // pieces"); the rest whole.
  void StageFirst(int s);
  // Emits, before a matmul that reads unified-buffer rows below `hi`, the pieces of
  // arriving_ those rows lie in, and where the last piece emitted is one of them, the next
  // piece too: its read_host issues once the DMA has brought the piece the matmul waits for
  // anyway, and it streams while the matmuls on the pieces before run (the chip issues in
  // order, so a read_host emitted while the DMA is busy holds back every instruction behind
  // it: one piece ahead, and only of a matmul that waits for the one before).
  void Arrive(int64_t hi);
  // Whether pieces are still to be emitted, or the last one emitted still streams in ahead
  // of the matmuls that read it (no other transfer goes before they do).
  bool Arriving() const;
  // The next piece of the first input, read now.
  void ArriveNext();
  // The next `rows` rows (at most) of the waiting transfers. The host DMA takes one transfer
  // at a time, and the chip issues in order: a read_host emitted while the DMA is busy holds
  // back every instruction after it. So a group's transfers for the next group go between
  // its matmuls, each once the matmuls emitted since the one before have streamed as many
  // rows as that one takes cycles (its latency and rows at this core's part of the link: on a
  // chip whose cores run their shares at once, the link's rows a cycle divided among them;
  // a transfer paced at the whole link would still be running when the next is emitted, and
  // hold back the matmuls behind it. A stalled matmul only takes longer).
  void Background(int64_t rows);
  // The inputs of segment s's group from image g0, into staging buffer `buffer`: read
  // between the current group's matmuls (Background).
  void StageNext(int s, int64_t g0, int buffer);
  // A new group: none of its output's tiles sent yet.
  void NewGroup() { sent_ = 0; }
  // The first input's pieces not emitted yet, now (what the first operation left).
  void PiecesDone();
  // The next group's inputs not read yet, now.
  void DrainBackground();
  // Output tiles up to `upto` of op's images [g0, g0 + count), whose passes are emitted, to
  // be sent once their activates are done (SendDone).
  void HoldOutput(int op, int64_t g0, int64_t count, int64_t upto) {
    unsent_ = Unsent{op, g0, count, upto};
  }
  // Rows a matmul streams, which pace the next group's reads (Background).
  void Streamed(int64_t rows) { streamed_ += rows; }
  // Whether the next of the next group's reads is due: a read waits, the first input's
  // pieces are in, and the matmuls since the last read have streamed its cycles.
  bool BackgroundDue() const { return !background_.empty() && !Arriving() && streamed_ >= due_; }

 private:
  // The pieces of each image of tensor t that op i's first matmuls read: where a window
  // over its lines can be cut to the lines a matmul reads (CutWindow), about sqrt(C / L),
  // C the cycles the op's matmuls take per image and column, L the host link's latency,
  // which a piece pays: the last lands about k x L later than one transfer would, and the
  // matmuls on it take C / k after it (docs/compiler.md).
  int64_t Pieces(int i, int t, int64_t count) const;

  EmitState& s_;
  const PassShapes& shapes_;
  const UnitCosts& costs_;
  Activates& acts_;
  ParamSets& params_;
  struct Transfer {
    uint64_t host = 0;
    int64_t ub = 0, rows = 0;
    int op = -1;
  };
  std::vector<Transfer> background_;  // host reads for the next group, not yet emitted
  std::deque<Transfer> arriving_;     // the first group's input pieces, not yet emitted
  int64_t arrived_ = -1;  // the first row of the last piece emitted, until a matmul reads it
  const double host_row_cycles_;    // a host row's cycles for this core (Background)
  int64_t streamed_ = 0, due_ = 0;  // rows streamed since the last of them; its cycles
  int64_t sent_ = 0;                // the output's tiles sent for the group (SendTiles)
  // Output tiles [sent_, upto) of op's images [g0, g0 + count) whose passes are emitted, sent
  // after a later matmul once their activates are done (SendDone).
  struct Unsent {
    int op = -1;
    int64_t g0 = 0, count = 0, upto = 0;
  };
  std::optional<Unsent> unsent_;
  int64_t exchanges_ = 0;  // maps exchanged so far
};

}  // namespace tpu::compiler::emit
