// The chip's transformer program (host/compiler/transformer_program.h) on models built by
// hand: an attention of three heads side by side in a row's lanes, its keys given
// untransposed (matmul transpose_b, which PyTorch's exports do not use), scaled, then
// softmax, LayerNorm and GELU: bit for bit nn::Bf16Net's, on both engines of a 4 x 4 bf16
// chip (the RTL in the _rtl twin); and what it refuses, in one line each.
#include "host/compiler/transformer_program.h"

#include <gtest/gtest.h>

#include <random>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/nn/bf16_net.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/test_engines.h"

namespace tpu {
namespace {

using nn::LayerType;

// 5 tokens of 6 values: a projection to Q and K (12), sliced, split into `heads` heads,
// QKᵀ x 0.5 (B untransposed: transpose_b), softmax, layer_norm, gelu.
nn::Model Attention(int heads) {
  nn::Model m;
  m.name = "attention";
  m.input = {1, 5, 6};
  m.preprocess = "none";
  const auto layer = [](LayerType t, std::vector<int> inputs) {
    nn::Layer l = test::MakeLayer(t);
    l.inputs = std::move(inputs);
    return l;
  };
  nn::Layer qk = test::MakeLayer(LayerType::kConv2d, 12, 1, 1, "valid", nn::Activation::kNone);
  qk.inputs = {nn::kModelInput};
  nn::Layer q = layer(LayerType::kSlice, {0}), k = layer(LayerType::kSlice, {0});
  q.end = 6;
  k.start = 6;
  k.end = 12;
  nn::Layer rq = layer(LayerType::kReshape, {1}), rk = layer(LayerType::kReshape, {2});
  rq.out = rk.out = {5, heads, 6 / heads};
  nn::Layer tq = layer(LayerType::kTranspose, {3}), tk = layer(LayerType::kTranspose, {4});
  tq.perm = tk.perm = {1, 0, 2};
  nn::Layer mm = layer(LayerType::kMatMul, {5, 6});
  mm.transpose_b = true;
  mm.scale = 0.5f;
  nn::Layer ln = layer(LayerType::kLayerNorm, {8});
  ln.epsilon = 1e-3f;
  m.layers = {qk,
              q,
              k,
              rq,
              rk,
              tq,
              tk,
              mm,
              layer(LayerType::kSoftmax, {7}),
              ln,
              layer(LayerType::kGelu, {9})};
  return test::Randomize(m, 7);
}

config::TpuConfig Bf16Teach() {
  config::TpuConfig c = config::LoadConfig("teach-4");
  c.dtype = hw::Dtype::kBf16;
  return c;
}

std::vector<uint16_t> Inputs(int batch, int64_t size) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(batch * size));
  for (uint16_t& v : x) v = arith::Bf16OfFp32(arith::BitsOfFloat(d(rng)));
  return x;
}

class TransformerProgramTest : public ::testing::TestWithParam<engine::EngineKind> {};

// The program for `batch` images on c equals nn::Bf16Net image by image.
void EqualsTheBf16Rules(const config::TpuConfig& c, int batch, engine::EngineKind kind, int group) {
  const nn::Model m = Attention(3);
  const compiler::TransformerProgram prog(m, c, batch);
  EXPECT_EQ(prog.Group(), group);
  const std::vector<uint16_t> x = Inputs(batch, m.input.Size());
  const auto chip = test::TestEngine(kind, c);
  const engine::ExecResult r = chip->Run(prog.Build(x).exec);
  ASSERT_TRUE(r.ok) << r.message;
  const std::vector<uint16_t> got = prog.Decode(r.host_out);
  const nn::Bf16Net ref(m, c.array_dim);
  const auto out = static_cast<size_t>(m.layers.back().out.Size());
  for (int i = 0; i < batch; ++i) {
    std::vector<float> xi;
    for (int64_t v = 0; v < m.input.Size(); ++v)
      xi.push_back(
          arith::FloatOfBits(arith::Fp32OfBf16(x[static_cast<size_t>(i * m.input.Size() + v)])));
    const std::vector<uint16_t> want = ref.Forward(xi.data()).back();
    EXPECT_EQ(std::vector<uint16_t>(got.begin() + static_cast<std::ptrdiff_t>(i * out),
                                    got.begin() + static_cast<std::ptrdiff_t>((i + 1) * out)),
              want)
        << "image " << i;
  }
  EXPECT_EQ(prog.Operations(), (std::vector<int>{0, 7, 8, 9, 10}));
}

TEST_P(TransformerProgramTest, ThreeHeadsSideBySideEqualTheBf16Rules) {
  EqualsTheBf16Rules(Bf16Teach(), 2, GetParam(), 2);
}

// A buffer that holds the tensors of 2 of 6 images (the largest divisor of 6 that fits):
// three groups, one after another.
// (The fast engine: the RTL's buffer depth is built in.)
TEST(TransformerProgramGroupTest, GroupsOfImagesWhereTheBatchDoesNotFit) {
  config::TpuConfig c = Bf16Teach();
  c.ub_depth_rows = 260;
  EqualsTheBf16Rules(c, 6, engine::EngineKind::kFast, 2);
}

INSTANTIATE_TEST_SUITE_P(Engines, TransformerProgramTest,
                         ::testing::ValuesIn(test::TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

// Refusals name what was wrong in one line.
std::string Refusal(const nn::Model& m, const config::TpuConfig& c, int batch) {
  try {
    compiler::TransformerProgram(m, c, batch);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(not refused)";
}

TEST(TransformerProgramRefusalTest, HeadsAcrossABlockAnInt8ChipAndAFullBuffer) {
  EXPECT_NE(Refusal(Attention(2), Bf16Teach(), 1).find("cross a block of 4 lanes"),
            std::string::npos);  // heads of 3 lanes on a 4-lane chip
  EXPECT_NE(Refusal(Attention(3), config::LoadConfig("teach-4"), 1).find("is an int8 chip"),
            std::string::npos);
  config::TpuConfig small = Bf16Teach();
  small.ub_depth_rows = 60;
  EXPECT_NE(Refusal(Attention(3), small, 8).find("unified-buffer rows"), std::string::npos);
  EXPECT_TRUE(compiler::IsTransformer(Attention(3)));
  EXPECT_FALSE(compiler::IsTransformer(test::StridedSameModel(1)));
}

}  // namespace
}  // namespace tpu
