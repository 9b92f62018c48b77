// The bfloat16 network reference (see bf16_net.h, docs/bf16.md).
#include "host/nn/bf16_net.h"

#include "arith/bf16.h"
#include "host/nn/ops/op.h"

namespace tpu::nn {

Bf16Net::Bf16Net(const Model& model, int array_dim) : model_(model) {
  const std::vector<std::vector<int>> consumers = model.Consumers();
  for (size_t i = 0; i < model.layers.size(); ++i) {
    ops::Bf16Layer p;
    p.layer = &model.layers[i];
    p.array_dim = array_dim;
    p.fused = FusedPool(model, consumers, i);
    const ops::OpDef& op = ops::Op(p.layer->type);
    if (op.bf16_prepare) {
      op.bf16_prepare(&p);
    } else {
      ops::Bf16RoundWeights(&p);
    }
    layers_.push_back(std::move(p));
  }
}

std::vector<std::vector<uint16_t>> Bf16Net::Forward(const float* input) const {
  std::vector<uint16_t> x(static_cast<size_t>(model_.input.Size()));
  for (size_t j = 0; j < x.size(); ++j) x[j] = arith::Bf16OfFp32(arith::BitsOfFloat(input[j]));
  std::vector<std::vector<uint16_t>> outs;
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const Layer& l = model_.layers[i];
    std::vector<const std::vector<uint16_t>*> ins;
    if (l.inputs.empty()) ins.push_back(i == 0 ? &x : &outs[i - 1]);
    for (int from : l.inputs)
      ins.push_back(from == kModelInput ? &x : &outs[static_cast<size_t>(from)]);
    outs.push_back(ops::Op(l.type).bf16(layers_[i], ins));
  }
  return outs;
}

NonFinite FirstNonFinite(const std::vector<std::vector<uint16_t>>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < outputs[i].size(); ++j)
      if ((outputs[i][j] & 0x7f80u) == 0x7f80u)
        return {static_cast<int>(i), static_cast<int64_t>(j)};
  return {};
}

int ArgMaxBf16(const std::vector<uint16_t>& values) {
  int best = -1;
  float best_v = 0;
  for (size_t j = 0; j < values.size(); ++j) {
    const float v = arith::FloatOfBits(arith::Fp32OfBf16(values[j]));
    if (v != v) continue;  // NaN
    if (best < 0 || v > best_v) {
      best = static_cast<int>(j);
      best_v = v;
    }
  }
  return best < 0 ? 0 : best;
}

}  // namespace tpu::nn
