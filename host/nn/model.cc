// Model description, file format and summary (see model.h, docs/model-format.md).
#include "host/nn/model.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/output_folder.h"
#include "host/common/text.h"
#include "host/nn/ops/op.h"

namespace tpu::nn {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kModelVersion = 2;  // graphs, float inputs, add, concat, padded pooling
}  // namespace

const char* LayerTypeName(LayerType t) { return ops::Op(t).name; }

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kRelu6:
      return "relu6";
    case Activation::kSoftmax:
      return "softmax";
  }
  return "?";
}

namespace {

// Sets l's type (and the depthwise / global flags the two derived types carry).
void ParseType(const std::string& s, const std::string& where, Layer* l) {
  for (const ops::OpDef* op : ops::AllOps()) {
    if (s == op->name) {
      l->type = op->type;
      return;
    }
  }
  if (s == "depthwise_conv2d") {
    l->type = LayerType::kConv2d;
    l->depthwise = true;
  } else if (s == "global_avgpool2d") {
    l->type = LayerType::kAvgPool2d;
    l->global_pool = true;
  } else {
    throw UsageError(where + ": unknown layer type '" + s +
                     "' (known: conv2d, depthwise_conv2d, avgpool2d, maxpool2d, "
                     "global_avgpool2d, flatten, dense, add, concat)");
  }
}

Activation ParseActivation(const std::string& s, const std::string& where) {
  for (Activation a :
       {Activation::kNone, Activation::kRelu, Activation::kRelu6, Activation::kSoftmax}) {
    if (s == ActivationName(a)) return a;
  }
  throw UsageError(where + ": unknown activation '" + s + "' (known: none, relu, relu6, softmax)");
}

json ShapeJson(const Shape3& s) { return json::array({s.h, s.w, s.c}); }

Layer Conv(const std::string& name, int filters, int k, Activation act) {
  Layer l;
  l.name = name;
  l.type = LayerType::kConv2d;
  l.kernel_h = l.kernel_w = k;
  l.out.c = filters;
  l.activation = act;
  return l;
}

Layer Pool(const std::string& name) {
  Layer l;
  l.name = name;
  l.type = LayerType::kAvgPool2d;
  return l;
}

Layer Dense(const std::string& name, int units, Activation act) {
  Layer l;
  l.name = name;
  l.type = LayerType::kDense;
  l.out = {1, 1, units};
  l.activation = act;
  return l;
}

void GlorotUniform(Tensor<float>* t, int64_t fan_in, int64_t fan_out, std::mt19937_64& rng) {
  const float limit = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
  std::uniform_real_distribution<float> dist(-limit, limit);
  for (float& v : t->data) v = dist(rng);
}

}  // namespace

int64_t Layer::ParamCount() const {
  // A depthwise layer's parameters are its c kernels, not the expanded zeros.
  const int64_t w =
      depthwise ? int64_t{kernel_h} * kernel_w * out.c : static_cast<int64_t>(weights.data.size());
  return w + static_cast<int64_t>(bias.data.size());
}

std::string Layer::TypeName() const {
  if (depthwise) return "depthwise_conv2d";
  if (global_pool) return "global_avgpool2d";
  return LayerTypeName(type);
}

int64_t Model::ParamCount() const {
  int64_t n = 0;
  for (const Layer& l : layers) n += l.ParamCount();
  return n;
}

bool Model::IsGraph() const {
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::vector<int> chain = {static_cast<int>(i) - 1};
    if (!layers[i].inputs.empty() && layers[i].inputs != chain) return true;
  }
  return false;
}

std::vector<std::vector<int>> Model::Consumers() const {
  std::vector<std::vector<int>> c(layers.size() + 1);
  for (size_t i = 0; i < layers.size(); ++i)
    for (int in : layers[i].inputs)
      c[in == kModelInput ? layers.size() : static_cast<size_t>(in)].push_back(static_cast<int>(i));
  return c;
}

