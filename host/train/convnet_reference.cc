// See convnet_reference.h.
#include "host/train/convnet_reference.h"

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/train/conv_reference.h"
#include "host/train/dense_model.h"
#include "host/train/dense_reference.h"
#include "host/train/step_arith.h"

namespace tpu::train {
namespace {

using chip::Half;
using nn::LayerType;

uint16_t Bf16OfFloat(float v) { return arith::Bf16OfFp32(arith::BitsOfFloat(v)); }
float FloatOfBf16(uint16_t v) { return arith::FloatOfBits(arith::Fp32OfBf16(v)); }

// A layer's weights then its bias as rows of the array's tile, in bfloat16 (vector
// op=copy of the float32 master weights): in + 1 rows of `out` lanes.
Half TileRows(const nn::Layer& l) {
  Half rows;
  for (float v : l.weights.data) rows.push_back(Bf16OfFloat(v));
  for (float v : l.bias.data) rows.push_back(Bf16OfFloat(v));
  return rows;
}

// Where the ReLU passed its value on.
std::vector<uint8_t> On(const Half& relu_out) {
  std::vector<uint8_t> on(relu_out.size());
  for (size_t i = 0; i < on.size(); ++i)
    on[i] = !arith::Fp32Equal(arith::Fp32OfBf16(relu_out[i]), 0);
  return on;
}

// Where the ReLU gave 0, the gradient is 0.
Half Masked(const Half& grad, const Half& relu_out) {
  Half out(grad.size());
  for (size_t i = 0; i < grad.size(); ++i)
    out[i] = arith::Fp32Equal(arith::Fp32OfBf16(relu_out[i]), 0) ? 0 : grad[i];
  return out;
}

// Rows of `cols` values with a last column of 1 (the bias lane): rows x (cols + 1).
Half WithOnes(const Half& x, int64_t rows, int64_t cols) {
  Half out;
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
    out.push_back(Bf16OfFloat(1.0f));
  }
  return out;
}

struct Conv {
  Half f, h;  // receptive fields (with the bias lane), the ReLU's output
  MapShape out;
};

// A valid 3 x 3 (any kernel) convolution with ReLU: F times its tile.
Conv ConvForward(const Half& maps, const MapShape& m, const nn::Layer& l, int n) {
  WindowShape w;
  w.kh = l.kernel_h;
  w.kw = l.kernel_w;
  w.out_h = m.h - l.kernel_h + 1;
  w.out_w = m.w - l.kernel_w + 1;
  Conv c;
  c.out = {m.images, w.out_h, w.out_w, l.out.c};
  c.f = ReceptiveFields(maps, m, w);
  const int64_t pixels = int64_t{m.images} * w.out_h * w.out_w, k = w.Lanes(m.c) + 1;
  c.h = chip::Activate(chip::Product(c.f, TileRows(l), pixels, k, l.out.c, n), true);
  return c;
}

// Its weight gradient (from dWᵀ, outs x (ins + 1)) into the layer's layout, rows of `ins`
// then the bias.
void PutGradient(const Half& gt, int ins, int outs, std::vector<float>* w, std::vector<float>* b) {
  w->assign(static_cast<size_t>(ins) * outs, 0);
  b->assign(static_cast<size_t>(outs), 0);
  for (int o = 0; o < outs; ++o) {
    for (int k = 0; k < ins; ++k)
      (*w)[static_cast<size_t>(k * outs + o)] =
          FloatOfBf16(gt[static_cast<size_t>(o * (ins + 1) + k)]);
    (*b)[static_cast<size_t>(o)] = FloatOfBf16(gt[static_cast<size_t>(o * (ins + 1) + ins)]);
  }
}

// The dense layers from the flattened maps x (batch x in): their inputs with the bias
// column, ReLU outputs, and the logits; then the loss and the backward pass down to the
// flattened maps' gradient (returned), each layer's gradient into g.
// The loss's mean is over `total` images (the whole batch's, of which these are a share).
Half DenseLayers(const nn::Model& m, Half x, const uint8_t* labels, int batch, int total, int n,
                 ConvNetGradients* g) {
  std::vector<Half> in, out;
  const size_t first = 5;
  for (size_t i = first; i < m.layers.size(); ++i) {
    const nn::Layer& l = m.layers[i];
    const bool last = i + 1 == m.layers.size();
    in.push_back(WithOnes(x, batch, l.in.Size()));
    x = chip::Activate(chip::Product(in.back(), TileRows(l), batch, l.in.Size() + 1, l.out.c, n),
                       !last);
    out.push_back(x);
    if (!last) g->relu_on[i] = On(x);
  }
  const int classes = m.layers.back().out.c;
  Half dz(static_cast<size_t>(batch) * classes);
  const uint32_t inv_batch = arith::BitsOfFloat(InverseBatch(total));
  uint32_t sum = 0;
  for (int i = 0; i < batch; ++i) {
    const uint32_t loss = chip::SoftmaxRow(&x[static_cast<size_t>(i) * classes], classes, labels[i],
                                           n, inv_batch, &dz[static_cast<size_t>(i) * classes]);
    g->loss.push_back(arith::FloatOfBits(loss));
    sum = i == 0 ? loss : arith::Fp32Add(sum, loss);  // row_sum: row after row
  }
  g->mean = arith::FloatOfBits(arith::Fp32Mul(sum, inv_batch));
  for (uint16_t v : x) g->logits.push_back(FloatOfBf16(v));
  for (size_t i = m.layers.size() - 1; i >= first; --i) {
    const nn::Layer& l = m.layers[i];
    const int64_t ins = l.in.Size(), outs = l.out.c;
    const size_t j = i - first;
    const Half gt = chip::Activate(
        chip::Product(chip::Transposed(dz, batch, outs), in[j], outs, batch, ins + 1, n), false);
    PutGradient(gt, static_cast<int>(ins), static_cast<int>(outs), &g->w[i], &g->b[i]);
    const Half w = TileRows(l);  // the input gradient's tile: Wᵀ, a transposed load of W
    Half wt(static_cast<size_t>(outs * ins));
    for (int64_t r = 0; r < ins; ++r)
      for (int64_t o = 0; o < outs; ++o)
        wt[static_cast<size_t>(o * ins + r)] = w[static_cast<size_t>(r * outs + o)];
    const Half dx = chip::Activate(chip::Product(dz, wt, batch, outs, ins, n), false);
    dz = j > 0 ? Masked(dx, out[j - 1]) : dx;
  }
  return dz;
}

}  // namespace

