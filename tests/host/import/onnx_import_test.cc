// tpusim import (host/import/): the PyTorch-exported CNN (models/onnx/) gives PyTorch's own
// predictions in fp32 and runs bit-exact on the chip in int8; graphs built here check the
// layout conversions against a direct NCHW computation; bad files are clear errors.
#include "host/import/onnx_import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/data/mnist.h"
#include "host/engine/engine_factory.h"
#include "host/nn/fp32_net.h"
#include "host/nn/inputs.h"
#include "host/nn/quantize.h"
#include "host/run/tpu_runner.h"
#include "tests/mnist_test_util.h"

namespace tpu::import {
namespace {

const std::string kTorchCnn = TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx";

// ---- graphs built by hand -------------------------------------------------------------

struct Graph {
  onnx::ModelProto m;
  onnx::GraphProto* g = m.mutable_graph();
  std::mt19937_64 rng{3};

  explicit Graph(std::vector<int64_t> input = {1, 1, 32, 32}) {
    m.set_ir_version(7);
    m.add_opset_import()->set_version(13);
    auto* in = g->add_input();
    in->set_name("x");
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : input) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  // A random float initializer (`zeros`: of zeros).
  std::string Weights(const std::string& name, std::vector<int64_t> dims, bool zeros = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (int64_t i = 0; i < n; ++i) t->add_float_data(zeros ? 0.0f : u(rng));
    return name;
  }
  std::string Ints(const std::string& name, std::vector<int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }
  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> in,
                        const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out);
    for (const auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  static void Ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  // A scalar int64 initializer (no dims), as an index.
  std::string Scalar(const std::string& name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
    return name;
  }
  static void Str(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void Output(const std::string& name) { g->add_output()->set_name(name); }
  std::string Bytes() const { return m.SerializeAsString(); }
  const onnx::TensorProto& Init(const std::string& name) const {
    for (const auto& t : g->initializer())
      if (t.name() == name) return t;
    throw std::logic_error(name);
  }
};

nn::Model Import(const Graph& g) { return ImportOnnxBytes(g.Bytes(), "test.onnx", {}); }

// The error importing `bytes`, or "" when they import.
std::string ImportErrorOf(const std::string& bytes) {
  try {
    ImportOnnxBytes(bytes, "bad.onnx", {});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string ImportError(const Graph& g, const std::string& dataset = "") {
  try {
    ImportOnnxBytes(g.Bytes(), "test.onnx", {"", dataset});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// conv (uneven pads, stride 2) -> relu -> flatten of a C x H x W map -> gemm (transB):
// the imported model's fp32 output equals the same network computed in NCHW here, which
// checks the weight transposition and the (c, h, w) -> (h, w, c) reordering of the rows.
TEST(OnnxImportTest, LayoutsConvertToChannelsLast) {
  Graph g;
  g.Weights("W", {4, 1, 3, 2});
  g.Weights("B", {4});
  auto* conv = g.Node("Conv", {"x", "W", "B"}, "c");
  Graph::Ints(conv, "pads", {1, 0, 2, 1});
  Graph::Ints(conv, "strides", {2, 2});
  g.Node("Relu", {"c"}, "r");
  g.Node("Flatten", {"r"}, "f");
  // 32 + 1 + 2 - 3 = 32 -> 17 rows; 32 + 0 + 1 - 2 = 31 -> 16 columns
  const int oh = 17, ow = 16, oc = 4, units = 5;
  g.Weights("G", {units, oc * oh * ow});
  g.Weights("GB", {units});
  Graph::Int(g.Node("Gemm", {"f", "G", "GB"}, "y"), "transB", 1);
  g.Output("y");
  const nn::Model m = Import(g);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].out, (nn::Shape3{oh, ow, oc}));
  EXPECT_EQ(m.layers[0].padding, "explicit");

  std::mt19937_64 rng(5);
  std::vector<uint8_t> pixels(32 * 32);
  for (auto& p : pixels) p = static_cast<uint8_t>(rng());
  nn::ForwardCache cache;
  nn::Forward(m, nn::Fp32Input(pixels.data(), 1, m.input), &cache);

  const auto& W = g.Init("W").float_data();
  const auto& B = g.Init("B").float_data();
  const auto& G = g.Init("G").float_data();
  const auto& GB = g.Init("GB").float_data();
  std::vector<float> act(oc * oh * ow);  // NCHW
  for (int o = 0; o < oc; ++o)
    for (int y = 0; y < oh; ++y)
      for (int x = 0; x < ow; ++x) {
        float s = B[o];
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 2; ++kx) {
            const int iy = y * 2 + ky - 1, ix = x * 2 + kx - 0;
            if (iy < 0 || iy >= 32 || ix < 0 || ix >= 32) continue;
            s += W[(o * 3 + ky) * 2 + kx] * (pixels[iy * 32 + ix] / 255.0f);
          }
        act[(o * oh + y) * ow + x] = std::max(s, 0.0f);
      }
  for (int u = 0; u < units; ++u) {
    double s = GB[u];
    for (size_t k = 0; k < act.size(); ++k) s += G[u * static_cast<int>(act.size()) + k] * act[k];
    EXPECT_NEAR(cache.acts.back()(0, u), s, 1e-4) << u;
  }
}

// Depthwise + BatchNormalization + Clip(0, 6) + GlobalAveragePool + MatMul + Add: the
// layers they become.
TEST(OnnxImportTest, DepthwiseBatchNormClipGlobalPoolMatMul) {
  Graph g({1, 1, 32, 32});
  g.Weights("W1", {3, 1, 1, 1});
  g.Node("Conv", {"x", "W1"}, "c1");
  g.Weights("Wd", {3, 1, 3, 3});
  auto* dw = g.Node("Conv", {"c1", "Wd"}, "c2");
  Graph::Int(dw, "group", 3);
  Graph::Ints(dw, "strides", {2, 2});
  for (const char* p : {"s", "b", "mean"}) g.Weights(p, {3});
  auto* var = g.g->add_initializer();
  *var = g.Init("s");
  var->set_name("var");
  for (auto& v : *var->mutable_float_data()) v = std::fabs(v) + 0.1f;
  g.Node("BatchNormalization", {"c2", "s", "b", "mean", "var"}, "bn");
  auto* lo = g.g->add_initializer();
  lo->set_name("lo");
  lo->set_data_type(onnx::TensorProto::FLOAT);
  lo->add_float_data(0.0f);
  auto* hi = g.g->add_initializer();
  *hi = *lo;
  hi->set_name("hi");
  hi->set_float_data(0, 6.0f);
  g.Node("Clip", {"bn", "lo", "hi"}, "r6");
  g.Node("GlobalAveragePool", {"r6"}, "gap");
  g.Node("Reshape", {"gap", g.Ints("shape", {-1, 3})}, "v");
  g.Node("MatMul", {"v", g.Weights("M", {3, 10})}, "mm");
  g.Node("Add", {g.Weights("MB", {10}), "mm"}, "y");
  g.Node("Softmax", {"y"}, "p");
  g.Output("p");
  const nn::Model m = Import(g);
  std::vector<std::string> types;
  for (const auto& l : m.layers) types.push_back(l.TypeName());
  EXPECT_EQ(types, (std::vector<std::string>{"conv2d", "depthwise_conv2d", "global_avgpool2d",
                                             "flatten", "dense"}));
  const nn::Layer& d = m.layers[1];
  EXPECT_EQ(d.activation, nn::Activation::kRelu6);
  EXPECT_EQ(d.out, (nn::Shape3{15, 15, 3}));
  // BatchNorm folded: weight * s / sqrt(var + eps), bias (0 - mean) * that + b.
  const float s0 = g.Init("s").float_data(0) / std::sqrt(var->float_data(0) + 1e-5f);
  EXPECT_NEAR(d.weights.data[0], g.Init("Wd").float_data(0) * s0, 1e-6);
  EXPECT_EQ(d.weights.data[1], 0.0f);  // off the diagonal
  EXPECT_NEAR(d.bias.data[0], -g.Init("mean").float_data(0) * s0 + g.Init("b").float_data(0), 1e-5);
  EXPECT_EQ(m.layers.back().activation, nn::Activation::kSoftmax);
  EXPECT_NEAR(m.layers.back().bias.data[3], g.Init("MB").float_data(3), 0);
}

// Conv -> MaxPool -> Relu (as some exporters order them): the ReLU moves before the max
// pooling, where it gives the same result.
TEST(OnnxImportTest, ReluAfterMaxPoolingJoinsTheConv) {
  Graph g;
  g.Node("Conv", {"x", g.Weights("W", {2, 1, 3, 3})}, "c");
  auto* pool = g.Node("MaxPool", {"c"}, "p");
  Graph::Ints(pool, "kernel_shape", {2, 2});
  Graph::Ints(pool, "strides", {2, 2});
  g.Node("Relu", {"p"}, "y");
  g.Output("y");
  const nn::Model m = Import(g);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].activation, nn::Activation::kRelu);
  EXPECT_EQ(m.layers[1].type, nn::LayerType::kMaxPool2d);
}

// A residual block, a concat and padded pooling, as PyTorch exports them: the layers name
// the layers they read, the ReLUs join the layers (and the add) before them, the block's
// input feeds both branches; the fp32 network computes the add and the concat.
TEST(OnnxImportTest, GraphsWithResidualAddsAndConcats) {
  Graph g({1, 3, 16, 16});
  auto* c1 = g.Node("Conv", {"x", g.Weights("W1", {8, 3, 3, 3})}, "c1");
  Graph::Ints(c1, "pads", {1, 1, 1, 1});
  g.Node("Relu", {"c1"}, "r1");
  auto* mp = g.Node("MaxPool", {"r1"}, "p");
  Graph::Ints(mp, "kernel_shape", {3, 3});
  Graph::Ints(mp, "strides", {2, 2});
  Graph::Ints(mp, "pads", {1, 1, 1, 1});
  auto* c2 = g.Node("Conv", {"p", g.Weights("W2", {8, 8, 3, 3})}, "c2");
  Graph::Ints(c2, "pads", {1, 1, 1, 1});
  g.Node("Add", {"c2", "p"}, "s");
  g.Node("Relu", {"s"}, "r2");
  g.Node("Conv", {"r2", g.Weights("W3", {3, 8, 1, 1})}, "a");
  g.Node("Conv", {"r2", g.Weights("W4", {5, 8, 1, 1})}, "b");
  Graph::Int(g.Node("Concat", {"a", "b"}, "cat"), "axis", 1);
  auto* ap = g.Node("AveragePool", {"cat"}, "ap");
  Graph::Ints(ap, "kernel_shape", {3, 3});
  Graph::Ints(ap, "pads", {1, 1, 1, 1});
  Graph::Int(ap, "count_include_pad", 1);
  g.Node("GlobalAveragePool", {"ap"}, "gap");
  g.Node("Flatten", {"gap"}, "f");
  Graph::Int(g.Node("Gemm", {"f", g.Weights("G", {4, 8})}, "y"), "transB", 1);
  g.Output("y");
  const nn::Model m = Import(g);
  EXPECT_TRUE(m.IsGraph());
  EXPECT_EQ(m.preprocess, "none");
  std::vector<std::string> got;
  for (const nn::Layer& l : m.layers) {
    std::string in;
    for (int i : l.inputs) in += (in.empty() ? "" : ",") + (i < 0 ? "input" : m.layers[i].name);
    got.push_back(l.name + "<" + in);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"conv1<input", "maxpool1<conv1", "conv2<maxpool1",
                                           "add1<conv2,maxpool1", "conv3<add1", "conv4<add1",
                                           "concat1<conv3,conv4", "avgpool1<concat1",
                                           "gap1<avgpool1", "flatten1<gap1", "fc1<flatten1"}));
  EXPECT_EQ(m.layers[0].activation, nn::Activation::kRelu);
  EXPECT_EQ(m.layers[2].activation, nn::Activation::kNone);  // the ReLU is the add's
  EXPECT_EQ(m.layers[3].activation, nn::Activation::kRelu);
  EXPECT_EQ(m.layers[1].out, (nn::Shape3{8, 8, 8}));
  EXPECT_EQ(m.layers[6].out, (nn::Shape3{8, 8, 8}));
  // The add and the concat, in the fp32 network: the concat's channels are its inputs'.
  nn::ForwardCache cache;
  nn::InputSet in = nn::SyntheticInputs(m, 1, 3);
  nn::Forward(m, nn::Fp32Inputs(in, 0, 1), &cache);
  const auto& a = cache.acts;
  for (int64_t px = 0; px < 64; ++px) {
    for (int c = 0; c < 8; ++c) {
      const float sum = a[3](0, px * 8 + c) + a[2](0, px * 8 + c);
      EXPECT_NEAR(a[4](0, px * 8 + c), std::max(sum, 0.0f), 1e-5);
    }
    for (int c = 0; c < 3; ++c) EXPECT_EQ(a[7](0, px * 8 + c), a[5](0, px * 3 + c));
    for (int c = 0; c < 5; ++c) EXPECT_EQ(a[7](0, px * 8 + 3 + c), a[6](0, px * 5 + c));
  }
  // Refused: padding the average does not count, a concat of another axis, a broadcast add.
  Graph avg({1, 1, 8, 8});
  auto* bad = avg.Node("AveragePool", {"x"}, "y");
  Graph::Ints(bad, "kernel_shape", {3, 3});
  Graph::Ints(bad, "pads", {1, 1, 1, 1});
  avg.Output("y");
  EXPECT_NE(ImportError(avg).find("count_include_pad = 0"), std::string::npos) << ImportError(avg);
  Graph axis({1, 1, 8, 8});
  Graph::Int(axis.Node("Concat", {"x", "x"}, "y"), "axis", 2);
  axis.Output("y");
  EXPECT_NE(ImportError(axis).find("channels (axis = 1) only"), std::string::npos)
      << ImportError(axis);
  Graph bcast({1, 2, 8, 8});
  bcast.Node("Conv", {"x", bcast.Weights("W", {2, 2, 1, 1})}, "c");
  bcast.Node("GlobalAveragePool", {"c"}, "gp");
  bcast.Node("Add", {"c", "gp"}, "y");
  bcast.Output("y");
  EXPECT_NE(ImportError(bcast).find("adds a 1 x 1 x 2 map to a 8 x 8 x 2 map"), std::string::npos)
      << ImportError(bcast);
}