namespace {

// Sets l's inputs (the layer before, where not given) and checks their number and order.
void CheckInputs(const Model& m, int index, Layer* l) {
  const std::string where = "layer '" + l->name + "'";
  if (l->inputs.empty()) l->inputs = {index - 1};
  for (int in : l->inputs) {
    if (in < kModelInput || in >= index) {
      throw UsageError(where + ": an input must be the model's input or a layer listed before it");
    }
  }
  const auto n = static_cast<int>(l->inputs.size());
  const ops::OpDef& op = ops::Op(l->type);
  if (n < op.min_inputs || (op.max_inputs >= 0 && n > op.max_inputs)) {
    const char* words[] = {"no", "one", "two", "three"};
    const std::string count =
        op.min_inputs < 4 ? words[op.min_inputs] : std::to_string(op.min_inputs);
    throw UsageError(fmt::format("{}: {} reads {}{} input{} (it lists {})", where, op.name, count,
                                 op.max_inputs == op.min_inputs ? "" : " or more",
                                 op.max_inputs == 1 ? "" : "s", n));
  }
  for (int in : l->inputs) {
    if (in != kModelInput && m.layers[static_cast<size_t>(in)].activation == Activation::kSoftmax) {
      throw UsageError(where + ": reads '" + m.layers[static_cast<size_t>(in)].name +
                       "', whose softmax is only for the model's output");
    }
  }
}

}  // namespace

void InferShapes(Model* m) {
  for (size_t index = 0; index < m->layers.size(); ++index) {
    Layer& l = m->layers[index];
    const std::string where = "layer '" + l.name + "'";
    CheckInputs(*m, static_cast<int>(index), &l);
    l.in = m->OutputOf(l.inputs[0]);
    const ops::OpDef& op = ops::Op(l.type);
    if (!op.takes_activation && l.activation != Activation::kNone) {
      std::string which;
      for (const ops::OpDef* o : ops::AllOps())
        if (o->takes_activation) which += (which.empty() ? "" : ", ") + std::string(o->name);
      throw UsageError(where + ": only " + which + " layers take an activation");
    }
    op.infer(*m, where, &l);
  }
}

namespace {

// Completes the shapes and draws the weights of a model's conv and dense layers.
Model Initialised(Model m, uint64_t seed) {
  InferShapes(&m);
  std::mt19937_64 rng(seed);
  for (Layer& l : m.layers) {
    if (!l.HasWeights()) continue;
    // Fan in: the weights per output; fan out: per input channel (a kernel's taps times
    // the outputs for a convolution).
    l.weights.shape = ops::Op(l.type).weight_shape(l);
    l.weights.data.resize(static_cast<size_t>(l.weights.Size()));
    const int64_t columns = ops::WeightColumns(l);
    GlorotUniform(&l.weights, l.weights.Size() / columns, l.weights.Size() / l.in.c, rng);
    l.bias.shape = {columns};
    l.bias.data.assign(static_cast<size_t>(columns), 0.0f);
  }
  return m;
}

Layer Flatten() {
  Layer l;
  l.name = "flatten";
  l.type = LayerType::kFlatten;
  return l;
}

// Two 3 x 3 ReLU convolutions of c1 and c2 filters on a 32 x 32 x 1 input, each followed by
// 2 x 2 average pooling, then ReLU dense layers of `hidden` units and the 10 softmax outputs.
Model TwoConvCnn(const std::string& name, int c1, int c2, const std::vector<int>& hidden,
                 uint64_t seed) {
  Model m;
  m.name = name;
  m.input = {32, 32, 1};
  m.layers = {Conv("conv1", c1, 3, Activation::kRelu), Pool("pool1"),
              Conv("conv2", c2, 3, Activation::kRelu), Pool("pool2"), Flatten()};
  for (size_t i = 0; i < hidden.size(); ++i) {
    m.layers.push_back(Dense("fc" + std::to_string(i + 1), hidden[i], Activation::kRelu));
  }
  m.layers.push_back(Dense("fc" + std::to_string(hidden.size() + 1), 10, Activation::kSoftmax));
  return Initialised(m, seed);
}

// A residual block at the end of m's layers: two 3 x 3 "same" convolutions of `filters`
// (ReLU after the first), the second's output added to the block's input through a ReLU.
void AppendResidualBlock(Model* m, const std::string& name, int filters) {
  const int in = static_cast<int>(m->layers.size()) - 1;
  for (int k = 1; k <= 2; ++k) {
    Layer c = Conv(name + "_conv" + std::to_string(k), filters, 3,
                   k == 1 ? Activation::kRelu : Activation::kNone);
    c.padding = "same";
    m->layers.push_back(c);
  }
  Layer add;
  add.name = name + "_add";
  add.type = LayerType::kAdd;
  add.inputs = {in, static_cast<int>(m->layers.size()) - 1};
  add.activation = Activation::kRelu;
  m->layers.push_back(add);
}

}  // namespace

