// The lowering of a model graph to chip operations (graph_lowering.h), and what each
// operation's lowering (lower_ops.h) builds on: the graph being built, the tensor each layer's
// output lives in, weight tiles shared where equal, parameter sets, windows, and the layers
// that run fused into another's operation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/compiler/graph_lowering.h"
#include "host/compiler/packing.h"
#include "host/nn/model.h"

namespace tpu::compiler::lower {

// What the window registers and the instruction word hold (contract/tpu_contract.toml).
constexpr int64_t kWindowSize = hw::kOpdSetWindowInH.Max();  // map and output sides
constexpr int64_t kWindowSmall = hw::kOpdSetWindowKh.Max();  // kernel, stride, padding
constexpr int64_t kField16 = hw::kOpdMatmulFirst.Max();      // pixels, K-tiles, bytes

class Lowering {
 public:
  Lowering(const nn::Model& m, int n, hw::Dtype dtype)
      : m_(m),
        n_(n),
        bf16_(dtype == hw::Dtype::kBf16),
        set_bytes_(int64_t{hw::ParamRows(hw::ElementBytes(dtype))} * n * hw::ElementBytes(dtype)),
        consumers_(m.Consumers()) {}

  // The graph lowered, or why it cannot run (LoweredGraph::why_not).
  LoweredGraph Run();

  const nn::Model& model() const { return m_; }
  LoweredGraph& graph() { return g_; }
  int n() const { return n_; }
  bool bf16() const { return bf16_; }
  // Layer `layer` runs inside another's operation (a pooling or an add fused into it).
  void MarkFused(int layer) { fused_[layer] = true; }
  bool Fused(int layer) const { return fused_.count(layer) != 0; }
  // Layer i's output is layer `from`'s tensor, the same rows (flatten).
  void SameRows(int i, int from) { tensor_of_[static_cast<size_t>(i)] = TensorOf(from); }

  // A new operation of `kind` lowering layer i (named after it).
  GraphOp NewOp(OpKind kind, int i) const {
    GraphOp op;
    op.kind = kind;
    op.name = L(i).name;
    op.layers = {i};
    return op;
  }
  // Ends the lowering: the graph cannot run, for `why` (the first reason given is kept).
  void No(const std::string& why);
  // Layer i, and the tensor that holds its output (nn::kModelInput: the input, tensor 0).
  const nn::Layer& L(int i) const;
  int TensorOf(int layer) const;
  // The one layer that reads `layer`'s output, or -1.
  int OnlyReader(int layer) const;
  // A new tensor of h x w pixels of c channels, written by the next operation.
  int NewTensor(int64_t h, int64_t w, int64_t c, bool nonnegative);
  // The index of weight tile `t` (N*N bytes), shared with an equal one seen before.
  int Tile(const std::vector<uint8_t>& t);
  // Whether tile t is all zeros.
  static bool Zero(const std::vector<uint8_t>& t);
  // A 2 x 2 pooling of stride 2 that only reads this convolution runs in its activate.
  int FusablePool(int i) const;
  // An add that only reads this layer (and a tensor computed before it) runs in its
  // activate: the other input is the residual.
  int FusableAdd(int i) const;
  // Fills the window of `op` for a kh x kw kernel over `in` (the emitter adds the map's
  // size per image or stack of images).
  void SetWindow(GraphOp* op, const GraphTensor& in, int64_t kh, int64_t kw, int64_t stride,
                 int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w, int64_t channels);
  // The residual of add `a` whose input k comes through the array: int8, its multipliers and
  // shift; bf16, a float32 sum (the multipliers and shift, valid and unused: docs/isa.md).
  isa::Residual ResidualOf(const nn::Layer& a, int k) const;
  // Adds op, the lowering of layer i (and of the pooling `pool` and the add `add` fused
  // into it, -1: none), to the graph: its output is theirs.
  void Finish(GraphOp op, int i, int pool, int add);
  // Packed parameter sets appended to the program's, the first of them op's.
  void AddParams(GraphOp& op, const std::vector<uint8_t>& packed);
  // The parameter sets of channels c in format F.
  template <class F>
  void Params(GraphOp& op, const std::vector<typename F::Channel>& c) {
    AddParams(op, PackParamSets<F>(c, n_));
  }
  // Layer l's own, in the chip's format: int8, its bias, multiplier and shift per channel;
  // bf16, its float32 biases and the upper bound 6 for ReLU6 (the activate's ReLU flag does
  // the clamp at zero).
  void LayerParams(GraphOp& op, const nn::Layer& l);
  // Parameter sets that give each value back: int8 bias 0, multiplier 2^30, shift 30; bf16
  // bias +0, no upper bound.
  void IdentityParams(GraphOp& op, int64_t channels);
  // The tile that maps input lane r to output lane r - shift for r in [lo, hi): weights 1
  // (in bf16 two bytes, little-endian) there, zeros elsewhere.
  int ShiftTile(int64_t lo, int64_t hi, int64_t shift);

 private:
  const std::vector<int>& Readers(int layer) const;
  // Layer i, by its operation's lowering (lower_ops.h).
  void Layer(int i);
  // A window over each image's whole map (one output pixel per image) that the registers
  // cannot hold, as a global average pooling of a 16 x 16 map, is a dense layer over the
  // image's rows instead: K-tile r is row r of the image (pixel r / T's channels r % T),
  // read in place, images a pitch apart (docs/compiler.md, "A window larger than the
  // registers"). Not over the packed input (its pixels share rows), and on a bf16 chip only
  // where a pixel's channels fill whole rows: its K-tiles must split K where nn::Bf16Net
  // splits it.
  bool ImageRows(GraphOp* op, const GraphTensor& in) const;
  // The 2-pixel zero border of mnist32 becomes padding of the first convolution where its
  // window allows it: the only reader of the input, padding smaller than the kernel, every
  // window starting inside the map.
  void Border();

  const nn::Model& m_;
  const int n_;
  const bool bf16_;          // a bf16 chip: bfloat16 weights, float32 parameter sets
  const int64_t set_bytes_;  // a parameter set's bytes
  const std::vector<std::vector<int>> consumers_;
  LoweredGraph g_;
  std::vector<int> tensor_of_;  // per layer, the tensor holding its output
  std::map<int, bool> fused_;   // layers that run inside another layer's operation
  std::map<std::vector<uint8_t>, int> tile_index_;
};

}  // namespace tpu::compiler::lower
