// See dense_model.h.
#include "host/train/dense_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/nn/trainer.h"
#include "host/train/conv_step.h"
#include "host/train/convnet_reference.h"
#include "host/train/graph_reference.h"
#include "host/train/graph_step.h"

namespace tpu::train {
namespace {

int ArgMax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

float Bf16Value(float x) {
  return arith::FloatOfBits(arith::Fp32OfBf16(arith::Bf16OfFp32(arith::BitsOfFloat(x))));
}

}  // namespace

DenseNet DenseNetOf(const nn::Model& model) {
  DenseNet net{{static_cast<int>(model.input.Size())}};
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const nn::Layer& l = model.layers[i];
    const bool last = i + 1 == model.layers.size();
    if (i == 0 && l.type == nn::LayerType::kFlatten) continue;
    const bool ok =
        l.type == nn::LayerType::kDense && !model.IsGraph() &&
        (last ? l.activation == nn::Activation::kSoftmax || l.activation == nn::Activation::kNone
              : l.activation == nn::Activation::kRelu);
    if (!ok) {
      throw UsageError(fmt::format(
          "layer '{}' ({}{}): the chip's training compiler takes perceptrons (a flatten, then "
          "dense layers, ReLU between them, softmax last) and the course material's CNN (conv, "
          "pool, conv, pool, flatten, dense layers: --arch lenet5 or wide) so far "
          "(docs/training.md); train this model on the CPU (tpusim train without --config)",
          l.name, l.TypeName(),
          l.activation == nn::Activation::kNone ? "" : " with an activation"));
    }
    net.widths.push_back(l.out.c);
  }
  if (net.Layers() < 1) throw UsageError("model '" + model.name + "' has no dense layer to train");
  return net;
}

std::vector<std::vector<float>> DenseWeightsOf(const nn::Model& model) {
  std::vector<std::vector<float>> w;
  for (const nn::Layer& l : model.layers) {
    if (!l.HasWeights()) continue;
    std::vector<float> t = l.weights.data;
    t.insert(t.end(), l.bias.data.begin(), l.bias.data.end());
    w.push_back(std::move(t));
  }
  return w;
}

std::vector<std::vector<float>> KeptOf(const nn::Model& model) {
  std::vector<std::vector<float>> kept;
  for (const nn::Layer& l : model.layers)
    for (const Tensor<float>& t : l.state) kept.push_back(t.data);
  return kept;
}

DenseState FreshState(const nn::Model& model, const Optimizer& opt) {
  DenseState s = DenseState::Fresh(DenseWeightsOf(model), opt);
  s.kept = KeptOf(model);
  return s;
}

void SetDenseWeights(const DenseState& state, nn::Model* model) {
  size_t i = 0;
  for (nn::Layer& l : model->layers) {
    if (!l.HasWeights()) continue;
    const std::vector<float>& t = state.w.at(i++);
    const size_t n = l.weights.data.size();
    std::copy(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n), l.weights.data.begin());
    std::copy(t.begin() + static_cast<std::ptrdiff_t>(n), t.end(), l.bias.data.begin());
  }
  if (state.kept.empty()) return;
  size_t k = 0;
  for (nn::Layer& l : model->layers)
    for (Tensor<float>& t : l.state) t.data = state.kept.at(k++);
}

void WriteGradients(const std::string& dir, const nn::Model& initial,
                    const std::vector<std::vector<float>>& grads, float loss,
                    const std::vector<int64_t>& images) {
  OutputFolder out(dir, kGradientsFolder);
  nlohmann::json j = {
      {"format", "tpusim-gradients"}, {"loss", "loss.npy"}, {"indices", "indices.npy"}};
  size_t i = 0;
  for (const nn::Layer& l : initial.layers) {
    if (!l.HasWeights()) continue;
    const std::vector<float>& g = grads.at(i++);
    const auto n = static_cast<std::ptrdiff_t>(l.weights.data.size());
    for (const bool init : {false, true}) {
      const std::string w = l.name + (init ? ".weights.initial.npy" : ".weights.npy");
      const std::string b = l.name + (init ? ".bias.initial.npy" : ".bias.npy");
      WriteNpyTensor(out.File(w),
                     init ? l.weights : Tensor<float>{l.weights.shape, {g.begin(), g.begin() + n}});
      WriteNpyTensor(out.File(b),
                     init ? l.bias : Tensor<float>{l.bias.shape, {g.begin() + n, g.end()}});
      j[init ? "initial" : "gradients"][l.name] = {{"weights", w}, {"bias", b}};
    }
  }
  WriteNpyTensor(out.File("loss.npy"), Tensor<float>{{1}, {loss}});
  WriteNpyTensor(out.File("indices.npy"),
                 Tensor<int32_t>{{static_cast<int64_t>(images.size())},
                                 std::vector<int32_t>(images.begin(), images.end())});
  {
    std::ofstream f(out.File(kGradientsFolder.manifest));
    f << j.dump(2) << "\n";
    if (!f) throw RuntimeError("cannot write the gradients in '" + dir + "'");
  }
  out.Commit();
}

