// Runs a quantized model on the simulated TPU, layer job by layer job, batch by batch
// (host/compiler/layer_compiler.h), and checks every image against the CPU int8 reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/nn/model.h"

namespace tpu::compiler {

struct LayerStats {
  std::string name;
  int64_t macs = 0;  // useful MACs (the layer's arithmetic, no padding)
  int64_t jobs = 0;
  hw::ChipCounters counters;  // summed over the batches
};

struct TpuRunResult {
  int64_t images = 0;
  std::vector<std::vector<int8_t>> logits;  // per image, the last layer's int8 outputs
  std::vector<LayerStats> layers;           // one entry for a whole-network program
  std::string plan;        // "whole network, one program per batch: ...", or "layer jobs (why)"
  bool checked = true;     // false in timing-only runs: no values to check
  int64_t mismatches = 0;  // images whose logits differ from the CPU int8 reference
  int64_t correct = 0;     // argmax == label
  double wall_seconds = 0;

  hw::ChipCounters Total() const;
  int64_t TotalMacs() const;
};

// The whole network runs as one program per batch where it fits (NetworkCompiler), else
// (or with `layer_jobs`) each layer as its own job (LayerCompiler: host im2col).
// `pixels`: `images` raw images of model.input.Size() bytes; `labels` may be empty. With a
// timing-only engine the images still flow (the host decodes zeros) but nothing is checked:
// mismatches and correct stay 0.
TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const uint8_t* pixels, const uint8_t* labels, int64_t images, int batch,
                           const std::function<void(double)>& progress = {},
                           bool layer_jobs = false);

}  // namespace tpu::compiler
