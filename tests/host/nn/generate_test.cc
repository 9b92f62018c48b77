// Greedy decoding on the CPU (host/nn/generate.h): a decoder built by hand whose next token is
// a table's (each position's logits are its token's row of a vocabulary x vocabulary table,
// through an embedding and a 1 x 1 projection), so the tokens follow the table; and every
// refusal names what is wrong.
#include "host/nn/generate.h"

#include <gtest/gtest.h>

#include "host/common/errors.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu::nn {
namespace {

// Token t's logits peak at (3 t + 1) mod 7: an embedding of one-hot rows, then a projection
// whose row t is one-hot at that token.
Model Successor() {
  Model m;
  m.name = "successor";
  m.input = {1, 6, 1};
  m.preprocess = m.dataset = "none";
  Layer e = test::MakeLayer(LayerType::kEmbedding);
  e.start = 7;
  e.out = {1, 1, 7};
  Layer p = test::MakeLayer(LayerType::kConv2d, 7, 1, 1, "valid", Activation::kNone);
  m.layers = {e, p};
  m = test::Randomize(m, 1);
  for (int t = 0; t < 7; ++t)
    for (int k = 0; k < 7; ++k) {
      m.layers[0].weights.data[static_cast<size_t>(t * 7 + k)] = t == k ? 1.0f : 0.0f;
      m.layers[1].weights.data[static_cast<size_t>(t * 7 + k)] = k == (3 * t + 1) % 7 ? 1 : 0;
    }
  m.layers[1].bias.data.assign(7, 0.0f);
  return m;
}

std::string ErrorOf(const Model& m, const std::vector<int64_t>& prompt, int64_t count) {
  try {
    GenerateGreedy(m, prompt, count);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(GenerateTest, TheTokensFollowTheModelsLogits) {
  int64_t calls = 0;
  const Generated g = GenerateGreedy(Successor(), {2}, 5, [&](int64_t done, int64_t n) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(n, 5);
  });
  EXPECT_EQ(g.tokens, (std::vector<int64_t>{0, 1, 4, 6, 5}));
  EXPECT_EQ(g.context, 6);
  EXPECT_EQ(g.vocabulary, 7);
}

TEST(GenerateTest, RefusalsNameWhatIsWrong) {
  const Model m = Successor();
  EXPECT_NE(ErrorOf(m, {2, 3}, 5)
                .find("a prompt of 2 tokens and --tokens 5 make 7; model "
                      "'successor' reads 6 tokens"),
            std::string::npos);
  EXPECT_NE(ErrorOf(m, {7}, 1).find("prompt token 0 is 7, not an id in 0..6"), std::string::npos);
  EXPECT_NE(ErrorOf(m, {}, 1).find("the prompt is empty"), std::string::npos);
  Model open = m;  // a position that reads the one after it is not causal
  open.layers[1].kernel_w = 2;
  open.layers[1].padding = "same";
  open.layers[1].weights.shape = {1, 2, 7, 7};
  open.layers[1].weights.data.resize(2 * 49);
  for (size_t i = 0; i < open.layers[1].weights.data.size(); ++i)
    open.layers[1].weights.data[i] = static_cast<float>(i % 5);
  InferShapes(&open);
  EXPECT_NE(ErrorOf(open, {2}, 1).find("is not causal"), std::string::npos)
      << ErrorOf(open, {2}, 1);
  Model image = test::StridedSameModel(1);
  EXPECT_NE(ErrorOf(image, {1}, 1).find("not token ids"), std::string::npos);
}

}  // namespace
}  // namespace tpu::nn
