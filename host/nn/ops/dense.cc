// A dense (fully connected) layer over a vector.
#include <nlohmann/json.hpp>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

using MapF = Eigen::Map<MatrixF>;

void Infer(const Model& /*m*/, const std::string& where, Layer* l) {
  const Shape3& in = l->in;
  if (in.h != 1 || in.w != 1) {
    throw UsageError(where + ": dense input is " + std::to_string(in.h) + " x " +
                     std::to_string(in.w) + " x " + std::to_string(in.c) +
                     "; put a flatten layer before it");
  }
}

int64_t Macs(const Layer& l) { return int64_t{l.in.c} * l.out.c; }

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  *out = *xs[0] * WeightMatrix(l);
  out->rowwise() += Eigen::Map<const Eigen::RowVectorXf>(l.bias.data.data(), l.out.c);
}

// dW = X^T dY, db = the column sums of dY, dX = dY W^T.
void Backward(const Layer& l, const BackwardStep& s) {
  MapF dw(s.dw->data(), l.in.c, l.out.c);
  dw.noalias() += s.x().transpose() * s.dy;
  Eigen::Map<Eigen::RowVectorXf>(s.db->data(), l.out.c) += s.dy.colwise().sum();
  if (s.dx[0] != nullptr) *s.dx[0] = s.dy * WeightMatrix(l).transpose();
}

// The int8 rule: acc = bias + the products, requantized per output channel, clamped at
// zero with ReLU or ReLU6.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const int8_t* x = xs[0];
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  for (int oc = 0; oc < l.out.c; ++oc) {
    int32_t acc = l.q.bias.data[oc];
    for (int ic = 0; ic < l.in.c; ++ic)
      acc += int32_t{x[ic]} * l.q.weights.data[size_t(ic) * l.out.c + oc];
    y[oc] = arith::Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
  }
}

float Quantize(Layer* l, const std::vector<float>& in_scales, float range) {
  return QuantizeWeighted(l, in_scales[0], range);
}

// model.json: "units", its outputs.
void Read(const nlohmann::json& lj, const std::string& /*where*/, Layer* l) {
  l->out = {1, 1, lj.at("units").get<int>()};
}

void Write(const Layer& l, nlohmann::json* lj) { (*lj)["units"] = l.out.c; }

// in x out.
std::vector<int64_t> WeightShape(const Layer& l) { return {l.in.c, l.out.c}; }

}  // namespace

const OpDef& DenseOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kDense;
    d.name = "dense";
    d.takes_activation = true;
    d.read = Read;
    d.write = Write;
    d.weight_shape = WeightShape;
    d.infer = Infer;
    d.macs = Macs;
    d.forward = Forward;
    d.backward = Backward;
    d.int8 = Int8;
    d.quantize = Quantize;
    d.bf16 = Bf16Multiplied;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