// Mul of two activations of one shape becomes a product layer (nn::LayerType::kMul) whose
// fp32 output is their elementwise product; a broadcast is refused; a constant factor scales
// the layer before it.
TEST(OnnxImportTest, MulOfTwoActivationsIsAProduct) {
  Graph g({1, 2, 6, 6});
  auto* c1 = g.Node("Conv", {"x", g.Weights("W1", {4, 2, 3, 3})}, "c1");
  Graph::Ints(c1, "pads", {1, 1, 1, 1});
  g.Node("Relu", {"c1"}, "r1");
  g.Node("Conv", {"r1", g.Weights("W2", {4, 4, 1, 1})}, "c2");
  g.Node("Mul", {"c2", "r1"}, "y");
  g.Output("y");
  const nn::Model m = Import(g);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[2].type, nn::LayerType::kMul);
  EXPECT_EQ(m.layers[2].name, "mul1");
  EXPECT_EQ(m.layers[2].inputs, (std::vector<int>{1, 0}));
  nn::ForwardCache cache;
  nn::Forward(m, nn::Fp32Inputs(nn::SyntheticInputs(m, 1, 3), 0, 1), &cache);
  const auto& a = cache.acts;  // a[k + 1]: layer k's output
  for (int64_t i = 0; i < 36 * 4; ++i) EXPECT_EQ(a[3](0, i), a[2](0, i) * a[1](0, i));
  // Sigmoid and Tanh are layers of their own: sigmoid(c2) * tanh(r1).
  Graph t({1, 2, 6, 6});
  auto* t1 = t.Node("Conv", {"x", t.Weights("W1", {4, 2, 3, 3})}, "c1");
  Graph::Ints(t1, "pads", {1, 1, 1, 1});
  t.Node("Conv", {"c1", t.Weights("W2", {4, 4, 1, 1})}, "c2");
  t.Node("Sigmoid", {"c2"}, "s");
  t.Node("Tanh", {"c1"}, "h");
  t.Node("Mul", {"s", "h"}, "y");
  t.Output("y");
  const nn::Model tm = Import(t);
  ASSERT_EQ(tm.layers.size(), 5u);
  EXPECT_EQ(tm.layers[2].type, nn::LayerType::kSigmoid);
  EXPECT_EQ(tm.layers[3].type, nn::LayerType::kTanh);
  EXPECT_EQ(tm.layers[4].inputs, (std::vector<int>{2, 3}));
  nn::ForwardCache tc;
  nn::Forward(tm, nn::Fp32Inputs(nn::SyntheticInputs(tm, 1, 4), 0, 1), &tc);
  for (int64_t i = 0; i < 36 * 4; ++i) {
    EXPECT_FLOAT_EQ(tc.acts[3](0, i), 1.0f / (1.0f + std::exp(-tc.acts[2](0, i))));
    EXPECT_FLOAT_EQ(tc.acts[4](0, i), std::tanh(tc.acts[1](0, i)));
  }
  // A constant factor scales the layer before it (as GELU's x 0.5 after a Gemm); one of
  // the model's input, or of another length than one or the channels, is refused.
  Graph sc({1, 2, 4, 4});
  sc.Node("Conv", {"x", sc.Weights("W", {3, 2, 1, 1}), sc.Weights("B", {3})}, "c");
  sc.Node("Mul", {"c", sc.Weights("S", {1, 3, 1, 1})}, "y");
  sc.Output("y");
  Graph plain({1, 2, 4, 4});  // the same weights (the same draws), without the Mul
  plain.Node("Conv", {"x", plain.Weights("W", {3, 2, 1, 1}), plain.Weights("B", {3})}, "c");
  plain.Output("c");
  const nn::Model scaled = Import(sc), unscaled = Import(plain);
  ASSERT_EQ(scaled.layers.size(), 1u);
  const auto& s = sc.Init("S");
  for (size_t i = 0; i < scaled.layers[0].weights.data.size(); ++i)
    EXPECT_EQ(scaled.layers[0].weights.data[i],
              unscaled.layers[0].weights.data[i] * s.float_data(static_cast<int>(i % 3)));
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(scaled.layers[0].bias.data[c], unscaled.layers[0].bias.data[c] * s.float_data(c));
  Graph k({1, 2, 4, 4});
  k.Node("Mul", {"x", k.Weights("K", {1})}, "y");
  k.Output("y");
  EXPECT_NE(ImportError(k).find("a Mul of a constant must directly follow a Conv"),
            std::string::npos)
      << ImportError(k);
  Graph k2({1, 2, 4, 4});
  k2.Node("Conv", {"x", k2.Weights("W", {3, 2, 1, 1})}, "c");
  k2.Node("Mul", {k2.Weights("K", {2}), "c"}, "y");
  k2.Output("y");
  EXPECT_NE(ImportError(k2).find("multiplies by 2 values a layer of 3 output channels"),
            std::string::npos)
      << ImportError(k2);
  Graph bcast({1, 2, 8, 8});
  bcast.Node("Conv", {"x", bcast.Weights("W", {2, 2, 1, 1})}, "c");
  bcast.Node("GlobalAveragePool", {"c"}, "gp");
  bcast.Node("Mul", {"c", "gp"}, "y");
  bcast.Output("y");
  EXPECT_NE(ImportError(bcast).find("multiplies a 8 x 8 x 2 map by a 1 x 1 x 2 map"),
            std::string::npos)
      << ImportError(bcast);
}

