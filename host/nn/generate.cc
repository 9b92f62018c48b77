// See generate.h.
#include "host/nn/generate.h"

#include <fmt/format.h>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"

namespace tpu::nn {
namespace {

// The context's L and the vocabulary's V of a model of token ids to logits.
std::pair<int64_t, int64_t> ContextAndVocabulary(const Model& m) {
  const Shape3& in = m.input;
  const Shape3& out = m.layers.back().out;
  if (in.h != 1 || in.c != 1 || m.preprocess != "none")
    throw UsageError(fmt::format(
        "model '{}' takes {} x {} x {} inputs, not token ids: tpusim generate runs a GPT-style "
        "decoder imported from an export whose input is N x T int64 token ids "
        "(docs/transformers.md)",
        m.name, in.h, in.w, in.c));
  if (out.Size() != int64_t{in.w} * out.c)
    throw UsageError(
        fmt::format("model '{}' gives {} x {} x {} outputs, not logits for each of "
                    "its {} positions",
                    m.name, out.h, out.w, out.c, in.w));
  return {in.w, out.c};
}

// The logits of the context's last position, the context padded to L with `pad`.
std::vector<float> LastLogits(const Model& m, const std::vector<int64_t>& context, int64_t l,
                              int64_t v, float pad) {
  MatrixF x = MatrixF::Constant(1, l, pad);
  for (size_t i = 0; i < context.size(); ++i)
    x(0, static_cast<Eigen::Index>(i)) = static_cast<float>(context[i]);
  ForwardCache cache;
  cache.keep_cols = false;
  Forward(m, x, &cache);
  const float* row =
      cache.acts.back().row(0).data() + (static_cast<int64_t>(context.size()) - 1) * v;
  return {row, row + v};
}

}  // namespace

std::pair<int64_t, int64_t> CheckGeneration(const Model& m, const std::vector<int64_t>& prompt,
                                            int64_t count) {
  const auto [l, v] = ContextAndVocabulary(m);
  if (prompt.empty()) throw UsageError("the prompt is empty; give at least one token id");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= v)
      throw UsageError(fmt::format("prompt token {} is {}, not an id in 0..{} (model '{}')", i,
                                   prompt[i], v - 1, m.name));
  const auto p = static_cast<int64_t>(prompt.size());
  if (count < 1 || p + count > l)
    throw UsageError(fmt::format(
        "a prompt of {} tokens and --tokens {} make {}; model '{}' reads {} tokens (the length "
        "it was exported for): export it for at least {}, or ask for 1 to {} tokens",
        p, count, p + count, m.name, l, p + count, std::max<int64_t>(l - p, 0)));
  return {l, v};
}

void CheckCausal(const Model& m, const std::vector<int64_t>& prompt,
                 const std::vector<float>& logits) {
  const auto [l, v] = ContextAndVocabulary(m);
  if (static_cast<int64_t>(prompt.size()) >= l) return;
  const std::vector<float> padded_with_0 =
      logits.empty() ? LastLogits(m, prompt, l, v, 0.0f) : logits;
  if (LastLogits(m, prompt, l, v, static_cast<float>(v - 1)) != padded_with_0)
    throw UsageError(fmt::format(
        "model '{}' is not causal: its logits at the prompt's last position change with the "
        "tokens after it, so it cannot generate one token at a time (an encoder, or a "
        "decoder without its causal mask)",
        m.name));
}

Generated GenerateGreedy(const Model& m, const std::vector<int64_t>& prompt, int64_t count,
                         const std::function<void(int64_t, int64_t)>& progress) {
  const auto [l, v] = CheckGeneration(m, prompt, count);
  const auto p = static_cast<int64_t>(prompt.size());
  Generated g;
  g.context = l;
  g.vocabulary = v;
  std::vector<int64_t> context = prompt;
  for (int64_t k = 0; k < count; ++k) {
    const std::vector<float> logits = LastLogits(m, context, l, v, 0.0f);
    if (k == 0 && p < l) CheckCausal(m, prompt, logits);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    context.push_back(best);
    g.tokens.push_back(best);
    if (progress) progress(k + 1, count);
  }
  return g;
}

}  // namespace tpu::nn
