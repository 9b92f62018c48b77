// See convnet_reference.h.
#include "host/train/convnet_reference.h"

#include "host/common/errors.h"
#include "host/train/graph_reference.h"

namespace tpu::train {

using nn::LayerType;

void CheckConvNetShape(const nn::Model& m) {
  const std::vector<LayerType> want = {LayerType::kConv2d, LayerType::kAvgPool2d,
                                       LayerType::kConv2d, LayerType::kAvgPool2d,
                                       LayerType::kFlatten};
  bool ok = m.layers.size() > want.size() && m.input.c == 1;
  for (size_t i = 0; ok && i < m.layers.size(); ++i) {
    const nn::Layer& l = m.layers[i];
    const bool last = i + 1 == m.layers.size();
    ok = l.type == (i < want.size() ? want[i] : LayerType::kDense);
    // What the CNN's step computes: valid convolutions of stride 1 and hidden dense layers,
    // each with its ReLU; 2 x 2 average poolings of stride 2 (conv_step.cc).
    if (l.type == LayerType::kConv2d || (l.type == LayerType::kDense && !last))
      ok = ok && l.activation == nn::Activation::kRelu;
    if (l.type == LayerType::kConv2d) ok = ok && l.stride == 1 && !l.Padded() && !l.depthwise;
    if (l.type == LayerType::kAvgPool2d)
      ok = ok && !l.global_pool && !l.Padded() && l.pool_h == 2 && l.pool_w == 2 &&
           l.pool_stride == 2;
  }
  if (!ok) {
    throw UsageError("model '" + m.name +
                     "': the chip's convolutional reference takes valid convolutions of stride "
                     "1 with ReLU, 2 x 2 average poolings of stride 2, a flatten and dense layers "
                     "with ReLU on one input channel (the course material's CNN)");
  }
}

ConvNetGradients ReferenceConvNetGradients(const nn::Model& model, const uint8_t* pixels,
                                           const uint8_t* labels, int batch, int n) {
  CheckConvNetShape(model);
  Batch b;
  for (int64_t i = 0; i < batch * model.input.Size(); ++i)
    b.x.push_back(static_cast<float>(pixels[i]) / 255.0f);
  b.labels.assign(labels, labels + batch);
  return ReferenceConvNetGradients(model, b, batch, n);
}

ConvNetGradients ReferenceConvNetGradients(const nn::Model& model, const Batch& b, int batch, int n,
                                           int total) {
  CheckConvNetShape(model);
  return ReferenceGraphGradients(model, b, batch, n, total);
}

}  // namespace tpu::train