Model MakeArch(const std::string& arch, uint64_t seed) {
  if (arch == "lenet5") return MakeLenet5(seed);
  if (arch == "wide") return MakeWideCnn(seed);
  if (arch == "mlp") return MakeMlp(seed);
  if (arch == "residual") return MakeResidualCnn(seed);
  throw UsageError("unknown --arch '" + arch + "'; use lenet5, wide, mlp or residual");
}

Model MakeResidualCnn(uint64_t seed) {
  Model m;
  m.name = "residual";
  m.input = {32, 32, 1};
  Layer conv1 = Conv("conv1", 16, 3, Activation::kRelu);
  conv1.padding = "same";
  conv1.stride = 2;
  m.layers = {conv1};
  AppendResidualBlock(&m, "block1", 16);
  m.layers.push_back(Pool("pool"));
  AppendResidualBlock(&m, "block2", 16);
  Layer gap = Pool("gap");
  gap.global_pool = true;
  m.layers.push_back(gap);
  m.layers.push_back(Dense("fc", 10, Activation::kSoftmax));
  return Initialised(m, seed);
}

Model MakeLenet5(uint64_t seed) { return TwoConvCnn("lenet5", 6, 16, {120, 84}, seed); }

Model MakeWideCnn(uint64_t seed) { return TwoConvCnn("cnn-wide", 16, 32, {128}, seed); }

Model MakeMlp(uint64_t seed) {
  Model m;
  m.name = "mlp";
  m.input = {32, 32, 1};
  m.layers = {Flatten(), Dense("fc1", 256, Activation::kRelu),
              Dense("fc2", 10, Activation::kSoftmax)};
  return Initialised(m, seed);
}

// ------------------------------------------------------------------ files

namespace {

template <typename T>
Tensor<T> LoadTensor(const std::string& dir, const json& j, const std::string& key,
                     const std::vector<int64_t>& shape, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) {
    throw UsageError(where + ": missing tensor file name '" + key + "'");
  }
  const std::string path = dir + "/" + j[key].get<std::string>();
  Tensor<T> t = ReadNpyTensor<T>(path);
  if (t.shape != shape) {
    std::string want, got;
    for (auto d : shape) want += (want.empty() ? "" : " x ") + std::to_string(d);
    for (auto d : t.shape) got += (got.empty() ? "" : " x ") + std::to_string(d);
    throw UsageError(path + ": shape is " + got + " but " + where + " needs " + want);
  }
  return t;
}

// On disk (depthwise: one kernel per channel).
std::vector<int64_t> WeightShape(const Layer& l) { return ops::Op(l.type).weight_shape(l); }

// Every number in a model file fits an int32 (shapes, multipliers, shifts) or is a small
// scale; one beyond +-2^31 is a broken file, and converting it would be undefined.
void CheckNumbers(const json& j, const std::string& where, const std::string& path) {
  if (j.is_number()) {
    const double v = j.get<double>();
    if (!(v >= -2147483648.0 && v <= 2147483647.0)) {
      throw UsageError(path + ": the number " + j.dump() + " at " + where + " is out of range");
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      CheckNumbers(j[i], where + "[" + std::to_string(i) + "]", path);
    }
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) CheckNumbers(v, where + "." + k, path);
  }
}

}  // namespace

void RequireQuantized(const Model& model, const std::string& note) {
  if (model.quantized) return;
  throw UsageError("model '" + model.name +
                   "' is not quantized: an int8 chip runs int8 weights; make them with "
                   "'tpusim quantize --model DIR --out DIR-int8' and pass --model DIR-int8" +
                   note);
}

namespace {

// model.json of the folder DIR, parsed; a file given instead of a folder is named as such.
json ReadModelJson(const std::string& dir, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (std::filesystem::is_regular_file(dir)) {  // an exported network, most likely
      throw UsageError("model '" + dir +
                       "' is a file; a model is a folder with model.json. An ONNX file is "
                       "imported first: 'tpusim import " +
                       dir +
                       " --out DIR' (then 'tpusim quantize --model DIR --out DIR-int8' "
                       "for an int8 chip), and --model names the folder");
    }
    throw UsageError("model '" + dir + "': cannot open " + path +
                     " (train one with 'tpusim train', import one with 'tpusim import', or use "
                     "models/lenet5)");
  }
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw UsageError(path + " is not valid JSON: " + e.what());
  }
  CheckNumbers(j, "model", path);
  return j;
}

