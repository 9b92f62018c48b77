// Batch normalization (PyTorch's BatchNorm1d/2d) as a layer of its own, for training: per
// channel, y = gamma (x - mean) / sqrt(var + epsilon) + beta, over the batch's statistics in
// training (the mean and biased variance of the channel's values over the batch's images
// and pixels) and over the running ones otherwise. Its weights are gamma, its bias beta, its
// state the running mean and variance. The chips run it folded into the layer before it
// (nn::FoldBatchNorms); docs/training.md, "Batch normalization".
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/op.h"

namespace tpu::nn::ops {
namespace {

using RowF = Eigen::Matrix<float, 1, Eigen::Dynamic>;

// The rows of `kept`: the batch's mean, 1 / sqrt(biased variance + epsilon), and the unbiased
// variance (the running variance's update, as PyTorch's).
enum KeptRow { kMean, kInvStd, kUnbiased, kKeptRows };

// x's values of one channel c are columns c, c + C, c + 2 C, ... of every row.
template <typename Fn>
void ForEachValue(int64_t rows, int64_t cols, int channels, Fn fn) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) fn(r, k, static_cast<int>(k % channels));
}

// out = (x - mean) * scale * gamma + beta, channel by channel.
void Normalize(const Layer& l, const MatrixF& x, const RowF& mean, const RowF& scale,
               MatrixF* out) {
  out->resize(x.rows(), x.cols());
  ForEachValue(x.rows(), x.cols(), l.out.c, [&](int64_t r, int64_t k, int c) {
    (*out)(r, k) = (x(r, k) - mean[c]) * scale[c] * l.weights.data[c] + l.bias.data[c];
  });
}

void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
             MatrixF* out) {
  const int c = l.out.c;
  RowF mean(c), scale(c);
  for (int k = 0; k < c; ++k) {
    mean[k] = l.state[0].data[k];
    scale[k] = 1.0f / std::sqrt(l.state[1].data[k] + l.epsilon);
  }
  Normalize(l, *xs[0], mean, scale, out);
}

// The batch's statistics, summed in double (two passes: the mean, then the squares about it).
void TrainForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* kept,
                  MatrixF* out) {
  const MatrixF& x = *xs[0];
  const int c = l.out.c;
  const double m = static_cast<double>(x.size() / c);
  std::vector<double> sum(c, 0.0), squares(c, 0.0);
  ForEachValue(x.rows(), x.cols(), c, [&](int64_t r, int64_t k, int ch) { sum[ch] += x(r, k); });
  RowF mean(c), inv(c);
  for (int k = 0; k < c; ++k) mean[k] = static_cast<float>(sum[k] / m);
  ForEachValue(x.rows(), x.cols(), c, [&](int64_t r, int64_t k, int ch) {
    const double d = double{x(r, k)} - mean[ch];
    squares[ch] += d * d;
  });
  kept->resize(kKeptRows, c);
  for (int k = 0; k < c; ++k) {
    const double var = squares[k] / m;
    inv[k] = static_cast<float>(1.0 / std::sqrt(var + l.epsilon));
    (*kept)(kMean, k) = mean[k];
    (*kept)(kInvStd, k) = inv[k];
    (*kept)(kUnbiased, k) = static_cast<float>(m > 1 ? squares[k] / (m - 1) : var);
  }
  Normalize(l, x, mean, inv, out);
}

// With x^ = (x - mean) inv and m values a channel: dbeta = sum dy, dgamma = sum dy x^,
// dx = gamma inv / m (m dy - dbeta - x^ dgamma).
void Backward(const Layer& l, const BackwardStep& s) {
  if (s.cols == nullptr || s.cols->rows() != kKeptRows) {
    throw std::invalid_argument("Backward: batch_norm '" + l.name +
                                "' needs a training forward pass (ForwardCache::training)");
  }
  const MatrixF& x = s.x();
  const MatrixF& kept = *s.cols;
  const int c = l.out.c;
  const double m = static_cast<double>(x.size() / c);
  std::vector<double> dbeta(c, 0.0), dgamma(c, 0.0);
  const auto hat = [&](int64_t r, int64_t k, int ch) {
    return (x(r, k) - kept(kMean, ch)) * kept(kInvStd, ch);
  };
  ForEachValue(x.rows(), x.cols(), c, [&](int64_t r, int64_t k, int ch) {
    dbeta[ch] += s.dy(r, k);
    dgamma[ch] += double{s.dy(r, k)} * hat(r, k, ch);
  });
  for (int k = 0; k < c; ++k) {
    (*s.dw)[k] += static_cast<float>(dgamma[k]);
    (*s.db)[k] += static_cast<float>(dbeta[k]);
  }
  if (s.dx[0] == nullptr) return;
  MatrixF& dx = *s.dx[0];
  dx.resize(x.rows(), x.cols());
  ForEachValue(x.rows(), x.cols(), c, [&](int64_t r, int64_t k, int ch) {
    const double g = double{l.weights.data[ch]} * kept(kInvStd, ch) / m;
    dx(r, k) = static_cast<float>(g * (m * s.dy(r, k) - dbeta[ch] - hat(r, k, ch) * dgamma[ch]));
  });
}

// running = (1 - momentum) running + momentum batch, for the mean and the unbiased variance.
void UpdateState(Layer* l, const MatrixF& kept) {
  for (int k = 0; k < l->out.c; ++k) {
    float& mean = l->state[0].data[k];
    float& var = l->state[1].data[k];
    mean = (1 - l->momentum) * mean + l->momentum * kept(kMean, k);
    var = (1 - l->momentum) * var + l->momentum * kept(kUnbiased, k);
  }
}

