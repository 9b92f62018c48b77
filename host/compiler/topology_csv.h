// Topology files: a network as a list of layer shapes, in SCALE-Sim's topology CSV format
// (the common currency of accelerator papers). The reader on its own, so that the fuzzers
// link it without the chip (host/run/topology.h runs the layers).
//
//   Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter,
//   Strides, conv1, 224, 224, 3, 3, 3, 32, 1,
//
// or SCALE-Sim v2's list of GEMMs, C (M x N) = A (M x K) x B (K x N), one per row:
//
//   Layer name, M, N, K,
//   fc1, 200, 2000, 1000,
//
// Each convolution is lowered as SCALE-Sim lowers it: im2col without padding (padding is folded
// into the IFMAP size, as the published topology files do), output size
// ceil((H - F + S) / S), so a layer is the GEMM M = out_h x out_w, K = Fh x Fw x C,
// N = filters. A dense layer is a 1 x 1 IFMAP with a 1 x 1 filter and C inputs; a GEMM row
// is such a layer (K inputs, N filters) on a batch of M (its `batch`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/gemm/gemm_plan.h"

namespace tpu::compiler {

struct TopologyLayer {
  std::string name;
  int64_t ifmap_h = 0, ifmap_w = 0, filter_h = 0, filter_w = 0, channels = 0, filters = 0,
          stride = 1;
  int64_t batch = 0;  // a GEMM row's M: the layer's own batch (0: the run's)
  int64_t OfmapH() const { return (ifmap_h - filter_h + stride + stride - 1) / stride; }
  int64_t OfmapW() const { return (ifmap_w - filter_w + stride + stride - 1) / stride; }
  // A dense layer: one input vector of `channels`, one output of `filters`.
  bool IsDense() const { return ifmap_h == 1 && ifmap_w == 1 && filter_h == 1 && filter_w == 1; }
  gemm::GemmShape Gemm() const {
    return {OfmapH() * OfmapW(), filter_h * filter_w * channels, filters};
  }
};

// Throws UsageError naming the file, the line and the column for a missing file, a header
// that is neither of SCALE-Sim's, a row with a missing field, a field that is not a positive
// integer, or a filter larger than its IFMAP.
std::vector<TopologyLayer> ReadTopologyCsv(const std::string& path);

}  // namespace tpu::compiler