// PyTorch exports AvgPool2d(padding=p) (count_include_pad) as a Pad of zeros and an
// unpadded AveragePool: the zeros become the pooling's padding (a Conv's too), whose zeros
// count in the average as they did in PyTorch. A Pad that anything else reads is refused.
// (Found by tests/import/random_torch_graphs.py: such graphs were refused before.)
TEST(OnnxImportTest, PadNodesOfZerosBecomeThePaddingOfWhatReadsThem) {
  Graph g({1, 2, 5, 5});
  g.Node("Pad", {"x", g.Ints("P", {0, 0, 1, 2, 0, 0, 1, 0})}, "p");
  Graph::Ints(g.Node("AveragePool", {"p"}, "a"), "kernel_shape", {3, 3});
  g.Node("Pad", {"a", g.Ints("Q", {0, 0, 0, 1, 0, 0, 1, 1})}, "q");
  g.Node("Conv", {"q", g.Weights("W", {3, 2, 2, 2})}, "y");
  g.Output("y");
  const nn::Model m = Import(g);
  ASSERT_EQ(m.layers.size(), 2u);
  const nn::Layer& pool = m.layers[0];
  EXPECT_EQ(pool.type, nn::LayerType::kAvgPool2d);
  EXPECT_EQ((std::array<int, 4>{pool.pad_top, pool.pad_left, pool.pad_bottom, pool.pad_right}),
            (std::array<int, 4>{1, 2, 1, 0}));
  EXPECT_EQ(pool.out, (nn::Shape3{5, 5, 2}));  // (5 + 2 - 3) / 1 + 1 by (5 + 2 - 3) / 1 + 1
  const nn::Layer& conv = m.layers[1];
  EXPECT_EQ((std::array<int, 4>{conv.pad_top, conv.pad_left, conv.pad_bottom, conv.pad_right}),
            (std::array<int, 4>{0, 1, 1, 1}));
  // The fp32 network averages the zeros in: the corner output of channel 0 is the sum of
  // the 3 x 3 window's map values (2 x 1 of them inside the map) over 9.
  nn::InputSet in;
  in.shape = {5, 5, 2};
  in.count = 1;
  in.values.assign(50, 0.0f);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) in.values[static_cast<size_t>((y * 5 + x) * 2)] = 1.0f + y * 5 + x;
  nn::Model first = m;
  first.layers.resize(1);
  nn::ForwardCache cache;
  cache.keep_cols = false;
  nn::Forward(first, nn::Fp32Inputs(in, 0, 1), &cache);
  // Output (0, 0): window rows -1..1 and columns -2..0 hold the map's (0, 0) and (1, 0).
  EXPECT_FLOAT_EQ(cache.acts.back()(0, 0), (1.0f + 6.0f) / 9.0f);
  Graph maxpool({1, 2, 5, 5});
  maxpool.Node("Pad", {"x", maxpool.Ints("P", {0, 0, 1, 1, 0, 0, 1, 1})}, "p");
  Graph::Ints(maxpool.Node("MaxPool", {"p"}, "y"), "kernel_shape", {3, 3});
  maxpool.Output("y");
  EXPECT_NE(ImportError(maxpool).find("(MaxPool): reads the output of a Pad node; a Pad is "
                                      "imported as the padding of the Conv or AveragePool"),
            std::string::npos)
      << ImportError(maxpool);
}

