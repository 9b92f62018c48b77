// Topology files: a network as a list of layer shapes, in SCALE-Sim's topology CSV format
// (the common currency of accelerator papers), and running them on the chip.
//
//   Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter,
//   Strides, conv1, 224, 224, 3, 3, 3, 32, 1,
//
// Each layer is lowered as SCALE-Sim lowers it: im2col without padding (padding is folded
// into the IFMAP size, as the published topology files do), output size
// ceil((H - F + S) / S), so a layer is the GEMM M = out_h x out_w, K = Fh x Fw x C,
// N = filters. A dense layer is a 1 x 1 IFMAP with a 1 x 1 filter and C inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/compiler/tpu_runner.h"
#include "host/engine/chip_engine.h"
#include "host/gemm/gemm_plan.h"

namespace tpu::compiler {

struct TopologyLayer {
  std::string name;
  int64_t ifmap_h = 0, ifmap_w = 0, filter_h = 0, filter_w = 0, channels = 0, filters = 0,
          stride = 1;
  int64_t OfmapH() const { return (ifmap_h - filter_h + stride + stride - 1) / stride; }
  int64_t OfmapW() const { return (ifmap_w - filter_w + stride + stride - 1) / stride; }
  gemm::GemmShape Gemm() const {
    return {OfmapH() * OfmapW(), filter_h * filter_w * channels, filters};
  }
};

// Throws UsageError naming the file, the line and the column for a missing file, a header
// that is not SCALE-Sim's, a row with a missing field, a field that is not a positive
// integer, or a filter larger than its IFMAP.
std::vector<TopologyLayer> ReadTopologyCsv(const std::string& path);

// Runs every layer on the chip with random int8 data (seeded), as GEMM programs
// (compiler/gemm_program.h) split into pieces that fit the chip: rows of the output in
// chunks that fit the accumulators (two buffers) and the unified buffer, output columns
// in groups of at most param_sets tiles. When the engine computes values, every output is
// checked against the CPU reference (TpuRunResult::mismatches counts layers that differ).
// Throws UsageError when a layer cannot fit even one row of one piece, naming the field.
TpuRunResult RunTopologyOnTpu(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                              uint64_t seed, const std::function<void(double)>& progress);

}  // namespace tpu::compiler
