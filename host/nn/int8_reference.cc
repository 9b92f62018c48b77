// The scalar int8 reference (see int8_reference.h).
#include "host/nn/int8_reference.h"

#include <stdexcept>

#include "arith/int8.h"
#include "host/nn/ops/op.h"

namespace tpu::nn {

std::vector<std::vector<int8_t>> ReferenceInt8(const Model& m, const int8_t* input) {
  if (!m.quantized) throw std::invalid_argument("ReferenceInt8: the model is not quantized");
  const std::vector<int8_t> x0(input, input + m.input.Size());
  std::vector<std::vector<int8_t>> outs;
  // What input `in` (a layer, or the model's input) produced.
  auto out_of = [&](int in) -> const std::vector<int8_t>& {
    return in == kModelInput ? x0 : outs[static_cast<size_t>(in)];
  };
  for (const Layer& l : m.layers) {
    std::vector<const int8_t*> xs;
    std::vector<int> channels;
    for (int k : l.inputs) {
      xs.push_back(out_of(k).data());
      channels.push_back(m.OutputOf(k).c);
    }
    std::vector<int8_t> y(static_cast<size_t>(l.out.Size()));
    ops::Op(l.type).int8(l, xs, channels, y.data());
    outs.push_back(std::move(y));
  }
  return outs;
}

std::vector<std::vector<int8_t>> ReferenceInt8(const Model& m, const uint8_t* pixels) {
  std::vector<int8_t> x(static_cast<size_t>(m.input.Size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = arith::QuantizePixel(pixels[i]);
  return ReferenceInt8(m, x.data());
}

}  // namespace tpu::nn
