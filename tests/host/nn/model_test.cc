// The model description and file format (host/nn/model.cc): the LeNet-5 summary, round
// trips through model.json + .npy, and every malformed model named clearly.
#include "host/nn/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "host/common/errors.h"
#include "host/nn/fp32_net.h"
#include "host/nn/inputs.h"
#include "host/nn/int8_reference.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu::nn {
namespace {
namespace fs = std::filesystem;

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("tpusim_model_" + std::to_string(::getpid()))).string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string ErrorOf() {
    try {
      LoadModel(dir_);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
  void EditJson(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j;
    std::ifstream(dir_ + "/model.json") >> j;
    edit(j);
    std::ofstream(dir_ + "/model.json") << j.dump(2);
  }
  std::string dir_;
};

TEST_F(ModelTest, Lenet5HasTheCoursesParameterCounts) {
  const Model m = MakeLenet5(1);
  std::vector<int64_t> counts;
  for (const Layer& l : m.layers)
    if (l.HasWeights()) counts.push_back(l.ParamCount());
  EXPECT_EQ(counts, (std::vector<int64_t>{60, 880, 69240, 10164, 850}));
  EXPECT_EQ(m.ParamCount(), 81194);
  EXPECT_EQ(m.layers[4].out.c, 576) << "flatten";
  const std::string s = Summary(m);
  for (const char* text : {"69,240", "10,164", "81,194", "30 x 30 x 6", "6 x 6 x 16"}) {
    EXPECT_NE(s.find(text), std::string::npos) << text << "\n" << s;
  }
}

TEST_F(ModelTest, Fp32RoundTrip) {
  const Model m = test::StridedSameModel(3);
  SaveModel(m, dir_);
  const Model back = LoadModel(dir_);
  ASSERT_EQ(back.layers.size(), m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].name, m.layers[i].name);
    EXPECT_EQ(back.layers[i].type, m.layers[i].type);
    EXPECT_TRUE(back.layers[i].out == m.layers[i].out);
    EXPECT_EQ(back.layers[i].weights.data, m.layers[i].weights.data);
    EXPECT_EQ(back.layers[i].bias.data, m.layers[i].bias.data);
    EXPECT_EQ(back.layers[i].padding, m.layers[i].padding);
    EXPECT_EQ(back.layers[i].stride, m.layers[i].stride);
  }
}

TEST_F(ModelTest, Int8RoundTrip) {
  Model m = test::AvgPoolModel(4);
  Quantize(&m, test::RandomImages(m, 20, 5), 20);
  SaveModel(m, dir_);
  const Model back = LoadModel(dir_);
  ASSERT_TRUE(back.quantized);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer &a = m.layers[i], &b = back.layers[i];
    if (!a.HasWeights()) continue;
    EXPECT_EQ(a.q.weights.data, b.q.weights.data);
    EXPECT_EQ(a.q.bias.data, b.q.bias.data);
    EXPECT_EQ(a.q.multiplier, b.q.multiplier);
    EXPECT_EQ(a.q.shift, b.q.shift);
    EXPECT_EQ(a.q.weight_scales, b.q.weight_scales);
    EXPECT_EQ(a.q.input_scale, b.q.input_scale);
  }
}

