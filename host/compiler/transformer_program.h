// A transformer's forward pass as one program per batch on a bf16 chip (issue 75;
// docs/transformers.md, "On the chip"), in the bfloat16 rules of nn::Bf16Net bit for bit:
// its 1 x 1 convolutions (the linear layers) through weight tiles from weight memory; the
// products of two computed tensors (attention's scores and context) on the array with the
// second operand from the unified buffer, each head's rows and lanes moved into a weight
// tile through the array (a tile of ones that moves lanes, the Cloud TPU core's operands
// computed and transposed on load); softmax, LayerNorm, GELU and the adds on the float32
// vector unit. Reshapes, transposes and slices move nothing: each is a view of where its
// input's values lie (a position's row, a channel's lane), read in place by the products.
//
// Every tensor is kept in the unified buffer for a group of G images (the batch, or the
// largest divisor of it whose tensors fit), a position a row per block of N channels
// (block-major: block b of image i's position p at row base + (b G + i) P + p), freed after
// its last reader; the groups run one after another.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/compiler/layer_compiler.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"

namespace tpu::compiler {

// Whether `m` has one of a transformer's operations (host/nn/ops/transformer_ops.h), which
// run as a TransformerProgram, not through the graph lowering.
bool IsTransformer(const nn::Model& m);

struct TransformerLayout;
struct EmitterState;

// The positions of the sequence a program computes (docs/transformers.md, "Decoding on the
// chip"): every one (a forward pass), or [first, end) of a batch of token sequences with
// the tensors that attention's products read (its keys and values) kept in the unified
// buffer between programs: a prefill of the prompt's positions, then a decode step at each
// new position, each program reading what the ones before it left. Where attention's scores
// are read only by a causal mask, the blocks of scores whose keys all lie after the last
// position are not computed (their rows zeroed: masked, they add nothing).
struct Positions {
  int64_t first = 0, end = -1;  // end < 0: every position, nothing kept
  bool Cached() const { return end >= 0; }
};

class TransformerProgram {
 public:
  // Compiles `m` for `batch` images on `config`. Throws UsageError for an int8 chip, a layer
  // or a view it does not take (naming it and what it takes), or tensors that do not fit the
  // unified buffer (saying how many rows they need). `link_cores`: how many cores run
  // programs beside this one (each a share of a batch), sharing the host link.
  TransformerProgram(const nn::Model& m, const config::TpuConfig& config, int batch,
                     int link_cores = 1);
  // The program of positions `at` (at.Cached()), after the cached program `after` (nullptr:
  // the first, which also puts the constants into the buffer and zeroes the kept tensors'
  // rows it does not write): its tensors where `after`'s lie, its constants and weight
  // tiles `after`'s. Throws UsageError for a model whose tensors are not each image's T
  // positions (or a number of runs of them), as a decoder's are.
  TransformerProgram(const nn::Model& m, const config::TpuConfig& config, int batch,
                     const Positions& at, const TransformerProgram* after);
  ~TransformerProgram();
  TransformerProgram(TransformerProgram&&) noexcept;

  // The job for the batch whose inputs (batch x the input's values, bfloat16) are `act`: its
  // op_of names each instruction's operation (Operations()).
  LayerJob Build(const std::vector<uint16_t>& act) const;
  // The model's outputs (batch x its output's values) from the job's output bytes.
  std::vector<uint16_t> Decode(const std::vector<uint8_t>& out) const;
  // The model's layers that are operations of the program, in order (the views are none).
  const std::vector<int>& Operations() const;
  int Batch() const { return batch_; }
  // Images per group: the batch runs in groups, each through every layer, the largest
  // group (a divisor of the batch) whose tensors fit the unified buffer.
  int Group() const;
  int64_t UbRows() const;

 private:
  void Emit(const nn::Model& m, const config::TpuConfig& config, int group, int groups,
            const Positions& at = {}, const TransformerProgram* after = nullptr,
            bool next_fit = false, bool read_ahead = false);
  static void CheckBf16(const config::TpuConfig& config);
  int batch_;
  int link_cores_ = 1;
  std::unique_ptr<TransformerLayout> t_;
};

}  // namespace tpu::compiler
