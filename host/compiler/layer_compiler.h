// Lowers the layers of a quantized model to TPU programs (docs/compiler.md).
//
// Every conv or dense layer becomes one job: the host lays its input out as rows (im2col
// for a convolution: one row per output pixel; one row per image for a dense layer), the
// chip multiplies them by the layer's weight tiles, and the VPU adds the bias,
// requantizes, applies ReLU and, when a 2 x 2 pooling layer follows, pools (the rows of a
// pooling window are laid out consecutively for that). The host reads the int8 outputs
// back for the next layer. Rows stream in chunks that fit the accumulators; the unified
// buffer double-buffers chunks so the next chunk's rows load while this one computes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/nn/model.h"

namespace tpu::compiler {

// One chip job: a conv or dense layer of the model and the pooling layer fused into it, or
// an average pooling layer the chip runs as a convolution.
struct LayerStep {
  int layer = -1;       // index in model.layers (conv2d, dense or avgpool2d)
  int pool_layer = -1;  // index of a 2 x 2 pooling layer fused into it, or -1
  // What the chip runs in place of an average pooling layer: the convolution with weights 1
  // on each channel's own window, requantized by 1/n (AveragePoolAsConv).
  std::shared_ptr<const nn::Layer> lowered;
  // A layer too wide for one job (more output tiles than the VPU has parameter sets, or
  // weights larger than weight memory) runs as several, each computing the output channels
  // [channel_first, channel_first + channels) of the same input; channels 0: all of them.
  int channel_first = 0, channels = 0;
  // Max pooling of any other window runs as passes of the VPU's 4-row maximum: `lowered` is
  // then the identity 1 x 1 convolution of the pass's input (1 x pixels x c), and output
  // pixel j of an image is the maximum of its input pixels gather[4j .. 4j + 3]
  // (MaxPoolPasses); pass counts them from 1 (0: not a pass).
  std::shared_ptr<const std::vector<int32_t>> gather;
  int pass = 0;
  // "conv1+pool1", "fc1.ch0-127" (a channel group), "pool3.pass2"
  std::string Name(const nn::Model& m) const;
};

// Whether layer jobs run layers of l's kind: convolutions, dense layers, pooling, flatten.
bool LayerJobsRun(const nn::Layer& l);

// The steps that run `model`; flatten layers need no work (activations are stored h x w x c).
// A 2 x 2 pooling of stride 2 right after a conv layer is fused into it (the VPU pools);
// any other average pooling (other windows and strides, global) is its own step, a
// convolution. Throws UsageError naming the layer the chip cannot run (max pooling other
// than 2 x 2 / 2 after a convolution, an unquantized model).
std::vector<LayerStep> PlanSteps(const nn::Model& model);
// The same for a chip: each step split into output-channel groups of as many tiles as the
// chip's parameter sets and weight memory hold (the groups run one after another on the
// same input and their outputs are put together). A layer whose single output tile does not
// fit stays whole, and LayerCompiler names the field to raise.
std::vector<LayerStep> PlanSteps(const nn::Model& model, const config::TpuConfig& config);

// A job ready for a chip engine (program, memory images, where the outputs land) and what
// it does, in a line for people.
struct LayerJob {
  engine::ExecJob exec;
  // Maps on chip (NetworkCompiler): programs run just before exec, putting the batch's
  // input into the unified buffer, and just after, taking the output out to host memory
  // (its host_out); they are not the layer's work, and their counters are not its.
  std::vector<engine::ExecJob> before, after;
  std::vector<int32_t> op_of;  // whole networks: per instruction, its operation (-1: none)
  std::vector<int> op_units;   // whole networks: per operation, the matrix units it went to
  std::string summary;
  int64_t rows = 0;    // input rows of the batch (each streamed once per K-tile)
  int64_t chunks = 0;  // pieces of at most half the accumulator rows
};

// A max pooling layer (kh x kw windows, stride s, in the map) as passes of the VPU's
// maximum of 4 rows over identity convolutions (weights 1 on the diagonal, requantization
// multiplier 2^30 and shift 30, which gives every int8 back unchanged): the first pass
// takes each window's taps in fours (the last four padded by repeating a tap, harmless to a
// maximum), each later pass the previous pass's results in fours, until one value is left
// per output pixel and channel. A 2 x 2 window is one pass; 3 x 3 is two (9 -> 3 -> 1).
std::vector<LayerStep> MaxPoolPasses(const nn::Layer& pool, int layer_index);

// An average pooling layer as the quantized convolution that computes it exactly: each
// channel's window times 1 (depthwise weights), no bias, requantized by the multiplier and
// shift of 1/n (arith::AverageMultiplier), no ReLU; so arith::AveragePool(sum, n). For a
// bf16 chip (`bf16`), fp32 weights 1/n instead. The weights are expanded as every depthwise
// layer's (kh x kw x c x c), so only the chip's format is made: a global pooling of 7 x 7 x
// 2048 (resnet50) holds 205 M of them. With `expand` false they stay kh x kw x c x 1 (each
// channel's own weight), for a caller that forms the tiles from them (lower/weighted.cc):
// expanding took most of a timing-only ResNet-50 run.
nn::Layer AveragePoolAsConv(const nn::Layer& pool, bool bf16, bool expand = true);

// Useful multiply-accumulates per image of a conv or dense layer whose rows (one per
// output pixel computed, or one per image) are `rows_per_image`: K x output channels per
// row, without a depthwise layer's (or a lowered average pooling's) zeros off the diagonal.
int64_t UsefulMacsPerImage(const nn::Layer& l, int64_t rows_per_image);

class LayerCompiler {
 public:
  // Throws UsageError when the layer does not fit the chip (too many output tiles for its
  // parameter sets, the weights larger than weight memory).
  LayerCompiler(const nn::Model& model, const LayerStep& step, const config::TpuConfig& config);