// The layer kinds of imported models survive the files: depthwise kernels stored compact
// (kh x kw x c x 1) and expanded again, per-side padding, pooling windows and strides,
// global pooling, ReLU6; fp32 and int8.
TEST_F(ModelTest, ImportedLayerKindsRoundTrip) {
  Model m;
  m.name = "kinds";
  m.input = {9, 8, 2};
  Layer dw = test::MakeLayer(LayerType::kConv2d, 2, 3, 2, "explicit", Activation::kRelu6);
  dw.depthwise = true;
  dw.pad_top = 2, dw.pad_bottom = 0, dw.pad_left = 1, dw.pad_right = 1;  // 5 x 4 x 2
  Layer pool = test::MakeLayer(LayerType::kMaxPool2d);
  pool.pool_h = 2, pool.pool_w = 3, pool.pool_stride = 1;  // 4 x 2 x 2
  Layer gap = test::MakeLayer(LayerType::kAvgPool2d);
  gap.global_pool = true;
  m.layers = {dw, pool, gap, test::MakeLayer(LayerType::kFlatten),
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kNone)};
  m = test::Randomize(m, 9);
  Quantize(&m, test::RandomImages(m, 20, 5), 20);
  EXPECT_EQ(m.layers[0].out, (Shape3{5, 4, 2}));
  EXPECT_EQ(m.layers[1].out, (Shape3{4, 2, 2}));
  EXPECT_EQ(m.layers[2].out, (Shape3{1, 1, 2}));
  EXPECT_EQ(m.layers[0].ParamCount(), 3 * 3 * 2 + 2);
  SaveModel(m, dir_);
  EXPECT_EQ(ReadNpyTensor<float>(dir_ + "/l0.weights.npy").shape,
            (std::vector<int64_t>{3, 3, 2, 1}));
  const Model back = LoadModel(dir_);
  ASSERT_EQ(back.layers.size(), m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer &a = m.layers[i], &b = back.layers[i];
    EXPECT_EQ(b.TypeName(), a.TypeName());
    EXPECT_EQ(b.out, a.out);
    EXPECT_EQ(b.activation, a.activation);
    EXPECT_EQ(b.weights.data, a.weights.data);
    EXPECT_EQ(b.q.weights.data, a.q.weights.data);
    EXPECT_EQ((std::vector<int>{b.pad_top, b.pad_left, b.pad_bottom, b.pad_right}),
              (std::vector<int>{a.pad_top, a.pad_left, a.pad_bottom, a.pad_right}));
    EXPECT_EQ((std::vector<int>{b.pool_h, b.pool_w, b.pool_stride}),
              (std::vector<int>{a.pool_h, a.pool_w, a.pool_stride}));
  }
  const std::string s = Summary(back);
  EXPECT_NE(s.find("depthwise_conv2d"), std::string::npos) << s;
  EXPECT_NE(s.find("relu6"), std::string::npos) << s;
}

// A batch_norm layer: gamma and beta as its weights and bias, its running statistics as
// files of their own, its epsilon and momentum in model.json; the chip's inference refuses it
// with the command that folds it.
TEST_F(ModelTest, BatchNormRoundTripsWithItsRunningStatistics) {
  Model m;
  m.name = "bn";
  m.input = {5, 5, 2};
  Layer bn = test::MakeLayer(LayerType::kBatchNorm);
  bn.epsilon = 1e-3f;
  bn.momentum = 0.25f;
  m.layers = {test::MakeLayer(LayerType::kConv2d, 3, 3, 1, "valid", Activation::kNone), bn,
              test::MakeLayer(LayerType::kFlatten),
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kSoftmax)};
  m = test::Randomize(m, 4);
  SaveModel(m, dir_);
  EXPECT_EQ(ReadNpyTensor<float>(dir_ + "/l1.running_var.npy").data, m.layers[1].state[1].data);
  const Model back = LoadModel(dir_);
  const Layer& b = back.layers[1];
  EXPECT_EQ(b.type, LayerType::kBatchNorm);
  EXPECT_EQ(b.weights.data, m.layers[1].weights.data);
  EXPECT_EQ(b.bias.data, m.layers[1].bias.data);
  ASSERT_EQ(b.state.size(), 2u);
  EXPECT_EQ(b.state[0].data, m.layers[1].state[0].data);
  EXPECT_EQ(b.state[1].data, m.layers[1].state[1].data);
  EXPECT_EQ(b.epsilon, 1e-3f);
  EXPECT_EQ(b.momentum, 0.25f);
  EXPECT_EQ(b.ParamCount(), 6);
  Model q = back;
  try {
    Quantize(&q, test::RandomImages(q, 4, 5), 4);
    ADD_FAILURE() << "a batch_norm layer was quantized";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--fold-batchnorm"), std::string::npos) << e.what();
  }
}