// The format, name, input, preprocessing, data set and quantization of model.json.
void ReadModelHeader(const json& j, const std::string& path, Model* m) {
  const int version = j.value("version", 0);
  if (j.value("format", "") != "tpusim-model" || version < 1 || version > kModelVersion) {
    throw UsageError(path +
                     ": not a tpusim model tpusim can read (needs \"format\": "
                     "\"tpusim-model\", \"version\": 1 or 2)");
  }
  m->name = j.value("name", "model");
  const auto shape = j.at("input").at("shape").get<std::vector<int>>();
  if (shape.size() != 3) throw UsageError(path + ": input.shape must be [h, w, c]");
  m->input = {shape[0], shape[1], shape[2]};
  m->preprocess = j.at("input").value("preprocess", "mnist32");
  if (m->preprocess != "mnist32" && m->preprocess != "none") {
    throw UsageError(path + ": input.preprocess is '" + m->preprocess +
                     "'; it must be mnist32 or none");
  }
  m->dataset = j.value("dataset", "mnist");
  if (m->dataset != "mnist" && m->dataset != "fashion-mnist" && m->dataset != "none") {
    throw UsageError(path + ": \"dataset\" is '" + m->dataset +
                     "'; it must be mnist, fashion-mnist or none");
  }
  m->quantized = j.value("quantized", false);
  if (m->quantized) m->input_scale = j.at("input").at("scale").get<float>();
}

// The layers of model.json in order, each input a layer listed before it (or the input).
void ReadLayers(const json& j, const std::string& path, Model* m) {
  std::map<std::string, int> index_of = {{"input", kModelInput}};
  for (const json& lj : j.at("layers")) {
    Layer l;
    l.name = lj.at("name").get<std::string>();
    const std::string where = path + ": layer '" + l.name + "'";
    if (index_of.count(l.name)) {
      throw UsageError(where + ": the name is taken (by the model's input or another layer)");
    }
    ParseType(lj.at("type").get<std::string>(), where, &l);
    for (const json& in : lj.value("inputs", json::array())) {
      const std::string name = in.get<std::string>();
      if (!index_of.count(name)) {
        throw UsageError(where + ": input '" + name +
                         "' is not 'input' or a layer listed before it");
      }
      l.inputs.push_back(index_of[name]);
    }
    index_of[l.name] = static_cast<int>(m->layers.size());
    l.activation = ParseActivation(lj.value("activation", "none"), where);
    if (const auto read = ops::Op(l.type).read) read(lj, where, &l);
    m->layers.push_back(l);
  }
}

// A quantized layer's int8 weights, int32 bias and per-channel requantization.
void LoadInt8Weights(const std::string& dir, const json& qj, const std::string& where, Layer* l) {
  const auto n = static_cast<size_t>(ops::WeightColumns(*l));
  l->quantized = true;
  l->q.input_scale = qj.at("input_scale").get<float>();
  l->q.output_scale = qj.at("output_scale").get<float>();
  l->q.weight_scales = ops::VectorOf<float>(qj, "weight_scales", n, where);
  l->q.multiplier = ops::VectorOf<int32_t>(qj, "multiplier", n, where);
  l->q.shift = ops::VectorOf<int32_t>(qj, "shift", n, where);
  l->q.weights = LoadTensor<int8_t>(dir, qj, "weights", WeightShape(*l), where);
  if (l->depthwise) l->q.weights = ExpandDepthwise(l->q.weights);
  l->q.bias = LoadTensor<int32_t>(dir, qj, "bias", {static_cast<int64_t>(n)}, where);
  for (size_t c = 0; c < n; ++c) {
    if (l->q.shift[c] < 1 || l->q.shift[c] > 62 || l->q.multiplier[c] < 0) {
      throw UsageError(where + ": multiplier/shift of channel " + std::to_string(c) +
                       " out of range (multiplier in [0, 2^31), shift in [1, 62])");
    }
  }
}