// ---- sequences: nn.LSTM as PyTorch exports it -----------------------------------------

constexpr int64_t kT = 4, kX = 3, kH = 5;

// PyTorch's nn.LSTM(kX, kH, batch_first=True) on a batch-first N x kT x kX input, read as
// h[-1] (or, `last_step`, out[:, -1]), then a Linear of 2 units, as torch.onnx.export writes
// it at opset 13: the transpose to T x N x X, the zero state made from the input's shape
// (Shape, Gather, Unsqueeze, Concat, Expand), ONNX's LSTM, and the last step's selection.
Graph TorchLstm(bool last_step) {
  Graph g({2, kT, kX});
  Graph::Ints(g.Node("Transpose", {"x"}, "xt"), "perm", {1, 0, 2});
  g.Node("Shape", {"xt"}, "shape");
  g.Node("Gather", {"shape", g.Scalar("one", 1)}, "n");
  g.Node("Unsqueeze", {"n", g.Ints("axis0", {0})}, "n1");
  Graph::Int(g.Node("Concat", {g.Ints("dirs", {1}), "n1", g.Ints("hidden", {kH})}, "size"), "axis",
             0);
  g.Node("Expand", {g.Weights("zeros", {1, 1, kH}, /*zeros=*/true), "size"}, "h0");
  auto* lstm = g.Node("LSTM",
                      {"xt", g.Weights("W", {1, 4 * kH, kX}), g.Weights("R", {1, 4 * kH, kH}),
                       g.Weights("B", {1, 8 * kH}), "", "h0", "h0"},
                      "y");
  lstm->add_output("yh");
  lstm->add_output("yc");
  Graph::Int(lstm, "hidden_size", kH);
  if (last_step) {
    g.Node("Squeeze", {"y", g.Ints("axis1", {1})}, "ys");
    Graph::Ints(g.Node("Transpose", {"ys"}, "yb"), "perm", {1, 0, 2});
    Graph::Int(g.Node("Gather", {"yb", g.Scalar("last", -1)}, "h"), "axis", 1);
  } else {
    Graph::Int(g.Node("Gather", {"yh", g.Scalar("last", -1)}, "h"), "axis", 0);
  }
  Graph::Int(g.Node("Gemm", {"h", g.Weights("G", {2, kH}), g.Weights("C", {2})}, "out"), "transB",
             1);
  g.Output("out");
  return g;
}

