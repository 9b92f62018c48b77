// Whole networks on the chip: one program per batch (docs/compiler.md, "Whole networks").
//
// The model graph is lowered to chip operations (graph_lowering.h), planned into segments
// that run their images in groups with every tensor placed in the unified buffer or, when
// it does not fit, in host memory (graph_plan.h), and emitted as one program per batch
// (graph_emitter.h). The host moves in the images (packed: c bytes per pixel), the weights
// and VPU parameter sets, spilled tensors where the plan spills, and the outputs; the
// convolutions read their maps in place through the window stage, residual adds run in the
// VPU, max pooling in the accumulators. What the chip cannot run (a kernel larger than the
// window registers hold, ...) is said by WhyNot().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/compiler/graph_bound.h"
#include "host/compiler/graph_emitter.h"
#include "host/compiler/graph_lowering.h"
#include "host/compiler/graph_plan.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/model_parallel.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"

namespace tpu::compiler {

// A tensor the plan keeps in host memory, and the bytes that costs per image.
struct SpilledTensor {
  std::string name;  // the layer that computes it
  int64_t bytes_per_image = 0;
  int64_t readers = 0;  // segments that read it back (each reads every image)
};

// A network compiled once for a batch size on one core (NetworkCompiler::Compile): its job
// with the inputs left zero (the program, with op_of and op_units; the host image of the
// parameters; the weight image; the output range), the bytes of its inputs from host
// address 0, which each batch rewrites (EncodeInputs), and its operations' bounds.
struct CompiledNetwork {
  LayerJob job;
  uint64_t input_bytes = 0;
  // Each operation's attainable bound for the images the program runs (graph_bound.h; on a
  // core of a split, its share's): what a run of it is compared with.
  std::vector<Bound> bounds;
};

class NetworkCompiler {
 public:
  // Lowers and plans `model` on `config` for batches of up to `batch` images. With
  // `maps_on_chip`, the batch's input starts in the unified buffer and its output stays there
  // where they fit (both, else the input, else the output; what does not fit moves over the
  // host link as usual; Maps() says which): the job's `before` and `after` programs move
  // them, outside the counted program. `weights`: where the weights reach the matrix units
  // (WeightPath, graph_plan.h).
  NetworkCompiler(const nn::Model& model, const config::TpuConfig& config, int batch,
                  bool maps_on_chip = false, WeightPath weights = WeightPath::kFifo);

  bool Fits() const { return why_not_.empty(); }
  int Batch() const { return batch_; }  // the most images a job holds
  // The largest batch up to `most` whose plan fits (0: none, or the graph does not lower).
  int LargestBatch(int most) const;
  MapsOnChip Maps() const { return maps_; }
  const std::string& WhyNot() const { return why_not_; }
  int64_t MacsPerImage() const { return macs_per_image_; }
  // "conv1+pool1 > conv2+pool2 > fc1 > fc2 > fc3"
  std::string Name() const { return name_; }
  // How a batch of `batch` images (0: the planned batch) runs: "conv1 .. conv3 in groups of
  // 4; fc1 .. fc3 in groups of 64; ..."
  std::string PlanText(int batch = 0) const;
  // The tensors the plan of `batch` images (0: the planned batch) keeps in host memory.
  std::vector<SpilledTensor> Spilled(int batch = 0) const;
  int64_t UbRows() const { return plans_.at(batch_).ub_rows; }
  const LoweredGraph& Graph() const { return graph_; }
  // The attainable bound of each operation for `batch` images (graph_bound.h).
  std::vector<Bound> Bounds(int batch) const {
    return BoundGraph(graph_, PlanFor(batch), config_, batch);
  }
  // An operation as a GEMM per image: k and n of its convolution or dense layer (0 and the
  // output channels otherwise).
  std::pair<int64_t, int64_t> KN(int op) const;

  // The job for `batch` images (at most the planned batch) whose inputs (h x w x c each) are
  // in `act`, in the chip's format (T: arith/format.h, int8_t or uint16_t bfloat16; another
  // is a UsageError). `sharers`: the cores that run their shares at once over the one host
  // link (EmitGraph).
  template <class T>
  LayerJob Build(const std::vector<T>& act, int batch, int sharers = 1) const;
  // The network for `batch` images on a core beside sharers - 1 others, compiled once
  // (CompiledNetwork; core_split.h's TakeExecutable makes the executable of the cores' jobs).
  CompiledNetwork Compile(int batch, int sharers = 1) const;
  // The `inputs` region's bytes for `batch` images whose inputs are `act` (T as Build's):
  // each image's rows, then zeros up to the parameters.
  template <class T>
  std::vector<uint8_t> EncodeInputs(const std::vector<T>& act, int batch) const;
  // One image on the chip's cores (model_parallel.h): the operations that split (none on
  // one core, or where the exchange areas would not fit host memory).
  const ModelSplit& SplitOfOne() const;
  // One image split over the cores where SplitOfOne().Any(), compiled once: job c core c's
  // program (its op_of and units), job 0 with the host image (its input left zero) and the
  // weight image every core shares; input_bytes, the input's bytes from host address 0,
  // which each image rewrites (EncodeInputs with a batch of 1).
  std::vector<CompiledNetwork> CompileCores() const;
  // Each operation's bound for one image on core `core` of a split (its share's).
  std::vector<Bound> CoreBounds(int core) const;
  // The model's outputs (batch x its output size) in the chip's format T from the job's
  // output bytes.
  template <class T>
  std::vector<T> Decode(const std::vector<uint8_t>& out, int batch) const;

 private:
  const Plan& PlanFor(int batch) const;
  // PlanFor(batch), or a UsageError where the network or that batch does not run.
  const Plan& CheckedPlan(int batch) const;
  // The job without its inputs: the program, parameters, weights, output range.
  LayerJob ProgramOf(int batch, int sharers, const CoreShare* share,
                     const LoweredGraph* graph) const;
  template <class T>
  LayerJob BuildOf(const std::vector<T>& act, int batch, int sharers,
                   const CoreShare* share = nullptr, const LoweredGraph* graph = nullptr) const;
  void MoveMaps(const Plan& plan, int batch, LayerJob* job) const;

  config::TpuConfig config_;
  int n_, batch_;
  int64_t row_;  // a row's bytes: N, or 2N on a bf16 chip
  MapsOnChip maps_;
  WeightPath weight_path_;  // where the weights reach the matrix units
  std::string preprocess_;
  nn::Shape3 input_;                             // the model's input, h x w x c
  std::vector<std::pair<int64_t, int64_t>> kn_;  // per operation (KN())
  LoweredGraph graph_;
  mutable std::map<int, Plan> plans_;        // per batch size
  mutable std::optional<ModelSplit> split_;  // SplitOfOne()
  mutable uint64_t exchange_[2] = {0, 0};    // its exchange areas in host memory
  std::vector<uint8_t> weights_;
  int64_t macs_per_image_ = 0;
  std::string why_not_, name_;
};

}  // namespace tpu::compiler
