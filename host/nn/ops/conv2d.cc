// A 2-D convolution (and a depthwise one, held as the equivalent convolution: model.h).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/nn/im2col.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"

namespace tpu::nn::ops {
namespace {

using MapF = Eigen::Map<MatrixF>;
using ConstMapF = Eigen::Map<const MatrixF>;

// The padding (valid, same or explicit) and the output map.
void Infer(const Model& /*m*/, const std::string& where, Layer* l_ptr) {
  Layer& l = *l_ptr;
  const Shape3 cur = l.in;
  if (l.kernel_h < 1 || l.kernel_w < 1 || l.stride < 1 || l.kernel_h > 1024 || l.kernel_w > 1024 ||
      l.stride > 64) {
    throw UsageError(where + ": kernel must be 1..1024 and stride 1..64");
  }
  if (l.depthwise) l.out.c = cur.c;  // one filter per input channel
  if (l.padding == "valid") {
    l.pad_top = l.pad_left = l.pad_bottom = l.pad_right = 0;
  } else if (l.padding == "same") {
    const int oh = (cur.h + l.stride - 1) / l.stride;
    const int ow = (cur.w + l.stride - 1) / l.stride;
    const int pad_h = std::max(0, (oh - 1) * l.stride + l.kernel_h - cur.h);
    const int pad_w = std::max(0, (ow - 1) * l.stride + l.kernel_w - cur.w);
    l.pad_top = pad_h / 2;  // as TensorFlow: the extra row/column goes bottom/right
    l.pad_left = pad_w / 2;
    l.pad_bottom = pad_h - l.pad_top;
    l.pad_right = pad_w - l.pad_left;
  } else if (l.padding == "explicit") {
    for (int p : {l.pad_top, l.pad_left, l.pad_bottom, l.pad_right}) {
      if (p < 0 || p > 1024) throw UsageError(where + ": padding must lie in 0..1024");
    }
  } else {
    throw UsageError(where + ": padding '" + l.padding +
                     "' is not 'valid', 'same' or [top, left, bottom, right]");
  }
  const int64_t ph = int64_t{cur.h} + l.pad_top + l.pad_bottom - l.kernel_h;
  const int64_t pw = int64_t{cur.w} + l.pad_left + l.pad_right - l.kernel_w;
  l.out.h = ph < 0 ? 0 : static_cast<int>(ph / l.stride + 1);
  l.out.w = pw < 0 ? 0 : static_cast<int>(pw / l.stride + 1);
  if (l.out.h < 1 || l.out.w < 1) {
    throw UsageError(where + ": a " + std::to_string(l.kernel_h) + " x " +
                     std::to_string(l.kernel_w) + " kernel does not fit a " +
                     std::to_string(cur.h) + " x " + std::to_string(cur.w) + " input");
  }
}

int64_t Macs(const Layer& l) {
  return int64_t{l.out.h} * l.out.w * l.out.c * l.kernel_h * l.kernel_w *
         (l.depthwise ? 1 : l.in.c);
}

// im2col rows times the weights, plus the bias. Without `cols` (inference) a few images at a
// time, so that the rows of a large map are never all held.
void Forward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* cols, MatrixF* out) {
  const MatrixF& in = *xs[0];
  const int64_t batch = in.rows();
  const auto bias = Eigen::Map<const Eigen::RowVectorXf>(l.bias.data.data(), l.out.c);
  if (cols == nullptr) {
    out->resize(batch, l.out.Size());
    const int64_t per = std::max<int64_t>(
        1, (int64_t{1} << 22) /
               std::max<int64_t>(1, l.out.Size() / l.out.c * l.kernel_h * l.kernel_w * l.in.c));
    for (int64_t b = 0; b < batch; b += per) {
      const int64_t n = std::min(per, batch - b);
      MatrixF y = Im2Col<float>(l, MatrixF(in.middleRows(b, n))) * WeightMatrix(l);
      y.rowwise() += bias;
      out->middleRows(b, n) = MapF(y.data(), n, l.out.Size());
    }
    return;
  }
  *cols = Im2Col<float>(l, in);
  MatrixF y = *cols * WeightMatrix(l);
  y.rowwise() += bias;
  *out = MapF(y.data(), batch, l.out.Size());
}

// dW = cols^T dY, db = the column sums of dY, dX = col2im(dY W^T). A depthwise layer's
// expanded kernels keep their zeros: only the diagonal (input channel = output channel) of
// each tap takes a gradient, so its weights stay a depthwise kernel's.
void Backward(const Layer& l, const BackwardStep& s) {
  const int64_t batch = s.dy.rows();
  ConstMapF dy(s.dy.data(), batch * l.out.h * l.out.w, l.out.c);
  MapF dw(s.dw->data(), WeightMatrix(l).rows(), l.out.c);
  if (l.depthwise) {
    const MatrixF full = s.cols->transpose() * dy;
    for (int64_t r = 0; r < full.rows(); ++r) dw(r, r % l.in.c) += full(r, r % l.in.c);
  } else {
    dw.noalias() += s.cols->transpose() * dy;
  }
  Eigen::Map<Eigen::RowVectorXf>(s.db->data(), l.out.c) += dy.colwise().sum();
  if (s.dx[0] == nullptr) return;
  const MatrixF dcols = dy * WeightMatrix(l).transpose();
  *s.dx[0] = MatrixF::Zero(batch, l.in.Size());
  Col2Im<float>(l, dcols, s.dx[0]);
}

// The int8 rule, one multiply-add at a time: acc = bias + the window's products (the padding
// zeros), requantized per output channel, clamped at zero with ReLU or ReLU6.
void Int8(const Layer& l, const std::vector<const int8_t*>& xs,
          const std::vector<int>& /*channels*/, int8_t* y) {
  const int8_t* x = xs[0];
  const int32_t lo = ClampsAtZero(l.activation) ? 0 : -128;
  auto at = [&](int h, int w, int c) { return x[(size_t(h) * l.in.w + w) * l.in.c + c]; };
  for (int oh = 0; oh < l.out.h; ++oh)
    for (int ow = 0; ow < l.out.w; ++ow)
      for (int oc = 0; oc < l.out.c; ++oc) {
        int32_t acc = l.q.bias.data[oc];
        for (int kh = 0; kh < l.kernel_h; ++kh)
          for (int kw = 0; kw < l.kernel_w; ++kw)
            for (int ic = 0; ic < l.in.c; ++ic) {
              const int ih = oh * l.stride + kh - l.pad_top;
              const int iw = ow * l.stride + kw - l.pad_left;
              if (ih < 0 || ih >= l.in.h || iw < 0 || iw >= l.in.w) continue;  // zero pad
              const int8_t w =
                  l.q.weights.data[((size_t(kh) * l.kernel_w + kw) * l.in.c + ic) * l.out.c + oc];
              acc += int32_t{at(ih, iw, ic)} * w;
            }
        y[(size_t(oh) * l.out.w + ow) * l.out.c + oc] =
            arith::Requantize(acc, l.q.multiplier[oc], l.q.shift[oc], lo);
      }
}

float Quantize(Layer* l, const std::vector<float>& in_scales, float range) {
  return QuantizeWeighted(l, in_scales[0], range);
}

// model.json: "filters" (a depthwise one has its input's), "kernel": [h, w], "stride",
// "padding": "valid", "same" or [top, left, bottom, right].
void Read(const nlohmann::json& lj, const std::string& where, Layer* l) {
  const auto k = lj.at("kernel").get<std::vector<int>>();
  if (k.size() != 2) throw UsageError(where + ": kernel must be [h, w]");
  l->kernel_h = k[0];
  l->kernel_w = k[1];
  l->stride = lj.value("stride", 1);
  const nlohmann::json pad = lj.value("padding", nlohmann::json("valid"));
  if (pad.is_array()) {
    ReadExplicitPadding(pad, where, l);
  } else {
    l->padding = pad.get<std::string>();
    if (l->padding == "explicit") throw UsageError(where + ": padding 'explicit' is a list");
  }
  if (!l->depthwise) l->out.c = lj.at("filters").get<int>();
}

void Write(const Layer& l, nlohmann::json* lj) {
  if (!l.depthwise) (*lj)["filters"] = l.out.c;
  (*lj)["kernel"] = {l.kernel_h, l.kernel_w};
  (*lj)["stride"] = l.stride;
  if (l.padding == "explicit") {
    (*lj)["padding"] = {l.pad_top, l.pad_left, l.pad_bottom, l.pad_right};
  } else {
    (*lj)["padding"] = l.padding;
  }
}

// kh x kw x c_in x c_out (a depthwise one: one kernel per channel, c_out 1).
std::vector<int64_t> WeightShape(const Layer& l) {
  return {l.kernel_h, l.kernel_w, l.in.c, l.depthwise ? 1 : l.out.c};
}

}  // namespace

const OpDef& Conv2dOp() {
  static const OpDef op = [] {
    OpDef d;
    d.type = LayerType::kConv2d;
    d.name = "conv2d";
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