// ONNX's LSTM (gates i, o, f, c; W x + R h + Wb + Rb) and the Linear, computed here in
// double for one sequence x (kT x kX).
std::vector<double> OnnxLstmThenLinear(const Graph& g, const float* x) {
  const auto& w = g.Init("W").float_data();
  const auto& r = g.Init("R").float_data();
  const auto& b = g.Init("B").float_data();
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> h(kH, 0), c(kH, 0), z(4 * kH);
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t k = 0; k < 4 * kH; ++k) {
      z[k] = b[k] + b[4 * kH + k];
      for (int64_t i = 0; i < kX; ++i) z[k] += w[k * kX + i] * x[t * kX + i];
      for (int64_t i = 0; i < kH; ++i) z[k] += r[k * kH + i] * h[i];
    }
    for (int64_t j = 0; j < kH; ++j) {
      c[j] = sig(z[2 * kH + j]) * c[j] + sig(z[j]) * std::tanh(z[3 * kH + j]);
      h[j] = sig(z[kH + j]) * std::tanh(c[j]);
    }
  }
  const auto& gw = g.Init("G").float_data();
  const auto& gc = g.Init("C").float_data();
  std::vector<double> y(2);
  for (int u = 0; u < 2; ++u) {
    y[u] = gc[u];
    for (int64_t j = 0; j < kH; ++j) y[u] += gw[u * kH + j] * h[j];
  }
  return y;
}

