// A quantized model graph lowered to what the chip does (docs/compiler.md, "Whole
// networks"): tensors in the unified buffer's layout and operations that each stream rows
// through the matrix unit into the accumulators and activate them into one tensor.
//
// Layout: a tensor is a map of h x w pixels; each pixel takes T = ceil(c / N) rows of N
// lanes (channel ch in row ch / N, lane ch % N, the lanes past c zero), pixels in raster
// order, images one after another (`rows` rows each). The model's input is packed instead:
// c bytes per pixel, each image from a row boundary; an input of one pixel (a vector: a
// dense layer's, a GEMM's row) is the same bytes either way and counts as a map of T rows,
// so that a batch of vectors streams through each weight tile as one matmul.
//
// An operation computes, for each output tile j (N channels), a sum (or maximum) of terms:
// a term is one weight tile times rows of an input, those rows either formed by the window
// stage (a convolution's receptive fields, K-tile `ktile`) or read in place, one per pixel
// (tile column `ktile` of a T-row map). Then the VPU requantizes (bias, multiplier, shift,
// ReLU), pools 2 x 2 or adds a residual tensor, and writes tile j of the output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/isa/program_builder.h"
#include "host/nn/model.h"

namespace tpu::compiler {

struct GraphTensor {
  int64_t h = 1, w = 1, c = 1;
  bool packed = false;       // the model's input: c bytes per pixel
  int64_t pixel_bytes = 0;   // T x N, or c when packed
  int64_t rows = 0;          // unified-buffer rows per image
  int producer = -1;         // the operation that writes it (-1: the model's input)
  std::vector<int> readers;  // the operations that read it
  bool nonnegative = false;  // every value >= 0 (a ReLU made it): max pooling pads with 0
  int64_t T(int64_t n) const { return packed ? 0 : (c + n - 1) / n; }
  int64_t Pixels() const { return h * w; }
};

// kResidual: an identity pass whose activate joins a second tensor, the residual, by its
// vector unit (an add, a product). kVector: no matrix unit: steps of a bf16 chip's float32
// vector unit over whole tensors (a residual add there: docs/compiler.md).
enum class OpKind { kConv, kDense, kMaxPool, kResidual, kConcat, kVector };

// One step of a kVector operation: `vector op=...` over the rows of every image, a = b = the
// shape of the output; operands are tensors, the output itself (in place) or the plan's row
// of zeros (broadcast).
struct VectorStep {
  static constexpr int kOutput = -1;  // the operation's output tensor
  static constexpr int kZeros = -2;   // Plan::zero_row, broadcast to every row
  hw::VectorOp op = hw::VectorOp::kAdd;
  int a = kOutput, b = kOutput;  // tensor indices, kOutput or kZeros (b only)
};

// One term of an output tile's sum: a weight tile times rows of input `input`.
struct OpTerm {
  int input = 0;       // index into GraphOp::inputs
  bool window = true;  // rows formed by the window stage; else one row per pixel in place
  int64_t ktile = 0;   // window: K-tile of the receptive field; in place: tile column
  int tile = 0;        // index into the weight tiles (LoweredGraph::tiles)
};

// The runs of consecutive terms through one tile, over an operation's output tiles in
// order, as counts of terms: the emitter loads a tile once per run (consecutive terms of one
// tile, as an average pooling's or an identity's, keep it in the array).
std::vector<int64_t> TileRuns(const std::vector<std::vector<OpTerm>>& columns);

struct GraphOp {
  OpKind kind = OpKind::kConv;
  std::string name;            // for people: "conv1+pool1", "add3", "maxpool1"
  std::vector<int> layers;     // the model layers it computes
  std::vector<int> inputs;     // tensors the matrix unit reads (terms name them by index)
  int output = -1;             // the tensor it writes
  int residual = -1;           // a tensor the VPU adds (-1: none)
  isa::Residual residual_mul;  // the residual's multipliers, shift, ReLU (ub set when emitted)
  // The window over inputs[0] (window terms): geometry as set_window takes it, without the
  // input's own sizes, which the emitter fills in per map.
  isa::WindowGeometry window;
  bool stacked = false;  // one output pixel per image from the whole map: images stacked
  // A strided 1 x 1 window without padding over maps of a height its stride divides: the
  // images of a pass stacked into one tall map give exactly their own windows, so one
  // window matmul streams them all (docs/compiler.md).
  bool tall = false;
  // A stacked op whose window the registers cannot hold: its terms read each image's rows
  // in place, row ktile of every image, a pitch apart (graph_lowering.cc, ImageRows).
  bool image_rows = false;
  int64_t rows = 0;  // accumulator rows per image (output pixels, x 4 with 2 x 2 pooling)
  // The rows of the layer's GEMM per image: `rows`, or four pixels each with pool=lanes.
  int64_t LayerRows() const { return pool == isa::Pool::kLanes ? 4 * rows : rows; }
  int64_t nt = 0;                          // output tiles
  std::vector<std::vector<OpTerm>> terms;  // per output tile
  int first_param = 0;  // its parameter sets: first_param .. first_param + nt - 1
  // The output tile its first column writes: 0, or where a core computes only some of the
  // output tiles (model parallel, model_parallel.h), the first of its share.
  int64_t tile0 = 0;
  bool relu = false;
  isa::Fn fn = isa::Fn::kNone;  // a function table its activates apply after requantizing
  isa::Pool pool = isa::Pool::kNone;
  isa::Acc acc = isa::Acc::kAdd;  // how terms after the first combine (kMax: max pooling)
  int64_t macs = 0;               // useful multiply-accumulates per image
  std::vector<VectorStep> steps;  // kVector: in order (no terms, rows or output tiles)
};

struct LoweredGraph {
  std::vector<GraphTensor> tensors;  // tensor 0 is the model's input
  std::vector<GraphOp> ops;          // in an order where every op follows its inputs' writers
  int output = -1;                   // the tensor that holds the model's output
  std::vector<std::vector<uint8_t>>
      tiles;                    // distinct N x N weight tiles (rows = input lanes; bytes)
  std::vector<uint8_t> params;  // every op's parameter sets, first_param order
  int n = 0;                    // the array's N: a tile's output channels
  int border = 0;       // preprocess mnist32: the zero border the first convolution pads instead
  std::string why_not;  // what the chip cannot run (empty: everything lowered)
};

// Lowers a quantized model for an N x N int8 array, or an fp32 model for a bf16 one (its
// weights rounded to bfloat16, float32 biases: docs/bf16.md). What the chip cannot run (a
// window larger than the registers hold, max pooling of the packed input, ...) is said in
// why_not.
LoweredGraph LowerGraph(const nn::Model& model, int n, hw::Dtype dtype = hw::Dtype::kInt8);

// Whether an operation of `graph` runs on the vector unit (kVector): its plan keeps a row of
// zeros for them.
bool UsesVectorUnit(const LoweredGraph& graph);

}  // namespace tpu::compiler
