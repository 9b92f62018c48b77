// The logistic sigmoid and the hyperbolic tangent of a map, value by value: the vector
// unit's function tables (docs/vpu.md), as an LSTM cell's gates take them.
#include <fmt/format.h>

#include <cmath>

#include "arith/format.h"
#include "arith/vpu_tables.h"
#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

// A table's fixed scales (contract/tpu_contract.toml): its int8 input q stands for
// q / input_step, and its output for value / output_scale.
struct Table {
  arith::VpuFunction fn;
  int input_step, output_scale;
};

Table TableOf(const Layer& l) {
  if (l.type == LayerType::kSigmoid)
    return {arith::VpuFunction::kSigmoid, hw::kVpuTableSigmoidInputStep,
            hw::kVpuTableSigmoidOutputScale};
  return {arith::VpuFunction::kTanh, hw::kVpuTableTanhInputStep, hw::kVpuTableTanhOutputScale};
}

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) { l->out = l->in; }

void ForwardSigmoid(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                    MatrixF* out) {
  *out = xs[0]->unaryExpr([](float v) { return 1.0f / (1.0f + std::exp(-v)); });
}

void ForwardTanh(const Layer& /*l*/, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                 MatrixF* out) {
  *out = xs[0]->unaryExpr([](float v) { return std::tanh(v); });
}

// d sigmoid = y (1 - y); d tanh = 1 - y^2, from the output y.
void BackwardSigmoid(const Layer& /*l*/, const BackwardStep& s) {
  if (s.dx[0]) *s.dx[0] = s.dy.cwiseProduct(s.y.cwiseProduct((1.0f - s.y.array()).matrix()));
}

void BackwardTanh(const Layer& /*l*/, const BackwardStep& s) {
  if (s.dx[0]) *s.dx[0] = s.dy.cwiseProduct((1.0f - s.y.array().square()).matrix());
}

// The int8 rule: each value requantized to the table's input step (multiplier and shift of
// the layer's int8 form) and looked up, as the vector unit's activate fn= does.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const arith::Int8Format::Channel c{0, l.q.multiplier[0], l.q.shift[0]};
  const arith::VpuFunction fn = TableOf(l).fn;
  for (int64_t i = 0; i < l.out.Size(); ++i)
    y[i] = arith::Int8Format::Activate(xs[0][i], c, false, fn);
}

// The output's scale is the table's (1 / output_scale); the input's values go to the table's
// input step: one multiplier and shift for s_x x input_step.
float Quantize(Layer* l, const std::vector<float>& in_scales, float /*range*/) {
  const Table t = TableOf(*l);
  QuantizedLayer& q = l->q;
  q.input_scales = in_scales;
  q.output_scale = 1.0f / static_cast<float>(t.output_scale);
  q.multiplier.assign(1, 0);
  q.shift.assign(1, 62);
  QuantizeMultiplier(double{in_scales[0]} * t.input_step, &q.multiplier[0], &q.shift[0]);
  l->quantized = true;
  return q.output_scale;
}

[[noreturn]] void RefuseBf16(const Layer& l) {
  throw UsageError(fmt::format(
      "{} '{}' runs on int8 chips only: a bf16 chip's vector unit has no function tables "
      "(docs/vpu.md)",
      l.TypeName(), l.name));
}

void Bf16Prepare(Bf16Layer* p) { RefuseBf16(*p->layer); }

Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& /*xs*/) {
  RefuseBf16(*p.layer);
}

OpDef TableOp(LayerType type, const char* name) {
  OpDef d;
  d.type = type;
  d.name = name;
  d.version = GraphVersion;
  d.read_int8 = ReadOneShiftInt8;
  d.write_int8 = WriteJoinInt8;
  d.infer = Infer;
  d.macs = NoMacs;
  d.int8 = Int8;
  d.quantize = Quantize;
  d.bf16_prepare = Bf16Prepare;
  d.bf16 = Bf16;
  return d;
}

}  // namespace

const OpDef& SigmoidOp() {
  static const OpDef op = [] {
    OpDef d = TableOp(LayerType::kSigmoid, "sigmoid");
    d.forward = ForwardSigmoid;
    d.backward = BackwardSigmoid;
    return d;
  }();
  return op;
}

const OpDef& TanhOp() {
  static const OpDef op = [] {
    OpDef d = TableOp(LayerType::kTanh, "tanh");
    d.forward = ForwardTanh;
    d.backward = BackwardTanh;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
