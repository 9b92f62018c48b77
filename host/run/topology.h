// Running a topology file's layers on the chip (the file: host/compiler/topology_csv.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "host/compiler/topology_csv.h"
#include "host/engine/chip_engine.h"
#include "host/run/tpu_runner.h"

namespace tpu::run {

// Runs every layer on the chip with random data (seeded) of the chip's type: int8 weights
// and inputs, or on a bf16 chip float weights and normal inputs rounded to bfloat16 (the
// chip runs a model's fp32 weights, docs/bf16.md), checked against nn::Bf16Net. A layer
// runs as a convolution whose windows the chip forms from its input map (a one-layer
// NetworkCompiler program: the map moves in once, packed) where it fits the chip; otherwise,
// or with `host_im2col`, as GEMM programs of its im2col rows (compiler/gemm_program.h)
// split into pieces that fit the chip: rows of the output in chunks that fit the
// accumulators (two buffers) and the unified buffer, output columns in groups of at most
// param_sets tiles. When the engine computes values, every output is checked against the
// CPU reference (TpuRunResult::mismatches counts layers that differ). Throws UsageError
// when a layer cannot fit even one row of one piece, naming the field.
//
// On a chip of several cores a layer's batch is shared out over them (data parallel), or
// where it has fewer maps than the chip has cores, its output-column tiles are (model
// parallel: each core its channels of every map; the row's name says so).
//
// `batch` maps stream through every weight tile of a layer; a GEMM row's layer takes its M
// as its batch (UsageError when `batch` is not 1 then), and the list runs once: the result's
// `images` is 1. A GEMM list that chains (one M, each row's K the previous row's N) is one
// network: with `maps_on_chip` it runs as a whole-network program of dense layers (ReLU
// between them), its input and output crossing the host link, its activations kept in the
// unified buffer, as the application runs. With `maps_on_chip`, a layer
// run with windows starts with its input maps in the unified buffer and leaves its outputs
// there, as inside a whole network: programs outside the layer's (not counted) move them in
// and out; where they do not fit, or with im2col, they cross the host link in the layer's
// program, as `maps_on_chip = false` does for every layer.
struct TopologyRunOptions {
  bool host_im2col = false;
  int batch = 1;
  bool maps_on_chip = true;
};

TpuRunResult RunTopologyOnTpu(const std::vector<compiler::TopologyLayer>& layers,
                              engine::ChipEngine& engine, uint64_t seed,
                              const std::function<void(double)>& progress,
                              const TopologyRunOptions& options);

}  // namespace tpu::run
