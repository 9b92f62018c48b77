// The chip's transformer program (host/compiler/transformer_program.h) on models built by
// hand: an attention of three heads side by side in a row's lanes, its keys given
// untransposed (matmul transpose_b, which PyTorch's exports do not use), scaled, then
// softmax, LayerNorm and GELU: bit for bit nn::Bf16Net's, on both engines of a 4 x 4 bf16
// chip (the RTL in the _rtl twin); and what it refuses, in one line each.
#include "host/compiler/transformer_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/isa/isa.h"
#include "host/nn/bf16_net.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/test_engines.h"

namespace tpu {
namespace {

// 5 tokens of 6 in `heads` heads (test::HandAttention).
nn::Model Attention(int heads) { return test::HandAttention(5, heads, 7); }

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

// The parameter sets (the identity's, the linear layers' biases) lie in weight memory after
// the constants and come from there (read_hbm params=), none over the host link: the host
// sends only the inputs. The program is still the bf16 rules' (the test above).
TEST(TransformerProgramGroupTest, TheParameterSetsComeFromHbm) {
  const config::TpuConfig c = Bf16Teach();
  const compiler::TransformerProgram prog(Attention(3), c, 2);
  const compiler::LayerJob job = prog.Build(Inputs(2, Attention(3).input.Size()));
  int from_hbm = 0;
  for (const isa::Word& w : job.exec.program.words) {
    const isa::Instruction in = isa::Decode(w);
    EXPECT_FALSE(in.opcode == isa::Opcode::kReadHost && (in.flags & hw::kFlagParams));
    from_hbm += in.opcode == isa::Opcode::kReadHbm && (in.flags & hw::kFlagParams);
  }
  EXPECT_GE(from_hbm, 1);
}

// Each group's input is read over the host link while the group before runs (a piece after
// each linear layer, here all of it after the projection): the second group's input rows
// are read before the first group's output is written, and every image is still the bf16
// rules' (the test above runs the same program).
TEST(TransformerProgramGroupTest, EachGroupsInputIsReadWhileTheGroupBeforeRuns) {
  config::TpuConfig c = Bf16Teach();
  c.ub_depth_rows = 260;
  const nn::Model m = Attention(3);
  const compiler::TransformerProgram prog(m, c, 6);
  ASSERT_EQ(prog.Group(), 2);
  const compiler::LayerJob job = prog.Build(Inputs(6, m.input.Size()));
  const uint64_t row_bytes = 2 * static_cast<uint64_t>(c.array_dim);
  std::vector<isa::Instruction> reads;  // the inputs' reads before the first output's write
  for (const isa::Word& w : job.exec.program.words) {
    const isa::Instruction in = isa::Decode(w);
    if (in.opcode == isa::Opcode::kWriteHost) break;
    if (in.opcode == isa::Opcode::kReadHost && !(in.flags & hw::kFlagParams)) reads.push_back(in);
  }
  ASSERT_FALSE(reads.empty());
  // (the first group's input: from host byte 0, its rows in one read)
  EXPECT_EQ(reads.front().src, 0u);
  const uint64_t second = reads.front().length * row_bytes;
  EXPECT_TRUE(std::any_of(reads.begin(), reads.end(),
                          [&](const isa::Instruction& in) { return in.src == second; }))
      << "the second group's input (host byte " << second << ") is not read ahead";
}

// The scores are scaled a head's rows at a time and the softmax works in pieces of whole
// heads, so that the softmax of the first heads starts before the last heads' scores are
// done: in the program, the softmax's first instruction comes before the scores' last (a
// buffer of 1,000 rows: pieces of 2 heads of 5 rows). Still the bf16 rules', image by image.
TEST(TransformerProgramGroupTest, TheSoftmaxOfTheFirstHeadsGoesBesideTheLastHeadsScores) {
  config::TpuConfig c = Bf16Teach();
  c.ub_depth_rows = 1000;
  const nn::Model m = Attention(3);
  const compiler::TransformerProgram prog(m, c, 2);
  const compiler::LayerJob job = prog.Build(Inputs(2, m.input.Size()));
  const std::vector<int32_t>& op = job.op_of;
  constexpr int32_t kScores = 1, kSoftmax = 2;  // (Operations(): 0, 7, 8, 9, 10)
  const auto first_softmax = std::find(op.begin(), op.end(), kSoftmax) - op.begin();
  const auto last_scores = op.rend() - std::find(op.rbegin(), op.rend(), kScores) - 1;
  EXPECT_LT(first_softmax, last_scores);
  EqualsTheBf16Rules(c, 2, engine::EngineKind::kFast, 2);
}

// Programs of some positions (compiler::Positions), on one engine whose memories keep what
// they hold: the first of every position, then one of each position t again, reading the
// keys and values the first left. Each computes exactly that position's rows of the whole
// pass (the attention is not causal, but every key and value is in the buffer), and the
// positions it does not compute are left as they were.
TEST_P(TransformerProgramTest, ProgramsOfOnePositionAfterAPrefillEqualTheWholePass) {
  const config::TpuConfig c = Bf16Teach();
  const nn::Model m = Attention(3);
  const int64_t t_all = m.input.w, cols = m.layers.back().out.c;
  const std::vector<uint16_t> x = Inputs(1, m.input.Size());
  std::vector<float> xf;
  for (const uint16_t v : x) xf.push_back(arith::FloatOfBits(arith::Fp32OfBf16(v)));
  const std::vector<uint16_t> want = nn::Bf16Net(m, c.array_dim).Forward(xf.data()).back();
  const auto chip = test::TestEngine(GetParam(), c);
  const compiler::TransformerProgram prefill(m, c, 1, {0, t_all}, nullptr);
  const engine::ExecResult first = chip->Run(prefill.Build(x).exec);
  ASSERT_TRUE(first.ok) << first.message;
  EXPECT_EQ(prefill.Decode(first.host_out), want);
  for (int64_t t = 0; t < t_all; ++t) {
    const compiler::TransformerProgram step(m, c, 1, {t, t + 1}, &prefill);
    const engine::ExecResult r = chip->Run(step.Build(x).exec);
    ASSERT_TRUE(r.ok) << r.message;
    const std::vector<uint16_t> got = step.Decode(r.host_out);
    for (int64_t h = 0; h < m.layers.back().out.h; ++h)
      for (int64_t col = 0; col < cols; ++col) {
        const auto at = static_cast<size_t>((h * t_all + t) * cols + col);
        ASSERT_EQ(got[at], want[at]) << "position " << t << ", head " << h << ", column " << col;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, TransformerProgramTest,
                         ::testing::ValuesIn(test::TestEngineKinds()),
                         [](const auto& info) { return engine::EngineKindName(info.param); });

// Accumulators of 16 rows: a head's scores (5 rows of 2 blocks) need more than a quarter of
// them, so each head runs in chunks of 2 rows, its tiles loaded again for each.
TEST(TransformerProgramGroupTest, HeadsInChunksOfRowsWhereTheAccumulatorsAreFew) {
  config::TpuConfig c = Bf16Teach();
  c.acc_depth_rows = 16;
  EqualsTheBf16Rules(c, 2, engine::EngineKind::kFast, 2);
}

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
  // A program of positions: of whole runs of the input's positions, [first, end).
  EXPECT_THROW(compiler::TransformerProgram(Attention(3), Bf16Teach(), 1, {3, 3}, nullptr),
               std::logic_error);
  EXPECT_TRUE(compiler::IsTransformer(Attention(3)));
  EXPECT_FALSE(compiler::IsTransformer(test::StridedSameModel(1)));
}

}  // namespace
}  // namespace tpu
