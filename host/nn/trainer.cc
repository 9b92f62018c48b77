// fp32 training (see trainer.h).
#include "host/nn/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include "host/nn/fp32_net.h"

namespace tpu::nn {

AdamState AdamState::For(const Model& m) {
  AdamState s;
  for (const Layer& l : m.layers) {
    s.m_w.emplace_back(l.weights.data.size(), 0.0f);
    s.v_w.emplace_back(l.weights.data.size(), 0.0f);
    s.m_b.emplace_back(l.bias.data.size(), 0.0f);
    s.v_b.emplace_back(l.bias.data.size(), 0.0f);
  }
  return s;
}

namespace {

void AdamUpdate(std::vector<float>* param, const std::vector<float>& grad, std::vector<float>* m,
                std::vector<float>* v, float lr_t) {
  constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-7f;
  for (size_t k = 0; k < param->size(); ++k) {
    (*m)[k] = kBeta1 * (*m)[k] + (1 - kBeta1) * grad[k];
    (*v)[k] = kBeta2 * (*v)[k] + (1 - kBeta2) * grad[k] * grad[k];
    (*param)[k] -= lr_t * (*m)[k] / (std::sqrt((*v)[k]) + kEps);
  }
}

// Runs `fn(t, begin, end)` on `threads` contiguous slices of [0, count).
template <typename Fn>
void ParallelSlices(int64_t count, int threads, Fn fn) {
  threads = std::max<int>(1, std::min<int64_t>(threads, count));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    if (t + 1 == threads) {
      fn(t, begin, end);
    } else {
      pool.emplace_back(fn, t, begin, end);
    }
  }
  for (auto& th : pool) th.join();
}

}  // namespace

std::vector<int64_t> EpochOrder(int64_t count, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

namespace {

// The pixels (`size` of each) and labels of images idx[0 .. n) of `set`, one after the other.
void Gather(const data::MnistSet& set, const int64_t* idx, int64_t n, int64_t size,
            std::vector<uint8_t>* pixels, std::vector<uint8_t>* labels) {
  pixels->resize(static_cast<size_t>(n * size));
  labels->resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    std::copy_n(set.Image(idx[k]), size, &(*pixels)[static_cast<size_t>(k * size)]);
    (*labels)[static_cast<size_t>(k)] = set.labels[static_cast<size_t>(idx[k])];
  }
}

}  // namespace

ParamSet FirstStepGradients(const Model& model, const data::MnistSet& train, const TrainOptions& o,
                            double* loss, std::vector<int64_t>* images) {
  const std::vector<int64_t> order = EpochOrder(train.count, o.seed, 1);
  images->assign(order.begin(), order.begin() + std::min<int64_t>(o.batch, train.count));
  const int64_t n = static_cast<int64_t>(images->size());
  std::vector<uint8_t> pixels, labels;
  Gather(train, images->data(), n, model.input.Size(), &pixels, &labels);
  ForwardCache cache;
  cache.training = true;
  Forward(model, Fp32Input(pixels.data(), n, model.input), &cache);
  ParamSet g = ParamSet::ZerosLike(model);
  *loss = Backward(model, cache, labels.data(), &g);
  return g;
}