// Each layer's declared out_shape checked, and its tensors (and int8 data) loaded.
void LoadLayerData(const std::string& dir, const json& j, const std::string& path, Model* m) {
  for (size_t i = 0; i < m->layers.size(); ++i) {
    Layer& l = m->layers[i];
    const json& lj = j["layers"][i];
    const std::string where = "layer '" + l.name + "' of " + path;
    if (lj.contains("out_shape")) {
      const auto s = lj["out_shape"].get<std::vector<int>>();
      if (s.size() != 3 || !(Shape3{s[0], s[1], s[2]} == l.out)) {
        throw UsageError(where + ": out_shape disagrees with the shape the layers produce (" +
                         std::to_string(l.out.h) + ", " + std::to_string(l.out.w) + ", " +
                         std::to_string(l.out.c) + ")");
      }
    }
    const auto read_int8 = ops::Op(l.type).read_int8;
    if (!l.HasWeights()) {
      if (read_int8 && m->quantized) read_int8(lj.at("int8"), where, &l);
      continue;
    }
    l.weights = LoadTensor<float>(dir, lj, "weights", WeightShape(l), where);
    if (l.depthwise) l.weights = ExpandDepthwise(l.weights);
    l.bias = LoadTensor<float>(dir, lj, "bias", {ops::WeightColumns(l)}, where);
    const char* const* state = ops::Op(l.type).state;
    for (; state && *state; ++state)
      l.state.push_back(LoadTensor<float>(dir, lj, *state, {ops::WeightColumns(l)}, where));
    if (!m->quantized) continue;
    LoadInt8Weights(dir, lj.at("int8"), where, &l);
    if (read_int8) read_int8(lj.at("int8"), where, &l);
  }
}

}  // namespace

Model LoadModel(const std::string& dir) {
  const std::string path = dir + "/model.json";
  const json j = ReadModelJson(dir, path);
  Model m;
  try {
    ReadModelHeader(j, path, &m);
    ReadLayers(j, path, &m);
    InferShapes(&m);
    LoadLayerData(dir, j, path, &m);
  } catch (const json::exception& e) {
    throw UsageError(path + ": " + e.what());
  }
  return m;
}

namespace {

void SaveModelFolder(const Model& m, const std::string& dir);

}  // namespace

void SaveModel(const Model& m, const std::string& dir) {
  try {
    SaveModelFolder(m, dir);
  } catch (const RuntimeError& e) {
    // Name the folder the user asked for, not the temporary one.
    const std::string what = e.what();
    const size_t reason = what.find("': ");
    throw RuntimeError("cannot write model folder '" + dir +
                       "': " + (reason == std::string::npos ? what : what.substr(reason + 3)) +
                       "; nothing was written");
  }
}

