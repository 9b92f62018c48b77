// fp32 forward and backward passes (see fp32_net.h).
#include "host/nn/fp32_net.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "host/nn/im2col.h"

namespace tpu::nn {
namespace {

using MapF = Eigen::Map<MatrixF>;
using ConstMapF = Eigen::Map<const MatrixF>;

// Conv weights kh x kw x c_in x c_out, or dense in x out, as a (fan-in x c_out) matrix.
ConstMapF WeightMatrix(const Layer& l) {
  return ConstMapF(l.weights.data.data(), l.weights.Size() / l.out.c, l.out.c);
}

// The input index of tap (i, j) of output pixel (oh, ow), channel c, of a pooling layer,
// or -1 in the padding.
int64_t PoolTap(const Layer& l, int oh, int ow, int i, int j, int c) {
  const int64_t y = int64_t{oh} * l.pool_stride + i - l.pad_top;
  const int64_t x = int64_t{ow} * l.pool_stride + j - l.pad_left;
  if (y < 0 || y >= l.in.h || x < 0 || x >= l.in.w) return -1;
  return (y * l.in.w + x) * l.in.c + c;
}

// Max pooling ignores the padding (-infinity); average pooling counts it as zeros
// (PyTorch's count_include_pad).
void Pool(const Layer& l, const MatrixF& x, MatrixF* y) {
  const bool avg = l.type == LayerType::kAvgPool2d;
  const float inv = 1.0f / static_cast<float>(l.pool_h * l.pool_w);
  for (int64_t b = 0; b < x.rows(); ++b) {
    const float* in = x.row(b).data();
    float* out = y->row(b).data();
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow)
        for (int c = 0; c < l.out.c; ++c) {
          float acc = avg ? 0.0f : -INFINITY;
          for (int i = 0; i < l.pool_h; ++i)
            for (int j = 0; j < l.pool_w; ++j) {
              const int64_t t = PoolTap(l, oh, ow, i, j, c);
              if (t < 0) continue;
              acc = avg ? acc + in[t] : std::max(acc, in[t]);
            }
          out[(int64_t{oh} * l.out.w + ow) * l.out.c + c] = avg ? acc * inv : acc;
        }
  }
}

// Channel concatenation: each pixel's channels of input 0, then of input 1, ...
void Concat(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* y) {
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

void PoolBackward(const Layer& l, const MatrixF& x, const MatrixF& y, const MatrixF& dy,
                  MatrixF* dx) {
  const bool avg = l.type == LayerType::kAvgPool2d;
  const float inv = 1.0f / static_cast<float>(l.pool_h * l.pool_w);
  dx->setZero();
  for (int64_t b = 0; b < x.rows(); ++b)
    for (int oh = 0; oh < l.out.h; ++oh)
      for (int ow = 0; ow < l.out.w; ++ow)
        for (int c = 0; c < l.out.c; ++c) {
          const int64_t o = (int64_t{oh} * l.out.w + ow) * l.out.c + c;
          bool routed = false;
          for (int i = 0; i < l.pool_h; ++i)
            for (int j = 0; j < l.pool_w; ++j) {
              const int64_t in = PoolTap(l, oh, ow, i, j, c);
              if (in < 0) continue;  // padding
              if (avg) {
                (*dx)(b, in) += dy(b, o) * inv;
              } else if (!routed && x(b, in) == y(b, o)) {  // the first maximum takes it all
                (*dx)(b, in) += dy(b, o);
                routed = true;
              }
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
  const int64_t batch = x.rows();
  // acts[in + 1] is what input `in` (a layer, or kModelInput = -1) produced.
  auto act = [&](int in) -> const MatrixF& { return cache->acts[static_cast<size_t>(in + 1)]; };
  for (size_t i = 0; i < n; ++i) {
    const Layer& l = m.layers[i];
    const MatrixF& in = act(l.inputs.empty() ? static_cast<int>(i) - 1 : l.inputs[0]);
    MatrixF& out = cache->acts[i + 1];
    switch (l.type) {
      case LayerType::kConv2d: {
        if (!cache->keep_cols) {  // inference: a few images at a time, small windows
          out.resize(batch, l.out.Size());
          const int64_t per = std::max<int64_t>(
              1, (int64_t{1} << 22) / std::max<int64_t>(1, l.out.Size() / l.out.c * l.kernel_h *
                                                               l.kernel_w * l.in.c));
          for (int64_t b = 0; b < batch; b += per) {
            const int64_t n = std::min(per, batch - b);
            MatrixF y = Im2Col<float>(l, MatrixF(in.middleRows(b, n))) * WeightMatrix(l);
            y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(l.bias.data.data(), l.out.c);
            out.middleRows(b, n) = MapF(y.data(), n, l.out.Size());
          }
          break;
        }
        cache->cols[i] = Im2Col<float>(l, in);
        MatrixF y = cache->cols[i] * WeightMatrix(l);
        y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(l.bias.data.data(), l.out.c);
        out = MapF(y.data(), batch, l.out.Size());
        break;
      }
      case LayerType::kDense:
        out = in * WeightMatrix(l);
        out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(l.bias.data.data(), l.out.c);
        break;
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        out.resize(batch, l.out.Size());
        Pool(l, in, &out);
        break;
      case LayerType::kFlatten:
        out = in;
        break;
      case LayerType::kAdd:
        out = in + act(l.inputs[1]);
        break;
      case LayerType::kConcat: {
        std::vector<const MatrixF*> xs;
        for (int k : l.inputs) xs.push_back(&act(k));
        Concat(l, xs, &out);
        break;
      }
    }
    if (l.activation == Activation::kRelu) {
      out = out.cwiseMax(0.0f);
    } else if (l.activation == Activation::kRelu6) {
      out = out.cwiseMax(0.0f).cwiseMin(6.0f);
    } else if (l.activation == Activation::kSoftmax) {
      for (int64_t b = 0; b < batch; ++b) {
        auto row = out.row(b);
        const float mx = row.maxCoeff();
        row = (row.array() - mx).exp();
        row /= row.sum();
      }
    }
  }
}

double Backward(const Model& m, const ForwardCache& cache, const uint8_t* labels, ParamSet* g) {
  const size_t n = m.layers.size();
  if (m.layers.back().activation != Activation::kSoftmax) {
    throw std::invalid_argument("Backward: the last layer must end in softmax");
  }
  if (m.IsGraph()) throw std::invalid_argument("Backward: graphs are not trained, only chains");
  const MatrixF& probs = cache.acts[n];
  const int64_t batch = probs.rows();
  double loss = 0;
  // d(mean cross-entropy)/d(logits) = (p - onehot) / batch
  MatrixF grad = probs;
  for (int64_t b = 0; b < batch; ++b) {
    loss -= std::log(std::max(probs(b, labels[b]), 1e-12f));
    grad(b, labels[b]) -= 1.0f;
  }
  grad /= static_cast<float>(batch);
  for (size_t i = n; i-- > 0;) {
    const Layer& l = m.layers[i];
    const MatrixF& in = cache.acts[i];
    const MatrixF& out = cache.acts[i + 1];
    if (l.depthwise) throw std::invalid_argument("Backward: depthwise layers are not trained");
    if (l.activation == Activation::kRelu)
      grad = grad.cwiseProduct((out.array() > 0.0f).cast<float>().matrix());
    if (l.activation == Activation::kRelu6)
      grad =
          grad.cwiseProduct(((out.array() > 0.0f) && (out.array() < 6.0f)).cast<float>().matrix());
    const bool need_dx = i > 0;
    MatrixF dx;
    switch (l.type) {
      case LayerType::kConv2d: {
        ConstMapF dy(grad.data(), batch * l.out.h * l.out.w, l.out.c);
        MapF dw(g->w[i].data(), WeightMatrix(l).rows(), l.out.c);
        dw.noalias() += cache.cols[i].transpose() * dy;
        Eigen::Map<Eigen::RowVectorXf>(g->b[i].data(), l.out.c) += dy.colwise().sum();
        if (need_dx) {
          const MatrixF dcols = dy * WeightMatrix(l).transpose();
          dx = MatrixF::Zero(batch, l.in.Size());
          Col2Im<float>(l, dcols, &dx);
        }
        break;
      }
      case LayerType::kDense: {
        MapF dw(g->w[i].data(), l.in.c, l.out.c);
        dw.noalias() += in.transpose() * grad;
        Eigen::Map<Eigen::RowVectorXf>(g->b[i].data(), l.out.c) += grad.colwise().sum();
        if (need_dx) dx = grad * WeightMatrix(l).transpose();
        break;
      }
      case LayerType::kAvgPool2d:
      case LayerType::kMaxPool2d:
        dx.resize(batch, l.in.Size());
        PoolBackward(l, in, out, grad, &dx);
        break;
      case LayerType::kFlatten:
        dx = grad;
        break;
      case LayerType::kAdd:
      case LayerType::kConcat:
        throw std::invalid_argument("Backward: add and concat layers are not trained");
    }
    if (need_dx) grad.swap(dx);
  }
  return loss / static_cast<double>(batch);
}

std::vector<int> ArgMax(const MatrixF& p) {
  std::vector<int> out(static_cast<size_t>(p.rows()));
  for (int64_t b = 0; b < p.rows(); ++b) p.row(b).maxCoeff(&out[static_cast<size_t>(b)]);
  return out;
}

}  // namespace tpu::nn