  const nn::Shape3& InShape() const { return in_; }
  // The output this job computes (its channel group), and the layer's whole output.
  const nn::Shape3& OutShape() const { return out_; }
  const nn::Shape3& LayerOutShape() const { return layer_out_; }
  int ChannelFirst() const { return channel_first_; }
  int64_t K() const { return k_; }
  int64_t RowsPerImage() const { return rows_per_image_; }
  int64_t OutRowsPerImage() const { return pooled_ ? rows_per_image_ / 4 : rows_per_image_; }
  // Useful multiply-accumulates per image (padding excluded; a depthwise layer's, or a
  // lowered average pooling's, zeros off the diagonal excluded too).
  int64_t MacsPerImage() const { return UsefulMacsPerImage(layer_, rows_per_image_); }

  // The job for `batch` images whose int8 input activations (h x w x c each) are in `act`.
  LayerJob Build(const std::vector<int8_t>& act, int batch) const;
  // The int8 outputs (h x w x c each, `batch` images) from the job's output bytes.
  std::vector<int8_t> Decode(const std::vector<uint8_t>& out, int batch) const;

 private:
  // How a batch's m rows go through the chip: chunks of mc rows (mco output rows), and
  // where the parameter sets and the outputs lie in host memory.
  struct Chunking {
    int64_t m, mc, chunks, mco;
    uint64_t p_addr, y_addr;
  };
  // The host memory image below c.y_addr: each chunk's row blocks (K-tile after K-tile),
  // then the parameter sets.
  std::vector<uint8_t> HostImage(const std::vector<int8_t>& act, const Chunking& c) const;
  // The job's program: chunks double-buffered in the unified buffer and the accumulators.
  isa::Program Emit(const Chunking& c) const;
  // The input row of image b for output row r (the im2col of one output pixel).
  void FillRow(const int8_t* image, int64_t r, int8_t* row) const;
  // Rows per chunk for m rows (throws UsageError when not even 4 fit).
  int64_t ChunkRows(int64_t m) const;
  // The output pixel (oh, ow) that row r of an image computes.
  void RowPixel(int64_t r, int* oh, int* ow) const;

  nn::Layer layer_;  // the model's layer, or the step's lowered one
  std::shared_ptr<const std::vector<int32_t>> gather_;  // a max pooling pass's rows
  config::TpuConfig config_;
  int n_;
  bool conv_, pooled_, max_pool_, relu_;
  nn::Shape3 in_, conv_out_, out_, layer_out_;
  int channel_first_ = 0;
  int64_t k_, kt_, nt_, rows_per_image_;
  std::vector<uint8_t> weights_, params_;
};

}  // namespace tpu::compiler