namespace {

Batch BatchOf(const data::MnistSet& set, const std::vector<int64_t>& order, int64_t step, int batch,
              int in) {
  Batch b;
  for (int64_t k = 0; k < batch; ++k) {
    const int64_t idx = order[static_cast<size_t>(step * batch + k)];
    const uint8_t* p = set.Image(idx);
    for (int j = 0; j < in; ++j) b.x.push_back(Bf16Value(p[j] / 255.0f));
    b.labels.push_back(set.labels[static_cast<size_t>(idx)]);
  }
  return b;
}

// One epoch's loop over any step (the chip's, the reference's).
void RunEpoch(const std::function<StepOut(const Batch&, const Batch* next, int64_t step)>& step,
              const TrainNet& net, const data::MnistSet& set, int epoch, const ChipEpochOptions& o,
              ChipEpochResult* r) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> order = nn::EpochOrder(set.count, o.seed, epoch);
  const int64_t steps = StepsOfEpoch(set, o.batch);
  const int classes = net.Classes();
  const double seconds_before = r->seconds;
  std::optional<Batch> next;
  for (int64_t s = r->steps; s < steps; ++s) {
    const Batch b = next ? std::move(*next) : BatchOf(set, order, s, o.batch, net.In());
    next.reset();
    if (s + 1 < steps) next = BatchOf(set, order, s + 1, o.batch, net.In());
    const StepOut out = step(b, next ? &*next : nullptr, s);
    if (o.after_step) {
      o.after_step({order.begin() + s * o.batch, order.begin() + (s + 1) * o.batch}, out);
    }
    if (!out.loss.empty()) {
      r->loss_sum += out.mean;
      for (int k = 0; k < o.batch; ++k)
        r->right += ArgMax(&out.logits[static_cast<size_t>(k) * classes], classes) ==
                    b.labels[static_cast<size_t>(k)];
    }
    r->images += o.batch;
    r->steps = s + 1;
    r->seconds = seconds_before +
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.progress && ((s + 1) % o.report_every == 0 || s + 1 == steps))
      o.progress(static_cast<double>(s + 1) / static_cast<double>(steps), r->Loss(), r->Accuracy());
    if (o.checkpoint && o.checkpoint_every > 0 && (s + 1) % o.checkpoint_every == 0 &&
        s + 1 < steps)
      o.checkpoint(*r);
  }
}

}  // namespace

void TrainChipEpoch(ChipTrainer* chip, const TrainNet& net, const data::MnistSet& set, int epoch,
                    const ChipEpochOptions& o, DenseState* reference, ChipEpochResult* r) {
  auto step = [&](const Batch& b, const Batch* next, int64_t s) {
    // With verify, the reference steps on a thread of its own while the chip runs the step
    // (they share nothing: the reference's state is its own).
    std::future<StepOut> reference_step;
    if (o.verify) {
      reference_step =
          std::async(std::launch::async,
                     [&net, &b, &o, reference, n = chip->ArrayDim(), opt = chip->optimizer(),
                      cores = chip->Cores(), passes = chip->Passes()] {
                       return net.Reference(n, opt, b, o.batch, reference, nullptr, cores, passes);
                     });
    }
    const StepOut out = chip->Step(b, next);
    r->cycles += chip->LastStep().cycles;
    r->counters += chip->LastStep().counters;
    if (!o.verify) return out;
    const StepOut want = reference_step.get();
    if (!(out == want)) {
      throw RuntimeError(fmt::format(
          "epoch {} step {}: the chip's losses or logits differ from the CPU reference's (mean "
          "loss {} against {}): a bug, please report it",
          epoch, s + 1, out.mean, want.mean));
    }
    ++r->verified;
    return out;
  };
  RunEpoch(step, net, set, epoch, o, r);
}

void TrainReferenceEpoch(const TrainNet& net, int n, const Optimizer& opt,
                         const data::MnistSet& set, int epoch, const ChipEpochOptions& o,
                         DenseState* state, ChipEpochResult* r) {
  auto step = [&](const Batch& b, const Batch*, int64_t) {
    return net.Reference(n, opt, b, o.batch, state);
  };
  RunEpoch(step, net, set, epoch, o, r);
}

int TrainNet::Classes() const { return shape.layers.back().out.c; }

std::vector<int64_t> TrainNet::Params() const {
  std::vector<int64_t> p;
  for (const std::vector<float>& w : DenseWeightsOf(shape))
    p.push_back(static_cast<int64_t>(w.size()));
  return p;
}

CompiledStep TrainNet::Compile(int batch, const Optimizer& opt, const config::TpuConfig& config,
                               int cores) const {
  switch (kind) {
    case Kind::kCnn:
      return CompileConvStep(shape, batch, opt, config, cores);
    case Kind::kGraph:
      return CompileGraphStep(shape, batch, opt, config, cores, state_at);
    default:
      return CompileDenseStep(dense, batch, opt, config, cores);
  }
}

StepOut TrainNet::Reference(int n, const Optimizer& opt, const Batch& b, int batch,
                            DenseState* state, std::vector<std::vector<float>>* grads, int cores,
                            int passes) const {
  return kind == Kind::kPerceptron
             ? ReferenceStep(dense, n, opt, b, batch, state, grads, cores)
             : ReferenceGraphStep(shape, n, opt, b, batch, state, grads, cores, passes);
}

nlohmann::json TrainNet::Describe() const {
  if (kind == Kind::kPerceptron) return dense.widths;
  nlohmann::json j = nlohmann::json::array();
  for (const nn::Layer& l : shape.layers) j.push_back(l.name);
  return j;
}

TrainNet TrainNetOf(const nn::Model& model) {
  TrainNet t;
  t.shape = model;
  // The first compiler that takes it: the CNN's, the perceptron's, a graph's (whose
  // refusal, naming the layer, is the model's).
  auto takes = [&model](auto check) {
    try {
      check(model);
      return true;
    } catch (const UsageError&) {
      return false;
    }
  };
  if (takes(CheckConvNetShape)) {
    t.kind = TrainNet::Kind::kCnn;
  } else if (takes([&t](const nn::Model& m) { t.dense = DenseNetOf(m); })) {
    t.kind = TrainNet::Kind::kPerceptron;
  } else {
    CheckGraphTrainable(model);
    t.kind = TrainNet::Kind::kGraph;
  }
  return t;
}

}  // namespace tpu::train