void Read(const nlohmann::json& lj, const std::string& where, Layer* l) {
  l->epsilon = lj.value("epsilon", l->epsilon);  // absent: Layer's defaults, PyTorch's
  l->momentum = lj.value("momentum", l->momentum);
  if (!(l->epsilon > 0) || !(l->momentum >= 0 && l->momentum <= 1)) {
    throw UsageError(where + ": batch_norm needs epsilon > 0 and momentum in [0, 1]");
  }
}

void Write(const Layer& l, nlohmann::json* lj) {
  (*lj)["epsilon"] = l.epsilon;
  (*lj)["momentum"] = l.momentum;
}

std::vector<int64_t> WeightShape(const Layer& l) { return {l.out.c}; }

void Infer(const Model& /*m*/, const std::string& /*where*/, Layer* l) { l->out = l->in; }

[[noreturn]] void RefuseChip(const Layer& l) { throw UsageError(BatchNormOnChip(l)); }

void Int8(const Layer& l, const std::vector<const int8_t*>& /*xs*/,
          const std::vector<int>& /*channels*/, int8_t* /*y*/) {
  RefuseChip(l);
}

float Quantize(Layer* l, const std::vector<float>& /*in_scales*/, float /*range*/) {
  RefuseChip(*l);
}

void Bf16Prepare(Bf16Layer* p) { RefuseChip(*p->layer); }

Bf16Values Bf16(const Bf16Layer& p, const std::vector<const Bf16Values*>& /*xs*/) {
  RefuseChip(*p.layer);
}

constexpr const char* kState[] = {"running_mean", "running_var", nullptr};

}  // namespace

std::string BatchNormOnChip(const Layer& l) {
  return fmt::format(
      "batch_norm '{}' is a layer for training; a chip runs it folded into the convolution "
      "or dense layer before it: tpusim model --model DIR --fold-batchnorm OUT writes that "
      "model (docs/training.md, \"Batch normalization\")",
      l.name);
}

const OpDef& BatchNormOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kBatchNorm;
    d.name = "batch_norm";
    d.takes_activation = true;
    d.read = Read;
    d.write = Write;
    d.version = GraphVersion;
    d.weight_shape = WeightShape;
    d.infer = Infer;
    d.macs = NoMacs;
    d.forward = Forward;
    d.train_forward = TrainForward;
    d.state = kState;
    d.update_state = UpdateState;
    d.backward = Backward;
    d.int8 = Int8;
    d.quantize = Quantize;
    d.bf16_prepare = Bf16Prepare;
    d.bf16 = Bf16;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops

namespace tpu::nn {

void FoldScaleShift(Layer* l, const std::vector<float>& gamma, const std::vector<float>& beta,
                    const std::vector<float>& mean, const std::vector<float>& var, float eps) {
  const int64_t cout = l->out.c, rows = l->weights.Size() / cout;
  for (int64_t c = 0; c < cout; ++c) {
    const auto ci = static_cast<size_t>(c);
    const double s = gamma[ci] / std::sqrt(double{var[ci]} + eps);
    for (int64_t r = 0; r < rows; ++r) {
      float& w = l->weights.data[static_cast<size_t>(r * cout + c)];
      w = static_cast<float>(w * s);
    }
    l->bias.data[ci] = static_cast<float>((l->bias.data[ci] - mean[ci]) * s + beta[ci]);
  }
}

namespace {

// Removes layer `gone`, whose readers read `instead`.
void RemoveLayer(Model* m, int gone, int instead) {
  m->layers.erase(m->layers.begin() + gone);
  for (Layer& l : m->layers) {
    for (int& in : l.inputs) {
      if (in == gone) in = instead;
      if (in > gone) --in;
    }
  }
}

// The index of the layer batch normalization i folds into, or UsageError saying why none.
int FoldTarget(const Model& m, const std::vector<std::vector<int>>& consumers, int i) {
  const Layer& bn = m.layers[static_cast<size_t>(i)];
  const int in = bn.inputs.empty() ? i - 1 : bn.inputs[0];
  const auto refuse = [&](const std::string& why) {
    throw UsageError(
        fmt::format("batch_norm '{}' cannot be folded: {}; a chip runs batch "
                    "normalization only folded into the convolution or dense "
                    "layer it follows (docs/training.md, \"Batch normalization\")",
                    bn.name, why));
  };
  if (in == kModelInput) refuse("it reads the model's input");
  const Layer& l = m.layers[static_cast<size_t>(in)];
  if (l.type != LayerType::kConv2d && l.type != LayerType::kDense) {
    refuse("it reads " + std::string(LayerTypeName(l.type)) + " '" + l.name + "'");
  }
  if (l.activation != Activation::kNone) {
    refuse("'" + l.name + "' has an activation before it");
  }
  if (consumers[static_cast<size_t>(in)].size() != 1) {
    refuse("another layer reads '" + l.name + "' too");
  }
  return in;
}

}  // namespace

int FoldBatchNorms(Model* m) {
  int folded = 0;
  for (size_t i = 0; i < m->layers.size();) {
    const Layer& bn = m->layers[i];
    if (bn.type != LayerType::kBatchNorm) {
      ++i;
      continue;
    }
    const int into = FoldTarget(*m, m->Consumers(), static_cast<int>(i));
    Layer& l = m->layers[static_cast<size_t>(into)];
    FoldScaleShift(&l, bn.weights.data, bn.bias.data, bn.state[0].data, bn.state[1].data,
                   bn.epsilon);
    l.activation = bn.activation;
    RemoveLayer(m, static_cast<int>(i), into);
    ++folded;
  }
  return folded;
}

}  // namespace tpu::nn
