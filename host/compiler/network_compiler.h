// Whole networks on the chip: one program per batch (docs/compiler.md, "Whole networks").
//
// The host moves the input images in (packed: c bytes per pixel), the weights, the VPU
// parameter sets and, at the end, the logits; everything in between stays in the unified
// buffer. Convolutions read their input maps in place through the window stage
// (`set_window`, `matmul window`): no im2col on the host. Images go through the
// convolutions in groups that share each weight tile (as many images as the accumulators
// hold); the dense layers run once per batch, each weight tile streaming the whole batch.
// A model or chip this plan does not fit (channel groups, max pooling passes, a map or
// batch larger than the unified buffer, ...) runs layer job by layer job instead
// (LayerCompiler); WhyNot() says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/layer_compiler.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/nn/model.h"

namespace tpu::compiler {

class NetworkCompiler {
 public:
  // Plans `model` on `config` for batches of up to `batch` images.
  NetworkCompiler(const nn::Model& model, const config::TpuConfig& config, int batch);

  bool Fits() const { return why_not_.empty(); }
  const std::string& WhyNot() const { return why_not_; }
  // Images per group of the convolutions (they share each weight tile).
  int Group() const { return group_; }
  int64_t MacsPerImage() const { return macs_per_image_; }
  // "conv1+pool1 > conv2+pool2 > fc1 > fc2 > fc3"
  std::string Name() const { return name_; }

  // The job for `batch` images (at most the planned batch) whose int8 inputs (h x w x c
  // each) are in `act`.
  LayerJob Build(const std::vector<int8_t>& act, int batch) const;
  // The last layer's int8 outputs (batch x its output size) from the job's output bytes.
  std::vector<int8_t> Decode(const std::vector<uint8_t>& out, int batch) const;

 private:
  struct Stage {
    int kh = 1, kw = 1, stride = 1, pad_top = 0, pad_left = 0;  // a convolution's window
    bool conv = false, pooled = false, max_pool = false, relu = false;
    nn::Shape3 in, out;            // input map, output map (after fused pooling)
    int64_t kt = 0, nt = 0;        // K-tiles, output tiles
    int64_t rows = 0;              // conv: window rows per image (x 4 pooled); dense: 1
    int64_t out_h = 0, out_w = 0;  // conv: the output pixels the window walks
    uint64_t weight_addr = 0, param_set = 0;
    int64_t ub = 0;     // unified-buffer row of the stage's output area
    int64_t slots = 0;  // conv output: image slots (a ring of groups, or the whole batch)
  };

  std::string preprocess_;  // the model's (mnist32: a zero border the chip pads instead)
  config::TpuConfig config_;
  int n_, batch_, group_ = 1;
  std::vector<Stage> stages_;
  std::vector<uint8_t> weights_, params_;
  int64_t in_rows_ = 0, in_pixel_bytes_ = 0, ub_in_ = 0, macs_per_image_ = 0;
  // Zero pixels around the input that the first convolution's window padding makes on the
  // chip instead (preprocess mnist32: the 28 x 28 image inside 32 x 32), so the host sends
  // only the inner map.
  int border_ = 0;
  nn::Shape3 sent_;  // the input map the host sends
  std::string why_not_, name_;
};

}  // namespace tpu::compiler
