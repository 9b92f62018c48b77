// The shapes of the emitter's passes and matmuls, read off the network and the chip
// (graph_emitter.h): how many accumulator regions an operation's passes take and how many
// rows each, the window a matmul walks, which images stream at once, and how the next
// operation reads an operation's output.
#pragma once

#include <cstdint>
#include <vector>

#include "host/compiler/emit/emit_state.h"

namespace tpu::compiler::emit {

// How the operation after op i in its segment reads op i's output with its first term:
// through window matmuls of one image each (then op i's last pass activates image by
// image, and each of those matmuls waits only for its own image's rows), in place (then op
// i's last pass hands its images on in runs, Runs, each activated on its own), or not.
enum class NextRead { kNot, kImageByImage, kInPlace };

class PassShapes {
 public:
  explicit PassShapes(const EmitState& s) : s_(s) {}

  // Passes are sized so that the accumulators hold the rows of two (one fills while the VPU
  // empties the other), or of three for an operation whose passes each stream one tile: a
  // pass then need not wait for the activate two passes back to finish reading, which ends 2N
  // cycles after the rows it reads arrived (more passes cost nothing there: the tile stays in
  // the array). Region() places them so that this holds across operations too.
  int Regions(const GraphOp& op) const;
  // A pass of fewer rows than the 2N cycles a matmul's rows take to drain, all through one
  // tile: its matmuls stream back to back and each extends the draining footprint (timing.md),
  // so an activate placed after its first matmul would wait for the whole pass, holding back
  // the matmuls behind it. The pass before's activates stay waiting instead (Matmul), until
  // an instruction touches their rows or a longer pass begins. (resnet50's global average
  // pooling: eight passes of one output tile, 49 matmuls of 8 rows each, waited 512 cycles
  // each: 8,559 cycles, 2.73 x its bound.) A pass that switches tiles leaves the activate
  // the gaps of its tile loads: with those too, edge-32 took 0.1-0.4 % more at batch 1.
  bool ShortPass(const GraphOp& op, int64_t rows) const;
  // The images of each matmul of the last in-place term of a pass that hands its images on:
  // runs of at least 2N rows, a shorter rest joined to the run before, and where a term of
  // the pass went before (`alone`), the first image alone before them (its activate then
  // runs while the rest stream). A matmul whose last row enters while the one before still
  // drains extends that one's draining footprint (timing.md), so the activate of the one
  // before would wait for both: a lone image right after the pass before's last matmul would
  // hold back that pass's activate. One run where no second reaches 2N.
  std::vector<int64_t> Runs(int64_t count, int64_t rows, bool alone) const;
  // The rows of one pass.
  int64_t Most(const GraphOp& op) const;
  // The window of op over map view v (its lines), for images stacked or one at a time.
  isa::WindowGeometry Window(const GraphOp& op, const View& v, int64_t stack, int64_t pad_top,
                             int64_t out_h) const;
  // The images one window matmul of op streams at once: all of a pass's, stacked (a stacked
  // or tall op, while the tall map fits the window registers), else one.
  int64_t Stack(const GraphOp& op, int64_t count) const;
  // Window w of op cut to the lines its output pixels up to `last` read: the same values
  // (the lines below it are never read), a footprint that ends where those lines do.
  isa::WindowGeometry CutWindow(const isa::WindowGeometry& w, int64_t last) const;
  // Whether op reads its first input through the window (a convolution or a max pooling).
  bool Windowed(const GraphOp& op) const;
  // How the operation after op i reads the output of its last pass, or group g of passes
  // (NextReads), where they can hand their images on (whole images, several, not stacked):
  // image by image or in place, their last term's matmuls then go in runs and their
  // activates one per image or run.
  NextRead HandsOn(int i, const std::vector<PassSpec>& g) const;
  // Whether two output tiles' terms line up (as many, each of the same kind), so that the
  // units can stream them side by side, term by term.
  static bool Aligned(const std::vector<OpTerm>& a, const std::vector<OpTerm>& b);
  // Whether all of op's output tiles line up, so that its columns can go to the units side
  // by side; else each column's passes are spread.
  static bool LineUp(const GraphOp& op);
  // The tiles pass `ps` switches in on a unit whose array holds tile `active`, in order.
  std::vector<int> Switches(const GraphOp& op, const PassSpec& ps, int active) const;

 private:
  // How the operation after op i in its segment reads op i's output (NextRead).
  NextRead NextReads(int i) const;

  const EmitState& s_;
};

}  // namespace tpu::compiler::emit