// A transformer's layers (docs/transformers.md): one head-split self-attention built by hand
// (QK projection, slices, reshapes, transposes, a scaled matmul with B transposed, softmax,
// layer_norm, gelu) survives the files field by field, and computes what the formulas say.
TEST_F(ModelTest, AttentionLayersRoundTripAndComputeAttention) {
  Model m = test::HandAttention(4, 2, 5);  // 4 tokens of 6, 2 heads of 3
  SaveModel(m, dir_);
  const Model back = LoadModel(dir_);
  EXPECT_EQ(back.layers[2].start, 6);
  EXPECT_EQ(back.layers[3].out, (Shape3{4, 2, 3}));
  EXPECT_EQ(back.layers[5].perm, (std::array<int, 3>{1, 0, 2}));
  EXPECT_TRUE(back.layers[7].transpose_b);
  EXPECT_EQ(back.layers[7].scale, 0.5f);
  EXPECT_EQ(back.layers[9].epsilon, 1e-3f);
  EXPECT_EQ(back.layers[9].weights.data, m.layers[9].weights.data);
  EXPECT_EQ(back.layers.back().out, (Shape3{2, 4, 4}));
  MatrixF x = MatrixF::Random(2, 24);
  ForwardCache a, b;
  Forward(m, x, &a);
  Forward(back, x, &b);
  EXPECT_EQ(a.acts.back(), b.acts.back());
  const Layer& norm = m.layers[9];
  for (int image = 0; image < 2; ++image) {
    const float* y = a.acts[1].row(image).data();  // the projection: 4 tokens x 12
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) {
        double s[4], mx = -1e30, sum = 0, p[4], mean = 0, var = 0;
        for (int j = 0; j < 4; ++j) {
          s[j] = 0;
          for (int d = 0; d < 3; ++d)
            s[j] += 0.5 * y[i * 12 + h * 3 + d] * y[j * 12 + 6 + h * 3 + d];
          mx = std::max(mx, s[j]);
        }
        for (int j = 0; j < 4; ++j) sum += (p[j] = std::exp(s[j] - mx));
        for (int j = 0; j < 4; ++j) mean += (p[j] /= sum) / 4;
        for (int j = 0; j < 4; ++j) var += (p[j] - mean) * (p[j] - mean) / 4;
        for (int j = 0; j < 4; ++j) {
          const double z =
              (p[j] - mean) / std::sqrt(var + 1e-3) * norm.weights.data[j] + norm.bias.data[j];
          const double want = z * (std::erf(z / std::sqrt(2.0)) + 1) / 2;
          EXPECT_NEAR(a.acts.back()(image, h * 16 + i * 4 + j), want, 2e-5)
              << "image " << image << " head " << h << " query " << i << " key " << j;
        }
      }
  }
}

// A transformer's learned tensors (docs/transformers.md): token embeddings, a prepended class
// token and position embeddings survive the files and give each token's row, the class
// token's row first, plus the position's; a token id outside the vocabulary is named.
TEST_F(ModelTest, EmbeddingsPrependAndAddConstantRoundTripAndPickTheirRows) {
  Model m;
  m.name = "embed";
  m.input = {1, 3, 1};  // 3 token ids
  Layer e = test::MakeLayer(LayerType::kEmbedding), p = test::MakeLayer(LayerType::kPrepend),
        a = test::MakeLayer(LayerType::kAddConstant);
  e.start = 5;  // vocabulary
  e.out = {1, 1, 4};
  p.start = 1;  // one row
  m.layers = {e, p, a};
  m = test::Randomize(m, 6);
  SaveModel(m, dir_);
  const Model back = LoadModel(dir_);
  EXPECT_EQ(back.layers[0].weights.data, m.layers[0].weights.data);
  EXPECT_EQ(back.layers[1].weights.data, m.layers[1].weights.data);
  EXPECT_EQ(back.layers[2].weights.shape, (std::vector<int64_t>{1, 4, 4}));
  MatrixF ids(1, 3);
  ids << 0, 4, 2;
  ForwardCache c;
  Forward(back, ids, &c);
  const std::vector<float>& we = m.layers[0].weights.data;
  const std::vector<float>& cls = m.layers[1].weights.data;
  const std::vector<float>& pos = m.layers[2].weights.data;
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < 4; ++k) {
      const float row = t == 0 ? cls[k] : we[static_cast<size_t>(ids(0, t - 1)) * 4 + k];
      EXPECT_EQ(c.acts.back()(0, t * 4 + k), row + pos[t * 4 + k]) << t << " " << k;
    }
  ids(0, 1) = 5;
  try {
    Forward(back, ids, &c);
    ADD_FAILURE() << "token 5 of a vocabulary of 5 was embedded";
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find("token 1 of input 0 is 5, not an id in 0..4"),
              std::string::npos)
        << err.what();
  }
}