namespace {

// A weighted layer's tensors: written to the folder as .npy files (the int8 ones too, with
// their scales, in a quantized model) and named in model.json.
void AddTensors(const Layer& l, bool quantized, OutputFolder* out, json* lj) {
  (*lj)["weights"] = l.name + ".weights.npy";
  (*lj)["bias"] = l.name + ".bias.npy";
  WriteNpyTensor(out->File(l.name + ".weights.npy"),
                 l.depthwise ? CompactDepthwise(l.weights) : l.weights);
  WriteNpyTensor(out->File(l.name + ".bias.npy"), l.bias);
  const char* const* state = ops::Op(l.type).state;
  for (size_t k = 0; state && state[k]; ++k) {
    const std::string file = l.name + "." + state[k] + ".npy";
    (*lj)[state[k]] = file;
    WriteNpyTensor(out->File(file), l.state[k]);
  }
  if (quantized) {
    json qj;
    qj["input_scale"] = l.q.input_scale;
    qj["output_scale"] = l.q.output_scale;
    qj["weight_scales"] = l.q.weight_scales;
    qj["multiplier"] = l.q.multiplier;
    qj["shift"] = l.q.shift;
    qj["weights"] = l.name + ".weights.int8.npy";
    qj["bias"] = l.name + ".bias.int32.npy";
    WriteNpyTensor(out->File(l.name + ".weights.int8.npy"),
                   l.depthwise ? CompactDepthwise(l.q.weights) : l.q.weights);
    WriteNpyTensor(out->File(l.name + ".bias.int32.npy"), l.q.bias);
    (*lj)["int8"] = qj;
  }
}

void SaveModelFolder(const Model& m, const std::string& dir) {
  OutputFolder out(dir, kModelFolder);
  json j;
  j["format"] = "tpusim-model";
  // Version 1 readers know chains only; graphs (and the new layer kinds) are version 2.
  bool v2 = m.IsGraph() || m.preprocess != "mnist32";
  for (const Layer& l : m.layers) {
    const auto version = ops::Op(l.type).version;
    v2 |= version && version(l) > 1;
  }
  j["version"] = v2 ? kModelVersion : 1;
  j["name"] = m.name;
  j["dataset"] = m.dataset;
  j["input"] = {{"shape", ShapeJson(m.input)}, {"preprocess", m.preprocess}};
  j["quantized"] = m.quantized;
  if (m.quantized) j["input"]["scale"] = m.input_scale;
  j["layers"] = json::array();
  for (const Layer& l : m.layers) {
    json lj;
    lj["name"] = l.name;
    lj["type"] = l.TypeName();
    if (m.IsGraph()) {
      lj["inputs"] = json::array();
      for (int in : l.inputs)
        lj["inputs"].push_back(in == kModelInput ? "input"
                                                 : m.layers[static_cast<size_t>(in)].name);
    }
    const ops::OpDef& op = ops::Op(l.type);
    if (op.write) op.write(l, &lj);
    if (op.takes_activation) lj["activation"] = ActivationName(l.activation);
    lj["in_shape"] = ShapeJson(l.in);
    lj["out_shape"] = ShapeJson(l.out);
    if (l.HasWeights()) AddTensors(l, m.quantized, &out, &lj);
    if (op.write_int8 && m.quantized) op.write_int8(l, &lj["int8"]);
    j["layers"].push_back(lj);
  }
  WriteFileAtomically(out.File("model.json"), j.dump(2) + "\n");
  out.Commit();
}

}  // namespace

int64_t Layer::Macs() const { return ops::Op(type).macs(*this); }

bool Layer::HasWeights() const { return ops::Op(type).weight_shape != nullptr; }

std::string Summary(const Model& m) {
  std::string out =
      fmt::format("Model '{}'{}: input {} x {} x {} (h x w x c, {}){}\n", m.name,
                  m.quantized ? " (fp32 + int8)" : " (fp32)", m.input.h, m.input.w, m.input.c,
                  m.preprocess == "mnist32" ? "28 x 28 images padded to 32 x 32" : "float values",
                  m.IsGraph() ? ", a graph" : "");
  size_t w = 10;
  for (const Layer& l : m.layers) w = std::max(w, l.name.size());
  const bool graph = m.IsGraph();
  out += fmt::format("  {:<{}} {:<16} {:<16} {:<10} {:>11} {:>15}{}\n", "layer", w, "type",
                     "output shape", "activation", "params", "MACs per image",
                     graph ? "  inputs" : "");
  int64_t macs = 0;
  for (const Layer& l : m.layers) {
    std::string inputs;
    for (int in : l.inputs) {
      inputs += (inputs.empty() ? "  " : ", ") +
                (in == kModelInput ? std::string("input") : m.layers[static_cast<size_t>(in)].name);
    }
    macs += l.Macs();
    const bool act = ops::Op(l.type).takes_activation;
    std::string line =
        fmt::format("  {:<{}} {:<16} {:<16} {:<10} {:>11} {:>15}{}", l.name, w, l.TypeName(),
                    fmt::format("{} x {} x {}", l.out.h, l.out.w, l.out.c),
                    act ? ActivationName(l.activation) : "", Grouped(l.ParamCount()),
                    l.Macs() ? Grouped(l.Macs()) : "", graph ? inputs : "");
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  out += fmt::format("  total: {} parameters, {} MACs per image\n", Grouped(m.ParamCount()),
                     Grouped(macs));
  return out;
}

bool FusedPool(const Model& model, const std::vector<std::vector<int>>& consumers, size_t pool) {
  const Layer& p = model.layers[pool];
  const int from = p.inputs.empty() ? static_cast<int>(pool) - 1 : p.inputs[0];
  if (!p.IsPool() || p.global_pool || p.Padded() || p.pool_h != 2 || p.pool_w != 2 ||
      p.pool_stride != 2 || from < 0)
    return false;
  return model.layers[static_cast<size_t>(from)].type == LayerType::kConv2d &&
         consumers[static_cast<size_t>(from)].size() == 1;
}

}  // namespace tpu::nn