void CheckConvNetShape(const nn::Model& m) {
  const std::vector<LayerType> want = {LayerType::kConv2d, LayerType::kAvgPool2d,
                                       LayerType::kConv2d, LayerType::kAvgPool2d,
                                       LayerType::kFlatten};
  bool ok = m.layers.size() > want.size() && m.input.c == 1;
  for (size_t i = 0; ok && i < m.layers.size(); ++i)
    ok = m.layers[i].type == (i < want.size() ? want[i] : LayerType::kDense);
  if (!ok) {
    throw UsageError("model '" + m.name +
                     "': the chip's convolutional reference takes conv, pool, conv, pool, "
                     "flatten, dense layers on one input channel (the course material's CNN)");
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

ConvNetGradients ReferenceConvNetGradients(const nn::Model& model, const Batch& batch_in, int batch,
                                           int n, int total) {
  CheckConvNetShape(model);
  const uint8_t* labels = batch_in.labels.data();
  ConvNetGradients g;
  g.w.resize(model.layers.size());
  g.b.resize(model.layers.size());
  g.relu_on.resize(model.layers.size());
  const MapShape in{batch, model.input.h, model.input.w, 1};
  Half x(static_cast<size_t>(in.Values()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = Bf16OfFloat(batch_in.x[i]);
  const nn::Layer &l1 = model.layers[0], &l2 = model.layers[2];
  const Conv c1 = ConvForward(x, in, l1, n);
  const MapShape p1{batch, c1.out.h / 2, c1.out.w / 2, c1.out.c};
  const Conv c2 = ConvForward(AvgPool(c1.h, c1.out, n), p1, l2, n);
  const MapShape p2{batch, c2.out.h / 2, c2.out.w / 2, c2.out.c};
  g.relu_on[0] = On(c1.h);
  g.relu_on[2] = On(c2.h);
  const Half dp2 =
      DenseLayers(model, AvgPool(c2.h, c2.out, n), labels, batch, total > 0 ? total : batch, n, &g);
  // The second pooling's gradient, over the rows and columns it read (an odd map's last
  // row and column get none), then through the ReLU.
  const Half spread = AvgPoolGradient(dp2, p2, n);
  Half dh2(c2.h.size(), 0);
  const int64_t c = c2.out.c, sh = 2 * p2.h, sw = 2 * p2.w;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t y = 0; y < sh; ++y)
      for (int64_t xx = 0; xx < sw; ++xx)
        for (int64_t ch = 0; ch < c; ++ch)
          dh2[static_cast<size_t>(((b * c2.out.h + y) * c2.out.w + xx) * c + ch)] =
              spread[static_cast<size_t>(((b * sh + y) * sw + xx) * c + ch)];
  const Half dz2 = Masked(dh2, c2.h);
  const int k2 = l2.kernel_h * l2.kernel_w * p1.c, k1 = l1.kernel_h * l1.kernel_w;
  const int64_t pix2 = int64_t{batch} * c2.out.h * c2.out.w,
                pix1 = int64_t{batch} * c1.out.h * c1.out.w;
  PutGradient(WeightGradientT(dz2, c2.f, pix2, static_cast<int>(c), k2 + 1, n), k2,
              static_cast<int>(c), &g.w[2], &g.b[2]);
  Half w2 = TileRows(l2);
  w2.resize(static_cast<size_t>(k2) * c);  // the weights without the bias row
  const Half dp1 = ConvInputGradient(dz2, c2.out, w2, l2.kernel_h, l2.kernel_w, p1.c, n);
  const Half dz1 = Masked(AvgPoolGradient(dp1, p1, n), c1.h);
  PutGradient(WeightGradientT(dz1, c1.f, pix1, c1.out.c, k1 + 1, n), k1, c1.out.c, &g.w[0],
              &g.b[0]);
  return g;
}

ConvNetGradients CoreGradients(const nn::Model& model, const Batch& b, int batch, int n,
                               int cores) {
  const int share = batch / cores;
  ConvNetGradients sum;
  std::vector<StepOut> outs;
  for (int c = 0; c < cores; ++c) {
    ConvNetGradients g =
        ReferenceConvNetGradients(model, b.Share(int64_t{c} * share, share), share, n, batch);
    outs.push_back({g.loss, g.mean, g.logits});
    if (c == 0) {
      sum = std::move(g);
      continue;
    }
    for (size_t l = 0; l < g.w.size(); ++l) {
      for (auto [t, u] : {std::pair{&sum.w[l], &g.w[l]}, std::pair{&sum.b[l], &g.b[l]}})
        for (size_t i = 0; i < t->size(); ++i)
          (*t)[i] = FloatOfBf16(chip::CoreSum(Bf16OfFloat((*t)[i]), Bf16OfFloat((*u)[i])));
      sum.relu_on[l].insert(sum.relu_on[l].end(), g.relu_on[l].begin(), g.relu_on[l].end());
    }
  }
  const StepOut all = StepOut::OfCores(outs);
  sum.loss = all.loss;
  sum.mean = all.mean;
  sum.logits = all.logits;
  return sum;
}

StepOut ReferenceConvStep(const nn::Model& shape, int n, const Optimizer& opt, const Batch& b,
                          int batch, DenseState* s, std::vector<std::vector<float>>* grads,
                          int cores) {
  nn::Model m = shape;
  SetDenseWeights(*s, &m);
  const ConvNetGradients g = CoreGradients(m, b, batch, n, cores);
  StepOut out;
  out.loss = g.loss;
  out.mean = g.mean;
  out.logits = g.logits;
  ++s->step;
  const StepScalars k = ScalarsOfStep(opt, s->step);
  const std::vector<float> consts = UpdateConstants(opt);
  if (grads) grads->clear();
  size_t li = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!m.layers[i].HasWeights()) continue;
    std::vector<float> gv = g.w[i];
    gv.insert(gv.end(), g.b[i].begin(), g.b[i].end());
    Half gh;
    for (float v : gv) gh.push_back(Bf16OfFloat(v));  // exact: bfloat16 values
    std::vector<std::vector<float>*> slot;
    for (auto& t : s->slots) slot.push_back(&t[li]);
    UpdateParams(opt, consts, k, gh, &s->w[li], slot);
    if (grads) grads->push_back(std::move(gv));
    ++li;
  }
  return out;
}

}  // namespace tpu::train