// An LSTM layer: its fields and int8 form (4H gate columns, the cell's scale and
// requantizations) survive the files; its int8 outputs follow the fp32 cell's within the
// bound the chip's LSTM test uses (0.1, about 13 steps of h's scale 1/127); its cell scale
// is calibrated (max |c| / 127 over the calibration inputs).
TEST_F(ModelTest, LstmLayersRoundTripAndTheirInt8OutputsFollowTheFp32Cell) {
  Model m;
  m.name = "lstm";
  m.preprocess = "none";
  m.dataset = "none";
  m.input = {1, 20, 4};  // 20 steps of 4 inputs
  m.layers = {test::MakeLayer(LayerType::kLstm, 6),
              test::MakeLayer(LayerType::kDense, 3, 1, 1, "valid", Activation::kNone)};
  m = test::Randomize(m, 21);
  // Gates i, f near 1 and g near tanh(2): c grows by about 0.9 a step, to about 18 (a cell
  // scale of 1/127 would clamp it at 1).
  std::vector<float>& bias = m.layers[0].bias.data;
  std::fill(bias.begin(), bias.begin() + 12, 3.0f);
  std::fill(bias.begin() + 12, bias.begin() + 18, 2.0f);
  const InputSet in = SyntheticInputs(m, 32, 22);
  Quantize(&m, in, 32);
  const Layer& l = m.layers[0];
  EXPECT_EQ(l.out, (Shape3{1, 1, 6}));
  EXPECT_EQ(l.q.bias.data.size(), 24u);
  EXPECT_EQ(l.q.cell_multiplier.size(), 4u);
  EXPECT_GT(l.q.cell_scale, 10.0f / 127);
  EXPECT_EQ(l.Macs(), 4 * 6 * 3 + 19 * (4 + 6) * 4 * 6);  // no h (h0 = 0) or f (c0 = 0) at first
  SaveModel(m, dir_);
  const Model back = LoadModel(dir_);
  const Layer& b = back.layers[0];
  EXPECT_EQ(b.TypeName(), "lstm");
  EXPECT_EQ(b.weights.data, l.weights.data);
  EXPECT_EQ(b.q.weights.data, l.q.weights.data);
  EXPECT_EQ(b.q.bias.data, l.q.bias.data);
  EXPECT_EQ(b.q.cell_scale, l.q.cell_scale);
  EXPECT_EQ(b.q.cell_multiplier, l.q.cell_multiplier);
  EXPECT_EQ(b.q.cell_shift, l.q.cell_shift);
  ForwardCache cache;
  Forward(back, Fp32Inputs(in, 0, 8), &cache);
  const auto x = Int8Inputs(back, in, 0, 8);
  float worst = 0;
  for (int64_t i = 0; i < 8; ++i) {
    const std::vector<std::vector<int8_t>> y = ReferenceInt8(back, x.row(i).data());
    for (int64_t u = 0; u < 6; ++u)
      worst =
          std::max(worst, std::fabs(y[0][static_cast<size_t>(u)] / 127.0f - cache.acts[1](i, u)));
  }
  EXPECT_LT(worst, 0.1f);
  EXPECT_GT(worst, 0.0f);  // int8 is not exact: the comparison is of two computations
}

TEST_F(ModelTest, MissingModel) { EXPECT_NE(ErrorOf().find("cannot open"), std::string::npos); }

// A model without int8 weights is refused with the command that makes them.
TEST_F(ModelTest, AnFp32ModelIsRefusedWithTheQuantizeCommand) {
  Model m = MakeLenet5(1);
  try {
    RequireQuantized(m, " (note)");
    ADD_FAILURE() << "an fp32 model passed";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tpusim quantize --model DIR --out DIR-int8"), std::string::npos) << what;
    EXPECT_EQ(what.substr(what.size() - 7), " (note)") << what;
  }
  m.quantized = true;
  EXPECT_NO_THROW(RequireQuantized(m));
}

// A file given as the model (an ONNX export, say) is named as one, with the import to run.
TEST_F(ModelTest, AFileIsNotAModelFolder) {
  std::ofstream(dir_) << "not a folder";
  const std::string e = ErrorOf();
  EXPECT_NE(e.find("is a file"), std::string::npos) << e;
  EXPECT_NE(e.find("tpusim import " + dir_ + " --out DIR"), std::string::npos) << e;
}

TEST_F(ModelTest, MissingTensorFile) {
  SaveModel(test::StridedSameModel(6), dir_);
  fs::remove(dir_ + "/l3.weights.npy");
  EXPECT_NE(ErrorOf().find("l3.weights.npy: cannot open"), std::string::npos) << ErrorOf();
}

TEST_F(ModelTest, TensorShapeDisagreesWithModelJson) {
  SaveModel(test::StridedSameModel(7), dir_);
  Tensor<float> wrong{{3, 3}, std::vector<float>(9, 0.0f)};
  WriteNpyTensor(dir_ + "/l3.weights.npy", wrong);
  const std::string e = ErrorOf();
  EXPECT_NE(e.find("shape is 3 x 3 but layer 'l3'"), std::string::npos) << e;
}

