// See dense_reference.h. Values are float32 bit patterns (uint32_t) and bfloat16 ones
// (uint16_t) as in arith/: every operation below is the chip's, in the chip's order.
#include "host/train/dense_reference.h"

#include <cmath>
#include <cstring>

#include "arith/bf16.h"
#include "arith/fp32.h"
#include "host/train/step_arith.h"

namespace tpu::train {
namespace {

using arith::BitsOfFloat;
using arith::FloatOfBits;
using arith::Fp32Add;
using arith::Fp32Mul;
using arith::Fp32OfBf16;
using arith::Fp32Sub;
using Bits = std::vector<uint32_t>;
using Half = std::vector<uint16_t>;
using chip::Activate;
using chip::Product;
using chip::SoftmaxRow;
using chip::Transposed;

uint32_t F(float x) { return BitsOfFloat(x); }
uint16_t Bf16(uint32_t x) { return arith::Bf16OfFp32(x); }

struct Forward {
  std::vector<Half> x;     // per layer: its input, batch x (In + 1), the last column 1
  std::vector<Half> wb;    // per layer: the weights in bfloat16
  std::vector<Half> zero;  // per hidden layer: where its ReLU gave 0 (1 = masked)
  Half logits;             // batch x classes
};

Forward RunForward(const DenseNet& net, int n, const Batch& b, int batch, const DenseState& s) {
  Forward f;
  Half x(static_cast<size_t>(batch) * (net.In(0) + 1));
  for (int i = 0; i < batch; ++i) {
    for (int j = 0; j < net.In(0); ++j)
      x[i * (net.In(0) + 1) + j] = Bf16(F(b.x[static_cast<size_t>(i) * net.In(0) + j]));
    x[i * (net.In(0) + 1) + net.In(0)] = Bf16(arith::kFp32One);
  }
  for (int l = 0; l < net.Layers(); ++l) {
    const auto& w = s.w[static_cast<size_t>(l)];
    Half wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = Bf16(F(w[i]));  // vector op=copy a32
    const Bits z = Product(x, wb, batch, net.In(l) + 1, net.Out(l), n);
    f.x.push_back(x);
    f.wb.push_back(wb);
    if (l + 1 == net.Layers()) {
      f.logits = Activate(z, false);
      break;
    }
    const Half h = Activate(z, true);
    Half mask(h.size()), next(static_cast<size_t>(batch) * (net.Out(l) + 1));
    for (int i = 0; i < batch; ++i) {
      for (int j = 0; j < net.Out(l); ++j) {
        const uint16_t v = h[static_cast<size_t>(i) * net.Out(l) + j];
        mask[static_cast<size_t>(i) * net.Out(l) + j] = arith::Fp32Equal(Fp32OfBf16(v), 0) != 0;
        next[static_cast<size_t>(i) * (net.Out(l) + 1) + j] = v;
      }
      next[static_cast<size_t>(i) * (net.Out(l) + 1) + net.Out(l)] = Bf16(arith::kFp32One);
    }
    f.zero.push_back(mask);
    x = std::move(next);
  }
  return f;
}

}  // namespace

void UpdateParams(const Optimizer& opt, const std::vector<float>& consts, StepScalars k,
                  const Half& g, std::vector<float>* w, std::vector<std::vector<float>*> slot) {
  for (size_t i = 0; i < g.size(); ++i) {
    const uint32_t gi = Fp32OfBf16(g[i]);
    float& wi = (*w)[i];
    if (opt.kind == Optimizer::Kind::kSgd) {
      const uint32_t v = Fp32Add(Fp32Mul(F((*slot[0])[i]), F(consts[0])), gi);
      (*slot[0])[i] = FloatOfBits(v);
      wi = FloatOfBits(Fp32Sub(F(wi), Fp32Mul(v, F(consts[1]))));
      continue;
    }
    const uint32_t m = Fp32Add(Fp32Mul(F((*slot[0])[i]), F(consts[0])), Fp32Mul(gi, F(consts[1])));
    const uint32_t v =
        Fp32Add(Fp32Mul(F((*slot[1])[i]), F(consts[2])), Fp32Mul(Fp32Mul(gi, gi), F(consts[3])));
    const uint32_t root = arith::Fp32Recip(arith::Fp32Rsqrt(v));  // sqrt(v), 0 at 0
    const uint32_t d = arith::Fp32Recip(Fp32Add(Fp32Mul(root, F(k.c2)), F(consts[4])));
    (*slot[0])[i] = FloatOfBits(m);
    (*slot[1])[i] = FloatOfBits(v);
    wi = FloatOfBits(Fp32Sub(F(wi), Fp32Mul(Fp32Mul(m, d), F(k.c1))));
  }
}

float InverseBatch(int batch) { return static_cast<float>(1.0 / batch); }

StepScalars ScalarsOfStep(const Optimizer& opt, int64_t t) {
  if (opt.kind == Optimizer::Kind::kSgd) return {};
  const double td = static_cast<double>(t);
  return {static_cast<float>(opt.lr / (1 - std::pow(opt.beta1, td))),
          static_cast<float>(1 / std::sqrt(1 - std::pow(opt.beta2, td)))};
}

std::vector<float> UpdateConstants(const Optimizer& opt) {
  if (opt.kind == Optimizer::Kind::kSgd)
    return {static_cast<float>(opt.momentum), static_cast<float>(opt.lr)};
  return {static_cast<float>(opt.beta1), static_cast<float>(1 - opt.beta1),
          static_cast<float>(opt.beta2), static_cast<float>(1 - opt.beta2),
          static_cast<float>(opt.eps)};
}

namespace {

// One core's share of a step: its images' losses, their sum over the whole batch's `total`
// (the mean's share) and logits into *out; each layer's weight gradient (bfloat16), the
// batch the sum's index.
std::vector<Half> ShareGradients(const DenseNet& net, int n, const Batch& b, int batch, int total,
                                 const DenseState& s, StepOut* out) {
  const Forward f = RunForward(net, n, b, batch, s);
  const int classes = net.Classes();
  const uint32_t inv_batch = F(InverseBatch(total));
  Half dz(static_cast<size_t>(batch) * classes);
  uint32_t sum = 0;
  for (int i = 0; i < batch; ++i) {
    const uint32_t loss = SoftmaxRow(&f.logits[static_cast<size_t>(i) * classes], classes,
                                     b.labels[static_cast<size_t>(i)], n, inv_batch,
                                     &dz[static_cast<size_t>(i) * classes]);
    out->loss.push_back(FloatOfBits(loss));
    sum = i == 0 ? loss : Fp32Add(sum, loss);  // row_sum: row after row
  }
  out->mean = FloatOfBits(Fp32Mul(sum, inv_batch));
  for (uint16_t v : f.logits) out->logits.push_back(FloatOfBits(Fp32OfBf16(v)));
  std::vector<Half> grads(static_cast<size_t>(net.Layers()));
  for (int l = net.Layers() - 1; l >= 0; --l) {
    const int in = net.In(l) + 1, units = net.Out(l);
    const auto li = static_cast<size_t>(l);
    // dW = X^T dz, the batch the sum's index; dX = dz W^T, the outputs the sum's index.
    grads[li] = Activate(Product(Transposed(f.x[li], batch, in), dz, in, batch, units, n), false);
    if (l == 0) break;
    Half wt(static_cast<size_t>(units) * (in - 1));
    for (int r = 0; r < in - 1; ++r)
      for (int c = 0; c < units; ++c) wt[c * (in - 1) + r] = f.wb[li][r * units + c];
    const Half dh = Activate(Product(dz, wt, batch, units, in - 1, n), false);
    dz.assign(dh.size(), 0);
    for (size_t i = 0; i < dh.size(); ++i) dz[i] = f.zero[li - 1][i] ? 0 : dh[i];
  }
  return grads;
}

}  // namespace

StepOut ReferenceStep(const DenseNet& net, int n, const Optimizer& opt, const Batch& b, int batch,
                      DenseState* s, std::vector<std::vector<float>>* grads, int cores) {
  const int share = batch / cores;
  std::vector<StepOut> outs(static_cast<size_t>(cores));
  std::vector<Half> g;
  for (int c = 0; c < cores; ++c) {
    const std::vector<Half> gc = ShareGradients(net, n, b.Share(int64_t{c} * share, share), share,
                                                batch, *s, &outs[static_cast<size_t>(c)]);
    if (c == 0) {
      g = gc;
      continue;
    }
    for (size_t l = 0; l < g.size(); ++l)
      for (size_t i = 0; i < g[l].size(); ++i) g[l][i] = chip::CoreSum(g[l][i], gc[l][i]);
  }
  ++s->step;
  const StepScalars k = ScalarsOfStep(opt, s->step);
  const std::vector<float> consts = UpdateConstants(opt);
  if (grads) grads->assign(static_cast<size_t>(net.Layers()), {});
  for (size_t l = 0; l < g.size(); ++l) {
    if (grads) {
      for (uint16_t v : g[l]) (*grads)[l].push_back(FloatOfBits(Fp32OfBf16(v)));
    }
    std::vector<std::vector<float>*> slot;
    for (auto& t : s->slots) slot.push_back(&t[l]);
    UpdateParams(opt, consts, k, g[l], &s->w[l], slot);
  }
  return StepOut::OfCores(outs);
}

}  // namespace tpu::train
