// Where each pass's accumulator rows go (graph_emitter.h): regions in turn on each matrix
// unit, clear of the rows whose activates may still wait or run.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "host/compiler/emit/emit_state.h"

namespace tpu::compiler::emit {

class AccRegions {
 public:
  explicit AccRegions(const EmitState& s) : s_(s) {}

  // Where a pass of `rows` rows starts: the next region in turn that overlaps none of the
  // last regions - 1 passes (whose activates may still wait or run), else the next that
  // overlaps not the last pass, else the next in turn. (Regions in turn alone put the first
  // pass of an operation of three regions on the rows of the last activate of one of two:
  // resnet18's downsample waited 1,571 cycles for it. Where the two passes before fill both
  // halves, as mobilenet_v2's depthwise and projection convolutions do, the last one's rows
  // are the ones whose activates still wait.) A short pass (ShortPass) goes right after the
  // last pass's rows instead, or from row 0 where they do not fit, when that is clear of the
  // last two passes: its activate waits, so the short passes after it must not take its rows.
  int64_t Region(int regions, int64_t rows, bool short_pass);

 private:
  // Records r as the current unit's latest pass's rows; returns where they start.
  int64_t Take(const Range& r);

  const EmitState& s_;
  // Per matrix unit: the next pass's region in turn, the accumulator rows of its last two
  // passes.
  std::array<int64_t, engine::kMaxMxus> seq_ = {};
  std::array<std::vector<Range>, engine::kMaxMxus> recent_;
};

}  // namespace tpu::compiler::emit
