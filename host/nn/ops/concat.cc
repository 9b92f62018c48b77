// A concatenation of maps of one size along their channels.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

void Infer(const Model& m, const std::string& where, Layer* l) {
  Shape3 out = l->in;
  for (size_t k = 1; k < l->inputs.size(); ++k) {
    const Shape3& s = m.OutputOf(l->inputs[k]);
    if (s.h != l->in.h || s.w != l->in.w) {
      throw UsageError(fmt::format("{}: concatenates a {} x {} map with a {} x {} one", where, s.h,
                                   s.w, l->in.h, l->in.w));
    }
    out.c += s.c;
  }
  l->out = out;
}

// Each pixel's channels of input 0, then of input 1, ...
void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/, MatrixF* y) {
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  y->resize(xs[0]->rows(), l.out.Size());
  for (int64_t b = 0; b < y->rows(); ++b) {
    int64_t c0 = 0;
    for (const MatrixF* x : xs) {
      const int64_t c = x->cols() / pixels;
      for (int64_t p = 0; p < pixels; ++p)
        std::copy_n(&(*x)(b, p * c), c, &(*y)(b, p * l.out.c + c0));
      c0 += c;
    }
  }
}

// Each input's gradient: its channels of each pixel of the output's.
void Backward(const Layer& l, const BackwardStep& s) {
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  int64_t c0 = 0;
  for (size_t k = 0; k < s.xs.size(); ++k) {
    const int64_t c = s.xs[k]->cols() / pixels;
    if (MatrixF* dx = s.dx[k]) {
      dx->resize(s.dy.rows(), pixels * c);
      for (int64_t b = 0; b < s.dy.rows(); ++b)
        for (int64_t p = 0; p < pixels; ++p)
          std::copy_n(&s.dy(b, p * l.out.c + c0), c, &(*dx)(b, p * c));
    }
    c0 += c;
  }
}

// The int8 rule: each input's channels requantized to the output's scale, one input after
// another.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs, const std::vector<int>& channels,
          int8_t* y) {
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  for (int64_t p = 0; p < pixels; ++p) {
    int64_t c0 = 0;
    for (size_t k = 0; k < xs.size(); ++k) {
      const auto m = static_cast<uint32_t>(l.q.multiplier[k]);
      const auto s = static_cast<uint32_t>(l.q.shift[k]);
      for (int64_t c = 0; c < channels[k]; ++c)
        y[p * l.out.c + c0 + c] = arith::Requantize(xs[k][p * channels[k] + c], m, s, -128);
      c0 += channels[k];
    }
  }
}

// The largest input scale (its range is the largest input's range), so that every input's
// multiplier is at most 1; a multiplier and shift per input.
float Quantize(Layer* l, const std::vector<float>& in_scales, float /*range*/) {
  QuantizedLayer& q = l->q;
  q.input_scales = in_scales;
  q.output_scale = *std::max_element(in_scales.begin(), in_scales.end());
  q.multiplier.assign(in_scales.size(), 0);
  q.shift.assign(in_scales.size(), 62);
  for (size_t k = 0; k < in_scales.size(); ++k)
    QuantizeMultiplier(double{in_scales[k]} / q.output_scale, &q.multiplier[k], &q.shift[k]);
  l->quantized = true;
  return q.output_scale;
}

// A multiplier and a shift per input.
void ReadInt8(const nlohmann::json& qj, const std::string& where, Layer* l) {
  ReadJoinInt8(qj, where, l->inputs.size(), l);
}

// Each value through a tile of ones and zeros, then the vector unit's +0 bias.
Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& xs) {
  const Layer& l = *p.layer;
  Bf16Values y(static_cast<size_t>(l.out.Size()));
  const int64_t pixels = int64_t{l.out.h} * l.out.w;
  int64_t c0 = 0;
  for (const Bf16Values* x : xs) {
    const int64_t c = static_cast<int64_t>(x->size()) / pixels;  // its channels
    for (int64_t px = 0; px < pixels; ++px)
      for (int64_t ch = 0; ch < c; ++ch)
        y[static_cast<size_t>(px * l.out.c + c0 + ch)] =
            Bf16ThroughArray((*x)[static_cast<size_t>(px * c + ch)]);
    c0 += c;
  }
  return y;
}

}  // namespace

const OpDef& ConcatOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kConcat;
    d.name = "concat";
    d.min_inputs = 2;
    d.max_inputs = -1;
    d.version = GraphVersion;
    d.read_int8 = ReadInt8;
    d.write_int8 = WriteJoinInt8;
    d.infer = Infer;
    d.macs = NoMacs;
    d.forward = Forward;
    d.backward = Backward;
    d.int8 = Int8;
    d.quantize = Quantize;
    d.bf16 = Bf16;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