TEST(OnnxImportTest, LstmAsPyTorchExportsItComputesOnnxsLstm) {
  for (const bool last_step : {false, true}) {
    const Graph g = TorchLstm(last_step);
    const nn::Model m = Import(g);
    ASSERT_EQ(m.layers.size(), 2u);
    EXPECT_EQ(m.input, (nn::Shape3{1, kT, kX}));
    EXPECT_EQ(m.layers[0].type, nn::LayerType::kLstm);
    EXPECT_EQ(m.layers[1].type, nn::LayerType::kDense);
    EXPECT_EQ(m.layers[1].inputs, std::vector<int>{0});
    const nn::InputSet in = nn::SyntheticInputs(m, 3, 7);
    nn::ForwardCache cache;
    nn::Forward(m, nn::Fp32Inputs(in, 0, 3), &cache);
    for (int64_t i = 0; i < 3; ++i) {
      const std::vector<double> want = OnnxLstmThenLinear(g, &in.values[i * kT * kX]);
      for (int u = 0; u < 2; ++u) EXPECT_NEAR(cache.acts.back()(i, u), want[u], 1e-5) << i;
    }
  }
}

// Inputs a PyTorch user holds, N x T x X, are the model's (docs/import.md, "Sequences").
TEST(OnnxImportTest, SequenceInputsReadFromNpy) {
  const nn::Model m = Import(TorchLstm(false));
  Tensor<float> t;
  t.shape = {2, kT, kX};
  t.data.resize(2 * kT * kX);
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i);
  const nn::InputSet s = nn::InputsFromTensor(t, m, "x.npy");
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.values, t.data);  // N x T x X is T x X per input already
  t.shape = {2, kX, kT};
  try {
    nn::InputsFromTensor(t, m, "x.npy");
    ADD_FAILURE() << "a transposed sequence was taken";
  } catch (const UsageError& e) {
    const std::string why = e.what();
    EXPECT_NE(why.find("x.npy: the inputs are 2 x 3 x 4; model '"), std::string::npos) << why;
    EXPECT_NE(why.find("' takes N x 3 x 1 x 4 (N x C x H x W float32, as the exported model did, "
                       "or N x 4 x 3 sequences of steps)"),
              std::string::npos)
        << why;
  }
}

