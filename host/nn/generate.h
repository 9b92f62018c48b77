// Greedy decoding with a GPT-style decoder on the CPU in fp32 (docs/transformers.md,
// "Generating tokens"): the reference that the chip's decoding with a key/value cache is to
// equal. The model takes 1 x L x 1 token ids (an imported N x L int64 input) and gives
// 1 x L x V logits; each new token is the first largest logit at the last position of the
// context, which is run whole each step, padded to L (a causal model's logits at a position
// do not depend on the tokens after it: checked on the first step).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "host/nn/model.h"

namespace tpu::nn {

struct Generated {
  std::vector<int64_t> tokens;  // the new tokens, in order
  int64_t context = 0;          // L, the tokens the model reads
  int64_t vocabulary = 0;       // V
};

// The context L and vocabulary V of `m`, which is to generate `count` tokens after
// `prompt`; throws UsageError as GenerateGreedy does (except for causality, which it checks
// by running the model).
std::pair<int64_t, int64_t> CheckGeneration(const Model& m, const std::vector<int64_t>& prompt,
                                            int64_t count);

// Throws UsageError where `m`'s fp32 logits at the prompt's last position change with what
// follows it (the context padded with id 0, then with the last id): not causal. `logits`:
// those with 0 where known (else computed).
void CheckCausal(const Model& m, const std::vector<int64_t>& prompt,
                 const std::vector<float>& logits = {});

// `count` tokens after `prompt` by greedy decoding; `progress(done, count)` after each.
// Throws UsageError for a model that does not take token ids or give logits per position,
// a prompt of ids outside the vocabulary, more tokens than the context holds, or a model
// whose logits at the prompt's last position change with what follows it (not causal).
Generated GenerateGreedy(const Model& m, const std::vector<int64_t>& prompt, int64_t count,
                         const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tpu::nn
