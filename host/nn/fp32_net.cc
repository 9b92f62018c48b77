// fp32 forward and backward passes (see fp32_net.h).
#include "host/nn/fp32_net.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "host/nn/ops/op.h"

namespace tpu::nn {
namespace {

// The activation after the operation, in place.
void Activate(Activation a, MatrixF* out) {
  if (a == Activation::kRelu) {
    *out = out->cwiseMax(0.0f);
  } else if (a == Activation::kRelu6) {
    *out = out->cwiseMax(0.0f).cwiseMin(6.0f);
  } else if (a == Activation::kSoftmax) {
    for (int64_t b = 0; b < out->rows(); ++b) {
      auto row = out->row(b);
      const float mx = row.maxCoeff();
      row = (row.array() - mx).exp();
      row /= row.sum();
    }
  }
}

// The activation's mask on the gradient by its output y (ReLU's and ReLU6's; softmax's
// gradient is the loss's, Backward).
void MaskActivation(Activation a, const MatrixF& y, MatrixF* grad) {
  if (a == Activation::kRelu) *grad = grad->cwiseProduct((y.array() > 0.0f).cast<float>().matrix());
  if (a == Activation::kRelu6)
    *grad = grad->cwiseProduct(((y.array() > 0.0f) && (y.array() < 6.0f)).cast<float>().matrix());
}

// Layer i's backward pass from the gradient of its output (grads[i + 1]; a layer nothing
// reads has none and passes nothing on), its inputs' gradients added into theirs (the
// model's input takes none).
void BackwardLayer(const Model& m, const ForwardCache& cache, size_t i, std::vector<MatrixF>* grads,
                   ParamSet* g) {
  const Layer& l = m.layers[i];
  MatrixF grad = std::move((*grads)[i + 1]);
  if (grad.size() == 0) return;
  const ops::OpDef& op = ops::Op(l.type);
  if (op.backward == nullptr) {
    throw std::invalid_argument(std::string("Backward: ") + op.name + " layers are not trained");
  }
  MaskActivation(l.activation, cache.acts[i + 1], &grad);
  const std::vector<int> inputs =
      l.inputs.empty() ? std::vector<int>{static_cast<int>(i) - 1} : l.inputs;
  std::vector<const MatrixF*> xs;
  std::vector<MatrixF> dxs(inputs.size());
  std::vector<MatrixF*> dx;
  for (size_t k = 0; k < inputs.size(); ++k) {
    xs.push_back(&cache.acts[static_cast<size_t>(inputs[k] + 1)]);
    dx.push_back(inputs[k] == kModelInput ? nullptr : &dxs[k]);
  }
  op.backward(l, {xs, cache.acts[i + 1], &cache.cols[i], grad, &g->w[i], &g->b[i], dx});
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k] == kModelInput) continue;
    MatrixF& sum = (*grads)[static_cast<size_t>(inputs[k] + 1)];
    if (sum.size() == 0) {
      sum = std::move(dxs[k]);
    } else {
      sum += dxs[k];
    }
  }
}

}  // namespace

ParamSet ParamSet::ZerosLike(const Model& m) {
  ParamSet p;
  for (const Layer& l : m.layers) {
    p.w.emplace_back(l.weights.data.size(), 0.0f);
    p.b.emplace_back(l.bias.data.size(), 0.0f);
  }
  return p;
}

void ParamSet::SetZero() {
  for (auto& v : w) std::fill(v.begin(), v.end(), 0.0f);
  for (auto& v : b) std::fill(v.begin(), v.end(), 0.0f);
}

void ParamSet::Add(const ParamSet& o) {
  for (size_t i = 0; i < w.size(); ++i) {
    for (size_t k = 0; k < w[i].size(); ++k) w[i][k] += o.w[i][k];
    for (size_t k = 0; k < b[i].size(); ++k) b[i][k] += o.b[i][k];
  }
}

MatrixF Fp32Input(const uint8_t* pixels, int64_t count, const Shape3& shape) {
  MatrixF x(count, shape.Size());
  for (int64_t i = 0; i < count * shape.Size(); ++i) x.data()[i] = pixels[i] / 255.0f;
  return x;
}

void Forward(const Model& m, const MatrixF& x, ForwardCache* cache) {
  const size_t n = m.layers.size();
  cache->acts.resize(n + 1);
  cache->cols.resize(n);
  cache->acts[0] = x;
  // acts[in + 1] is what input `in` (a layer, or kModelInput = -1) produced.
  auto act = [&](int in) -> const MatrixF& { return cache->acts[static_cast<size_t>(in + 1)]; };
  for (size_t i = 0; i < n; ++i) {
    const Layer& l = m.layers[i];
    std::vector<const MatrixF*> xs;
    if (l.inputs.empty()) xs.push_back(&act(static_cast<int>(i) - 1));
    for (int k : l.inputs) xs.push_back(&act(k));
    MatrixF& out = cache->acts[i + 1];
    const ops::OpDef& op = ops::Op(l.type);
    MatrixF* cols = cache->keep_cols ? &cache->cols[i] : nullptr;
    if (cache->training && op.train_forward) {
      op.train_forward(l, xs, &cache->cols[i], &out);
    } else {
      op.forward(l, xs, cols, &out);
    }
    Activate(l.activation, &out);
  }
}

double Backward(const Model& m, const ForwardCache& cache, const uint8_t* labels, ParamSet* g) {
  const size_t n = m.layers.size();
  if (m.layers.back().activation != Activation::kSoftmax) {
    throw std::invalid_argument("Backward: the last layer must end in softmax");
  }
  const MatrixF& probs = cache.acts[n];
  const int64_t batch = probs.rows();
  double loss = 0;
  // grads[k + 1]: the loss's gradient by what input k (a layer, or kModelInput) produced,
  // summed over the layers that read it; empty until one does. d(mean cross-entropy) /
  // d(logits) = (p - onehot) / batch.
  std::vector<MatrixF> grads(n + 1);
  MatrixF& top = grads[n];
  top = probs;
  for (int64_t b = 0; b < batch; ++b) {
    loss -= std::log(std::max(probs(b, labels[b]), 1e-12f));
    top(b, labels[b]) -= 1.0f;
  }
  top /= static_cast<float>(batch);
  for (size_t i = n; i-- > 0;) BackwardLayer(m, cache, i, &grads, g);
  return loss / static_cast<double>(batch);
}

bool TrainsByBatch(const Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const Layer& l) { return ops::Op(l.type).train_forward != nullptr; });
}

void UpdateState(Model* m, const ForwardCache& cache) {
  for (size_t i = 0; i < m->layers.size(); ++i) {
    Layer& l = m->layers[i];
    const auto update = ops::Op(l.type).update_state;
    if (update && i < cache.cols.size() && cache.cols[i].size() != 0) update(&l, cache.cols[i]);
  }
}

std::vector<int> ArgMax(const MatrixF& p) {
  std::vector<int> out(static_cast<size_t>(p.rows()));
  for (int64_t b = 0; b < p.rows(); ++b) p.row(b).maxCoeff(&out[static_cast<size_t>(b)]);
  return out;
}

}  // namespace tpu::nn
