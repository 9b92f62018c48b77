// A transformer's learned tensors joined to its activations (docs/transformers.md): ViT's
// class token, `prepend`ed before the patches along the tokens (axis w: y = its weights'
// rows, then x's), and its position embeddings, added value by value (`add_constant`:
// y = x + weights, weights of x's shape); a GPT's token embeddings (`embedding`: each token
// id's row of its weights). Their weights are per image; they have no bias.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::nn::ops {
namespace {

int64_t NoColumns(const Layer& /*l*/) { return 0; }

std::vector<int64_t> AddWeights(const Layer& l) { return {l.out.h, l.out.w, l.out.c}; }

void InferAdd(const Model& /*m*/, const std::string& /*where*/, Layer* l) { l->out = l->in; }

void AddForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                MatrixF* out) {
  const Eigen::Map<const Eigen::RowVectorXf> w(l.weights.data.data(), l.out.Size());
  *out = xs[0]->rowwise() + w;
}

// The prepended rows: `start` rows of w (the weights are 1 x start x c).
std::vector<int64_t> PrependWeights(const Layer& l) { return {1, l.start, l.out.c}; }

void InferPrepend(const Model& /*m*/, const std::string& where, Layer* l) {
  if (l->in.h != 1 || l->start < 1)
    throw UsageError(fmt::format("{}: prepend puts rows before a 1 x w x c tensor ({} x {} x {})",
                                 where, l->in.h, l->in.w, l->in.c));
  l->out = {1, l->in.w + l->start, l->in.c};
}

void PrependForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                    MatrixF* out) {
  const int64_t head = l.start * int64_t{l.in.c};
  out->resize(xs[0]->rows(), l.out.Size());
  const Eigen::Map<const Eigen::RowVectorXf> w(l.weights.data.data(), head);
  for (Eigen::Index r = 0; r < out->rows(); ++r) {
    out->row(r).head(head) = w;
    out->row(r).tail(xs[0]->cols()) = xs[0]->row(r);
  }
}

void ReadRows(const nlohmann::json& lj, const std::string& where, Layer* l) {
  l->start = lj.value("rows", 0);
  if (l->start < 1) throw UsageError(where + ": prepend needs rows >= 1");
}

void WriteRows(const Layer& l, nlohmann::json* lj) { (*lj)["rows"] = l.start; }

}  // namespace

const OpDef& AddConstantOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kAddConstant, "add_constant");
    d.weight_shape = AddWeights;
    d.columns = NoColumns;
    d.infer = InferAdd;
    d.forward = AddForward;
    return d;
  }();
  return op;
}

const OpDef& PrependOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kPrepend, "prepend");
    d.read = ReadRows;
    d.write = WriteRows;
    d.weight_shape = PrependWeights;
    d.columns = NoColumns;
    d.infer = InferPrepend;
    d.forward = PrependForward;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops

namespace tpu::nn::ops {
namespace {

// An embedding: each position's value is a token id (an integer in a float), its output
// that row of the weights (vocabulary x c).
std::vector<int64_t> EmbeddingWeights(const Layer& l) { return {l.start, l.out.c}; }

void InferEmbedding(const Model& /*m*/, const std::string& where, Layer* l) {
  if (l->in.c != 1 || l->start < 1)
    throw UsageError(
        fmt::format("{}: embedding reads one token id a position (its input is {} "
                    "x {} x {})",
                    where, l->in.h, l->in.w, l->in.c));
  l->out.h = l->in.h;
  l->out.w = l->in.w;
}

void EmbeddingForward(const Layer& l, const std::vector<const MatrixF*>& xs, MatrixF* /*cols*/,
                      MatrixF* out) {
  const MatrixF& x = *xs[0];
  const int64_t c = l.out.c;
  out->resize(x.rows(), x.cols() * c);
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (Eigen::Index p = 0; p < x.cols(); ++p) {
      const float id = x(r, p);
      if (!(id >= 0 && id < static_cast<float>(l.start)) || id != std::floor(id))
        throw UsageError(
            fmt::format("embedding '{}': token {} of input {} is {}, not an id in "
                        "0..{}",
                        l.name, p, r, id, l.start - 1));
      const float* row = l.weights.data.data() + static_cast<int64_t>(id) * c;
      std::copy(row, row + c, out->row(r).data() + p * c);
    }
}

void ReadVocabulary(const nlohmann::json& lj, const std::string& where, Layer* l) {
  l->start = lj.value("vocabulary", 0);
  l->out.c = lj.value("units", 0);
  if (l->start < 1 || l->out.c < 1)
    throw UsageError(where + ": embedding needs vocabulary >= 1 and units >= 1");
}

void WriteVocabulary(const Layer& l, nlohmann::json* lj) {
  (*lj)["vocabulary"] = l.start;
  (*lj)["units"] = l.out.c;
}

}  // namespace

const OpDef& EmbeddingOp() {
  static const OpDef op = [] {
    OpDef d = FloatOnly(LayerType::kEmbedding, "embedding");
    d.read = ReadVocabulary;
    d.write = WriteVocabulary;
    d.weight_shape = EmbeddingWeights;
    d.columns = NoColumns;
    d.infer = InferEmbedding;
    d.forward = EmbeddingForward;
    return d;
  }();
  return op;
}

}  // namespace tpu::nn::ops
