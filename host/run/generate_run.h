// Greedy decoding on a bf16 chip with a key/value cache (docs/transformers.md, "Decoding on
// the chip"): the prompt's positions as one program (the prefill), then one program a new
// token (a decode step at its position), every program a compiler::TransformerProgram of
// some positions. Each block's keys and values stay in the unified buffer between the
// programs, written by the prefill and by each step at its position: the host sends only
// each new token's id and reads back its logits. Every position's logits are checked bit
// for bit against one nn::Bf16Net pass over the generated sequence (a causal model's logits
// at a position do not depend on what follows it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/engine/chip_engine.h"
#include "host/nn/model.h"
#include "host/run/tpu_runner.h"

namespace tpu::run {

// The cycles a decode step cannot take fewer than (docs/transformers.md, "Decoding on the
// chip"): every weight tile of the model (its linear layers' and the embedding's, N rows of
// N values each) read from weight memory (HBM) once, at the core's weight DMAs' rate
// (config::TpuConfig::CoreWeightRowCycles: a row a cycle a matrix unit, at most the
// channel's bytes), and every head's keys and values of the positions so far loaded into
// the matrix units, spread over them: a tile of keys transposed in 2N + 1 cycles, a tile of
// values in N + 1 (load_weights, docs/isa.md).
struct DecodeBound {
  double weights = 0, cache = 0;
  double Cycles() const { return weights + cache; }
};
// Of a step that computes one position with `positions` positions in the cache, for a
// decoder of `context` positions.
DecodeBound WeightsAndCacheBound(const nn::Model& m, const config::TpuConfig& config,
                                 int64_t context, int64_t positions);

struct ChipGeneration {
  std::vector<int64_t> tokens;  // the new tokens (empty in timing-only runs: no values)
  int64_t context = 0, vocabulary = 0, prompt = 0;
  // A row per operation each: the prefill's program (images: 1, the prompt), and the decode
  // steps' programs summed (images: the steps, one a token after the first).
  TpuRunResult prefill, decode;
  DecodeBound decode_bound;  // over the decode steps
  bool checked = true;       // values checked (not in timing-only runs)
  int64_t mismatches = 0;    // positions whose logits differ from nn::Bf16Net's (each
                             // phase's in its result's `mismatches` too)
  std::string first_mismatch;
  double wall_seconds = 0;
};

// `count` tokens after `prompt` on `engine`'s chip (core 0), greedily: the first from the
// prefill's logits at the prompt's last position, each next from a decode step's.
// `progress(done, count)` after each token. Throws UsageError as nn::GenerateGreedy and
// compiler::TransformerProgram do (an int8 chip, a model that is not a decoder of token
// ids), RuntimeError when the chip fails.
ChipGeneration GenerateOnTpu(const nn::Model& m, engine::ChipEngine& engine,
                             const std::vector<int64_t>& prompt, int64_t count,
                             const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tpu::run
