// See dense_net.h.
#include "host/train/dense_net.h"

#include <fmt/format.h>

#include <cstring>

#include "arith/bf16.h"
#include "host/common/errors.h"

namespace tpu::train {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

Optimizer Optimizer::Parse(const std::string& name, double lr) {
  Optimizer o;
  if (name == "sgd") {
    o.kind = Kind::kSgd;
  } else if (name != "adam") {
    throw UsageError("unknown --optimizer '" + name + "'; use adam or sgd");
  }
  o.lr = lr;
  return o;
}

DenseState DenseState::Fresh(std::vector<std::vector<float>> w, const Optimizer& opt) {
  DenseState s;
  s.slots.resize(static_cast<size_t>(opt.Slots()));
  for (auto& slot : s.slots)
    for (const auto& t : w) slot.emplace_back(t.size(), 0.0f);
  s.w = std::move(w);
  return s;
}

bool DenseState::operator==(const DenseState& o) const {
  if (step != o.step || w.size() != o.w.size() || slots.size() != o.slots.size() ||
      kept.size() != o.kept.size())
    return false;
  for (size_t l = 0; l < w.size(); ++l)
    if (!SameBits(w[l], o.w[l])) return false;
  for (size_t k = 0; k < kept.size(); ++k)
    if (!SameBits(kept[k], o.kept[k])) return false;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s].size() != o.slots[s].size()) return false;
    for (size_t l = 0; l < slots[s].size(); ++l)
      if (!SameBits(slots[s][l], o.slots[s][l])) return false;
  }
  return true;
}

bool StepOut::operator==(const StepOut& o) const {
  return SameBits(loss, o.loss) && std::memcmp(&mean, &o.mean, sizeof mean) == 0 &&
         SameBits(logits, o.logits);
}

Batch Batch::Share(int64_t first, int64_t count) const {
  const size_t per = labels.empty() ? 0 : x.size() / labels.size();
  Batch s;
  s.x.assign(x.begin() + static_cast<ptrdiff_t>(first * per),
             x.begin() + static_cast<ptrdiff_t>((first + count) * per));
  s.labels.assign(labels.begin() + first, labels.begin() + first + count);
  return s;
}

StepOut StepOut::OfCores(const std::vector<StepOut>& cores) {
  StepOut out;
  uint32_t mean = 0;
  for (size_t c = 0; c < cores.size(); ++c) {
    const StepOut& o = cores[c];
    out.loss.insert(out.loss.end(), o.loss.begin(), o.loss.end());
    out.logits.insert(out.logits.end(), o.logits.begin(), o.logits.end());
    const uint32_t m = arith::BitsOfFloat(o.mean);
    mean = c == 0 ? m : arith::Fp32Add(mean, m);
  }
  out.mean = arith::FloatOfBits(mean);
  return out;
}

void CheckDense(const DenseNet& net, int batch, int n) {
  if (net.Layers() < 1) throw UsageError("a network to train needs at least one dense layer");
  for (size_t i = 0; i < net.widths.size(); ++i) {
    if (net.widths[i] < 1)
      throw UsageError(fmt::format("width {} of the network is {}", i, net.widths[i]));
  }
  if (net.Classes() > n) {
    throw UsageError(fmt::format(
        "the chip's softmax takes one row of N = {} lanes: at most {} classes (the network has {})",
        n, n, net.Classes()));
  }
  if (batch < 1) throw UsageError(fmt::format("--batch {}: a step takes at least 1 image", batch));
}

}  // namespace tpu::train