namespace {

// One batch's images (`count` of them from position b0 of `order`): the forward and backward
// passes on `threads` slices, their gradients summed into grads[0] (each weighted by its
// share of the batch), their losses and right answers added into *sums.
void BatchGradients(Model* model, const data::MnistSet& train, const std::vector<int64_t>& order,
                    int64_t b0, int64_t count, int threads, std::vector<ParamSet>* grads,
                    EpochSums* sums) {
  const bool by_batch = TrainsByBatch(*model);
  std::vector<double> losses(static_cast<size_t>(threads));
  std::vector<int64_t> correct(static_cast<size_t>(threads));
  ParallelSlices(count, threads, [&](int t, int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    std::vector<uint8_t> pixels, labels;
    Gather(train, &order[static_cast<size_t>(b0 + begin)], n, model->input.Size(), &pixels,
           &labels);
    ForwardCache cache;
    cache.training = true;
    Forward(*model, Fp32Input(pixels.data(), n, model->input), &cache);
    if (by_batch) UpdateState(model, cache);  // the one slice is the whole batch
    ParamSet& g = (*grads)[static_cast<size_t>(t)];
    g.SetZero();
    losses[static_cast<size_t>(t)] = Backward(*model, cache, labels.data(), &g) * n;
    const std::vector<int> pred = ArgMax(cache.acts.back());
    int64_t c = 0;
    for (int64_t k = 0; k < n; ++k)
      c += pred[static_cast<size_t>(k)] == labels[static_cast<size_t>(k)];
    correct[static_cast<size_t>(t)] = c;
    // Backward averages over this slice; weight it by its share of the batch.
    const float share = static_cast<float>(n) / static_cast<float>(count);
    for (auto& v : g.w)
      for (float& x : v) x *= share;
    for (auto& v : g.b)
      for (float& x : v) x *= share;
  });
  for (int t = 1; t < threads && t < count; ++t) (*grads)[0].Add((*grads)[static_cast<size_t>(t)]);
  for (int t = 0; t < threads && t < count; ++t) {
    sums->loss_sum += losses[static_cast<size_t>(t)];
    sums->right += correct[static_cast<size_t>(t)];
  }
  sums->seen += count;
}

// Adam's step on every weighted layer of *model with the gradients g.
void AdamStep(const TrainOptions& o, const ParamSet& g, Model* model, AdamState* state) {
  ++state->step;
  const float lr_t = o.learning_rate *
                     std::sqrt(1.0f - std::pow(0.999f, static_cast<float>(state->step))) /
                     (1.0f - std::pow(0.9f, static_cast<float>(state->step)));
  for (size_t i = 0; i < model->layers.size(); ++i) {
    Layer& l = model->layers[i];
    if (!l.HasWeights()) continue;
    AdamUpdate(&l.weights.data, g.w[i], &state->m_w[i], &state->v_w[i], lr_t);
    AdamUpdate(&l.bias.data, g.b[i], &state->m_b[i], &state->v_b[i], lr_t);
  }
}

}  // namespace

EpochResult TrainEpoch(Model* model, const data::MnistSet& train, int epoch, const TrainOptions& o,
                       AdamState* state, EpochSums* done) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> order = EpochOrder(train.count, o.seed, epoch);
  // A batch normalization's statistics are the whole batch's: such a model's step is one
  // thread's (Eigen's products are its own).
  const int threads = TrainsByBatch(*model) ? 1 : std::max(1, o.threads);
  std::vector<ParamSet> grads(static_cast<size_t>(threads), ParamSet::ZerosLike(*model));
  EpochSums fresh;
  EpochSums& sums = done ? *done : fresh;
  const double seconds_before = sums.seconds;
  auto elapsed = [&] {
    return seconds_before +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int64_t batches = (train.count + o.batch - 1) / o.batch;
  for (int64_t bi = sums.batches; bi < batches; ++bi) {
    const int64_t b0 = bi * o.batch;
    BatchGradients(model, train, order, b0, std::min<int64_t>(o.batch, train.count - b0), threads,
                   &grads, &sums);
    AdamStep(o, grads[0], model, state);
    sums.batches = bi + 1;
    if (o.progress && ((bi + 1) % o.report_every == 0 || bi + 1 == batches)) {
      o.progress(epoch, static_cast<double>(bi + 1) / batches, sums.loss_sum / sums.seen,
                 static_cast<double>(sums.right) / sums.seen);
    }
    if (o.checkpoint && o.checkpoint_every > 0 && (bi + 1) % o.checkpoint_every == 0 &&
        bi + 1 < batches) {
      sums.seconds = elapsed();
      o.checkpoint(sums);
    }
  }
  sums.seconds = elapsed();
  EpochResult r;
  r.epoch = epoch;
  r.loss = sums.seen ? sums.loss_sum / static_cast<double>(sums.seen) : 0;
  r.train_accuracy =
      sums.seen ? static_cast<double>(sums.right) / static_cast<double>(sums.seen) : 0;
  r.seconds = sums.seconds;
  return r;
}

double EvaluateFp32(const Model& model, const data::MnistSet& set, int threads) {
  std::vector<int64_t> correct(static_cast<size_t>(std::max(1, threads)), 0);
  ParallelSlices(set.count, threads, [&](int t, int64_t begin, int64_t end) {
    constexpr int64_t kChunk = 256;
    for (int64_t b = begin; b < end; b += kChunk) {
      const int64_t n = std::min(kChunk, end - b);
      ForwardCache cache;
      cache.keep_cols = false;
      Forward(model, Fp32Input(set.Image(b), n, model.input), &cache);
      const std::vector<int> pred = ArgMax(cache.acts.back());
      for (int64_t k = 0; k < n; ++k) {
        correct[static_cast<size_t>(t)] +=
            pred[static_cast<size_t>(k)] == set.labels[static_cast<size_t>(b + k)];
      }
    }
  });
  int64_t total = 0;
  for (int64_t c : correct) total += c;
  return set.count ? static_cast<double>(total) / static_cast<double>(set.count) : 0.0;
}

}  // namespace tpu::nn