TEST_F(ModelTest, UnknownLayerType) {
  SaveModel(test::StridedSameModel(8), dir_);
  EditJson([](nlohmann::json& j) { j["layers"][1]["type"] = "gru"; });
  EXPECT_NE(ErrorOf().find("unknown layer type 'gru'"), std::string::npos) << ErrorOf();
}

TEST_F(ModelTest, OutShapeThatDoesNotFollow) {
  SaveModel(test::StridedSameModel(9), dir_);
  EditJson([](nlohmann::json& j) { j["layers"][0]["out_shape"] = {4, 4, 3}; });
  EXPECT_NE(ErrorOf().find("out_shape disagrees"), std::string::npos) << ErrorOf();
}

TEST_F(ModelTest, KernelLargerThanInput) {
  SaveModel(test::StridedSameModel(10), dir_);
  EditJson([](nlohmann::json& j) {
    j["layers"][0]["padding"] = "valid";
    j["layers"][0]["kernel"] = {11, 11};
  });
  EXPECT_NE(ErrorOf().find("does not fit"), std::string::npos) << ErrorOf();
}

TEST_F(ModelTest, NotAModel) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/model.json") << R"({"hello": 1})";
  EXPECT_NE(ErrorOf().find("not a tpusim model"), std::string::npos);
}

// The operation table (host/nn/ops/op.h): each LayerType's definition, found by its type and
// its model.json name.
TEST(OpTableTest, EveryLayerTypeHasItsOperationFoundByTypeAndName) {
  std::set<std::string> names;
  for (const ops::OpDef* op : ops::AllOps()) {
    EXPECT_EQ(&ops::Op(op->type), op);
    EXPECT_STREQ(LayerTypeName(op->type), op->name);
    EXPECT_TRUE(names.insert(op->name).second) << op->name;
    // The slots every operation fills (the rest may be null: no fields, no weights, not
    // trained).
    EXPECT_NE(op->infer, nullptr) << op->name;
    EXPECT_NE(op->macs, nullptr) << op->name;
    EXPECT_NE(op->forward, nullptr) << op->name;
    EXPECT_NE(op->int8, nullptr) << op->name;
    EXPECT_NE(op->quantize, nullptr) << op->name;
    EXPECT_NE(op->bf16, nullptr) << op->name;
    // Reading and writing model.json go together.
    EXPECT_EQ(op->read == nullptr, op->write == nullptr) << op->name;
    EXPECT_EQ(op->read_int8 == nullptr, op->write_int8 == nullptr) << op->name;
  }
  EXPECT_EQ(names.size(), 22u);
}

// How many inputs a layer reads and whether it takes an activation are its operation's
// rules, said with the layer's name.
TEST(OpTableTest, InputsAndActivationFollowTheOperation) {
  auto error = [](std::vector<Layer> layers) {
    Model m;
    m.input = {4, 4, 2};
    m.layers = std::move(layers);
    try {
      InferShapes(&m);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Layer pool;
  pool.name = "p";
  pool.type = LayerType::kMaxPool2d;
  Layer flat;
  flat.name = "f";
  flat.type = LayerType::kFlatten;
  flat.inputs = {kModelInput, 0};
  EXPECT_NE(error({pool, flat}).find("layer 'f': flatten reads one input (it lists 2)"),
            std::string::npos)
      << error({pool, flat});
  Layer add;
  add.name = "a";
  add.type = LayerType::kAdd;
  add.inputs = {0};
  EXPECT_NE(error({pool, add}).find("layer 'a': add reads two inputs (it lists 1)"),
            std::string::npos)
      << error({pool, add});
  pool.activation = Activation::kRelu;
  // The list the error gives is the table's: every operation that takes one, in its order.
  std::string takers;
  for (const ops::OpDef* op : ops::AllOps())
    if (op->takes_activation) takers += std::string(takers.empty() ? "" : ", ") + op->name;
  EXPECT_NE(takers.find("conv2d, dense, add"), std::string::npos) << takers;
  EXPECT_NE(error({pool}).find("layer 'p': only " + takers + " layers take an activation"),
            std::string::npos)
      << error({pool});
  pool.activation = Activation::kNone;
  EXPECT_EQ(error({pool}), "");
}

}  // namespace
}  // namespace tpu::nn
