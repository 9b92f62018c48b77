// Softmax and layer normalization along the c axis of each position (h, w) of a tensor: a
// transformer's attention probabilities and its LayerNorm (PyTorch's, over the last axis:
// y = (x - mean) / sqrt(var + epsilon) gamma + beta, var the biased variance; gamma its
// weights, beta its bias). And what transformer_ops.h's operations share.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

[[noreturn]] void RefuseInt8(const Layer& l) {
  throw UsageError(fmt::format(
      "{} '{}' runs in fp32 and bf16 only (tpusim infer --backend cpu-fp32 or cpu-bf16): an "
      "int8 chip has no floating-point unit and tpusim defines no int8 scheme for it "
      "(docs/transformers.md)",
      l.TypeName(), l.name));
}

void Int8(const Layer& l, const std::vector<const int8_t*>& /*xs*/,
          const std::vector<int>& /*channels*/, int8_t* /*y*/) {
  RefuseInt8(l);
}

float Quantize(Layer* l, const std::vector<float>& /*in_scales*/, float /*range*/) {
  RefuseInt8(*l);
}

void SameShape(const Model& /*m*/, const std::string& /*where*/, Layer* l) { l->out = l->in; }

// Each position's c values: x row r, columns [p c, p c + c).
template <typename Fn>
void ForEachPosition(const Layer& l, const MatrixF& x, MatrixF* out, Fn fn) {
  const int64_t c = l.in.c, positions = l.in.Size() / c;
  out->resize(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (int64_t p = 0; p < positions; ++p) fn(x.row(r).data() + p * c, out->row(r).data() + p * c);
}

void SoftmaxForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                    MatrixF* out) {
  const int64_t c = l.in.c;
  ForEachPosition(l, *xs[0], out, [c](const float* x, float* y) {
    float mx = x[0];
    for (int64_t k = 1; k < c; ++k) mx = std::max(mx, x[k]);
    float sum = 0;
    for (int64_t k = 0; k < c; ++k) sum += (y[k] = std::exp(x[k] - mx));
    for (int64_t k = 0; k < c; ++k) y[k] /= sum;
  });
}

// The mean and the biased variance summed in double, as batch_norm.cc sums its statistics.
void LayerNormForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                      MatrixF* out) {
  const int64_t c = l.in.c;
  const float* gamma = l.weights.data.data();
  const float* beta = l.bias.data.data();
  ForEachPosition(l, *xs[0], out, [&](const float* x, float* y) {
    double sum = 0, squares = 0;
    for (int64_t k = 0; k < c; ++k) sum += x[k];
    const double mean = sum / static_cast<double>(c);
    for (int64_t k = 0; k < c; ++k) squares += (x[k] - mean) * (x[k] - mean);
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(c) + l.epsilon);
    for (int64_t k = 0; k < c; ++k)
      y[k] = static_cast<float>((x[k] - mean) * inv) * gamma[k] + beta[k];
  });
}

std::vector<int64_t> LayerNormWeights(const Layer& l) { return {l.out.c}; }

void ReadEpsilon(const nlohmann::json& lj, const std::string& where, Layer* l) {
  l->epsilon = lj.value("epsilon", 1e-5f);
  if (!(l->epsilon > 0)) throw UsageError(where + ": layer_norm needs epsilon > 0");
}

void WriteEpsilon(const Layer& l, nlohmann::json* lj) { (*lj)["epsilon"] = l.epsilon; }

}  // namespace

OpDef FloatOnly(LayerType type, const char* name) {
  OpDef d;
  d.type = type;
  d.name = name;
  d.version = GraphVersion;
  d.macs = NoMacs;
  d.int8 = Int8;
  d.quantize = Quantize;
  SetTransformerBf16(&d);
  return d;
}

const OpDef& SoftmaxOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kSoftmax, "softmax");
    d.infer = SameShape;
    d.forward = SoftmaxForward;
    return d;
  }();
  return op;
}

const OpDef& LayerNormOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kLayerNorm, "layer_norm");
    d.read = ReadEpsilon;
    d.write = WriteEpsilon;
    d.weight_shape = LayerNormWeights;
    d.infer = SameShape;
    d.forward = LayerNormForward;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