// What tpusim's lstm layer is not (one direction, a zero state, its last h) is refused by
// name, as is a sequence read by anything but an LSTM.
TEST(OnnxImportTest, LstmsTpusimCannotRunAreClearErrors) {
  const auto refused = [](Graph g, const std::string& want) {
    const std::string why = ImportError(g);
    EXPECT_NE(why.find(want), std::string::npos) << why;
  };
  Graph bi = TorchLstm(false);
  Graph::Str(bi.g->mutable_node(6), "direction", "bidirectional");
  refused(bi, "a bidirectional LSTM is not imported");
  Graph state = TorchLstm(false);
  state.g->mutable_node(6)->set_input(5, state.Weights("H0", {1, 2, kH}));
  refused(state, "its initial state 'H0' is not zeros");
  Graph first = TorchLstm(true);
  first.g->mutable_node(9)->set_input(1, first.Scalar("first", 0));
  refused(first, "takes element 0 of 4; tpusim's lstm layer computes the last step only");
  Graph every = TorchLstm(true);
  every.g->mutable_node(9)->set_op_type("Relu");
  every.g->mutable_node(9)->clear_attribute();
  every.g->mutable_node(9)->mutable_input()->RemoveLast();
  refused(every, "an LSTM's h (NTH); tpusim's lstm layer gives its last step's h only");
  Graph relu = TorchLstm(false);  // relu(h[-1]): an lstm layer takes no activation
  relu.g->mutable_node(8)->set_op_type("Relu");
  relu.g->mutable_node(8)->clear_attribute();
  relu.g->mutable_node(8)->mutable_input()->DeleteSubrange(1, 2);
  refused(relu, "Relu must follow a Conv, Gemm");
  Graph conv({2, kT, kX});
  conv.Node("Relu", {"x"}, "y");
  conv.Output("y");
  refused(conv,
          "reads 'x', the model's input sequences (NTX); tpusim reads sequences with an "
          "LSTM node only");
}

