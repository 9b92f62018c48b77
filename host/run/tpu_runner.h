// Runs a quantized model on the simulated TPU, batch by batch, and checks every input
// against the CPU int8 reference: the whole network as one program per batch
// (network_compiler.h), or each layer as its own job (layer_compiler.h: chains only).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "host/compiler/graph_bound.h"
#include "host/compiler/network_compiler.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/nn/inputs.h"
#include "host/nn/model.h"
#include "host/report/operation_rows.h"

namespace tpu::engine {
class CycleAttribution;
}  // namespace tpu::engine

namespace tpu::run {

// A report row (host/report/operation_rows.h).
using report::kOutputChannelsSplit;
using report::LayerStats;
// The plan's words for one image of a whole network split over the cores (model_parallel.h).
inline constexpr const char* kModelParallel = "(model parallel)";

struct TpuRunResult {
  int64_t images = 0;
  int batch = 0;                                   // inputs per program
  std::string dtype = "int8";                      // the chip's number format
  std::vector<std::vector<int8_t>> logits;         // per input, the model's int8 outputs
  std::vector<std::vector<uint16_t>> logits_bf16;  // on a bf16 chip: bfloat16 outputs
  std::string non_finite;          // bf16: where the first NaN or infinity appeared (empty: none)
  int64_t non_finite_outputs = 0;  // bf16: inputs whose outputs hold a NaN or an infinity
  float output_scale = 0;          // their scale
  std::vector<LayerStats> layers;  // one entry for a whole-network program
  std::string plan;  // "whole network, one program per batch: ...", or "layer jobs (why)"
  std::vector<compiler::SpilledTensor> spilled;  // tensors the plan keeps in host memory
  int64_t ub_rows = 0;     // unified-buffer rows the plan uses (whole networks; topology
                           // layers with windows: the most any layer's program uses)
  bool checked = true;     // false in timing-only runs: no values to check
  int64_t mismatches = 0;  // inputs whose outputs differ from the CPU int8 (bf16) reference
  int64_t correct = 0;     // argmax == label
  bool labelled = false;   // the inputs had labels
  double wall_seconds = 0;
  // The chip's cycles over every job: on a chip of several cores fewer than the rows' cycles,
  // which count each core's (docs/compiler.md, "Several cores"); 0 where not recorded.
  uint64_t chip_cycles = 0;

  hw::ChipCounters Total() const;
  int64_t TotalMacs() const;
};

// Throws UsageError naming the field when a batch is less than one input.
void CheckBatch(int batch);

// How a run compiles the network.
struct CompileChoices {
  bool layer_jobs = false;  // each layer its own job (host im2col), not the whole network
  bool fit_batch = false;   // the batch asked is the most (RunModelOnTpu)
  // Where the whole network's weights reach the matrix units (docs/compiler.md, "Weights
  // through vector memory").
  compiler::WeightPath weights = compiler::WeightPath::kFifo;
};

// A batch of b inputs on a chip of C cores (docs/compiler.md, "Several cores"): core c's
// share is inputs [b c / C, b (c + 1) / C); the shares that are not empty, in order (they
// run on cores 0, 1, ...). The largest is ceil(b / C).
struct BatchShare {
  int first = 0, count = 0;
};
std::vector<BatchShare> BatchShares(int b, int cores);

// Runs a job of a program per core (job c core c's, with its op_of; null: the engine's
// loaded executable, whose programs those are), each core's counters attributed to the
// operations cycle by cycle and checked against the core's, the layers' slices in each
// core's timeline (named by r's rows); r->chip_cycles gets the run's cycles. Throws
// RuntimeError where the chip stops on an error.
engine::ExecResult RunAttributed(const engine::ExecJob* job,
                                 const std::vector<compiler::LayerJob>& jobs,
                                 engine::ChipEngine& engine,
                                 std::vector<engine::CycleAttribution>& attributions,
                                 TpuRunResult* r);

// The whole network runs as one program per batch where it fits (NetworkCompiler), else
// (or with `how.layer_jobs`) each layer as its own job (LayerCompiler: host im2col; chains
// only). Runs the first `images` of `inputs`. With a timing-only engine the inputs still
// flow (the host decodes zeros) but nothing is checked: mismatches and correct stay 0.
// With `how.fit_batch`, `batch` is the most: the run takes the largest batch up to it whose
// whole-network program fits the chip's memories (LargestBatchThatFits, without lowering
// the network twice).
TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const nn::InputSet& inputs, int64_t images, int batch,
                           const std::function<void(double)>& progress = {},
                           const CompileChoices& how = {});

// A transformer (compiler::IsTransformer) on a bf16 chip: one compiler::TransformerProgram
// per batch on core 0, every output checked against nn::Bf16Net bit for bit, a row per
// operation (transformer_run.cc). RunModelOnTpu runs it so.
TpuRunResult RunTransformerOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                                 const nn::InputSet& inputs, int64_t images, int batch,
                                 const std::function<void(double)>& progress = {});

// The largest batch, up to `most`, whose whole-network program fits `config`'s memories (the
// default batch of a sharded `tpusim run`, whose slices are cut at whole batches); `most`
// where no batch does for another reason (the window registers, one image's maps), so that
// the run says why.
int LargestBatchThatFits(const nn::Model& model, const config::TpuConfig& config, int most,
                         compiler::WeightPath weights = compiler::WeightPath::kFifo);

// The same on raw images of a preprocess-mnist32 model (`labels` may be null).
TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const uint8_t* pixels, const uint8_t* labels, int64_t images, int batch,
                           const std::function<void(double)>& progress = {},
                           bool layer_jobs = false);

}  // namespace tpu::run