TEST(OnnxImportTest, BadFilesAndGraphsAreClearErrors) {
  // Not ONNX, empty, truncated.
  EXPECT_NE(ImportErrorOf("hello, world"), "");
  Graph ok;
  ok.Node("Relu", {"x"}, "y");  // Relu with nothing to fuse into
  ok.Output("y");
  EXPECT_NE(ImportError(ok).find("node 'Relu_y' (Relu): Relu must follow a Conv, Gemm, MatMul or a "
                                 "residual Add whose output nothing else reads"),
            std::string::npos)
      << ImportError(ok);
  Graph un;
  un.Node("Tile", {"x"}, "y");
  un.Output("y");
  EXPECT_NE(ImportError(un).find("node 'Tile_y' (Tile): not supported; tpusim imports Conv"),
            std::string::npos)
      << ImportError(un);
  Graph erf;
  erf.Node("Erf", {"x"}, "y");  // a GELU's, without the rest of its chain
  erf.Output("y");
  EXPECT_NE(ImportError(erf).find("node 'Erf_y' (Erf): is not part of a chain tpusim imports: "
                                  "tpusim reads LayerNorm as ReduceMean"),
            std::string::npos)
      << ImportError(erf);
  Graph grouped;
  Graph::Int(grouped.Node("Conv", {"x", grouped.Weights("W", {4, 1, 3, 3})}, "y"), "group", 2);
  grouped.Output("y");
  EXPECT_NE(ImportError(grouped).find("groups = 2 (4 filters of 1 channels on 1 channels): tpusim "
                                      "imports groups = 1 and depthwise"),
            std::string::npos)
      << ImportError(grouped);
  Graph mismatch;
  mismatch.Node("Flatten", {"x"}, "f");
  mismatch.Node("Gemm", {"f", mismatch.Weights("G", {100, 10})}, "y");
  mismatch.Output("y");
  EXPECT_NE(ImportError(mismatch).find("(Gemm): weights expect 100 inputs; the input has 1024"),
            std::string::npos)
      << ImportError(mismatch);
  Graph q;
  q.Node("QLinearConv", {"x"}, "y");
  q.Output("y");
  EXPECT_NE(ImportError(q).find("export the fp32 model"), std::string::npos) << ImportError(q);
  // An MNIST model takes 1 x 32 x 32; other inputs are float-input models (dataset none).
  Graph size({1, 3, 28, 28});
  size.Node("Flatten", {"x"}, "f");
  size.Node("Gemm", {"f", size.Weights("G", {3 * 28 * 28, 4})}, "y");
  size.Output("y");
  EXPECT_NE(ImportError(size, "mnist").find("export it for that input"), std::string::npos)
      << ImportError(size, "mnist");
  const nn::Model m = Import(size);
  EXPECT_EQ(m.preprocess, "none");
  EXPECT_EQ(m.dataset, "none");
  Graph dynamic({1, 3, -1, 28});
  dynamic.Node("Relu", {"x"}, "y");
  dynamic.Output("y");
  EXPECT_NE(ImportError(dynamic).find("input 'x' is 1 x 3 x ? x 28 (4 dimensions); tpusim imports "
                                      "an N x C x H x W image batch with C, H and W fixed"),
            std::string::npos)
      << ImportError(dynamic);
  // A flat vector is told it is not an image input, not to fix its size.
  Graph flat({1, 16});
  flat.Node("Relu", {"x"}, "y");
  flat.Output("y");
  const std::string why = ImportError(flat);
  EXPECT_NE(why.find("input 'x' is 1 x 16 (2 dimensions); tpusim imports image networks"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("fixed input size"), std::string::npos) << why;
}

TEST(OnnxImportTest, NonOnnxAndTruncatedFiles) {
  EXPECT_NE(ImportErrorOf("").find("bad.onnx: not an ONNX model"), std::string::npos);
  std::ifstream in(kTorchCnn, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(whole.size(), 1000u);
  const std::string cut = ImportErrorOf(whole.substr(0, whole.size() / 2));
  EXPECT_NE(cut.find("bad.onnx: "), std::string::npos) << cut;
  EXPECT_EQ(ImportErrorOf(whole), "");
}

// The model PyTorch made (models/onnx/make_torch_cnn.py): tpusim's fp32 network predicts
// what PyTorch predicted for the first 100 test images, with logits within float rounding.
TEST(OnnxImportTest, TorchCnnPredictsWhatPyTorchPredicted) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const nn::Model m = ImportOnnx(kTorchCnn, {});
  const data::MnistSet set = data::LoadMnist(dir, /*train=*/false, 100);
  nn::Model logits_model = m;
  logits_model.layers.back().activation = nn::Activation::kNone;
  nn::ForwardCache cache;
  nn::Forward(logits_model, nn::Fp32Input(set.pixels.data(), 100, m.input), &cache);
  const auto expect =
      ReadNpyTensor<int32_t>(TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.predictions.npy");
  const auto logits = ReadNpyTensor<float>(TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.logits.npy");
  ASSERT_EQ(expect.data.size(), 100u);
  const auto got = nn::ArgMax(cache.acts.back());
  float worst = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], expect.data[static_cast<size_t>(i)]) << "image " << i;
    for (int c = 0; c < 10; ++c) {
      worst = std::max(
          worst, std::fabs(cache.acts.back()(i, c) - logits.data[static_cast<size_t>(i * 10 + c)]));
    }
  }
  EXPECT_LT(worst, 1e-3f);
}

// Its int8 version on the chip: both engines bit-exact against the CPU int8 reference.
TEST(OnnxImportTest, TorchCnnInInt8IsBitExactOnBothEngines) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  nn::Model m = ImportOnnx(kTorchCnn, {});
  nn::Quantize(&m, data::LoadMnist(dir, /*train=*/true, 500), 500);
  const data::MnistSet set = data::LoadMnist(dir, /*train=*/false, 32);
  for (auto kind : {engine::EngineKind::kRtl, engine::EngineKind::kFast}) {
    const auto chip = engine::MakeChipEngine(kind, config::LoadConfig("small-16"), {});
    const run::TpuRunResult r =
        run::RunModelOnTpu(m, *chip, set.pixels.data(), set.labels.data(), 32, 16);
    EXPECT_EQ(r.mismatches, 0) << engine::EngineKindName(kind);
    EXPECT_GE(r.correct, 30) << engine::EngineKindName(kind);
  }
}

}  // namespace
}  // namespace tpu::import
