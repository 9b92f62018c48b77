// Random networks and their co-simulation (see network_generator.h).
#include "host/cosim/network_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/engine/fast_engine.h"
#include "host/nn/inputs.h"
#include "host/nn/ops/op.h"
#include "host/nn/quantize.h"
#include "host/report/exec_report.h"
#include "host/run/tpu_runner.h"

namespace tpu::cosim {
namespace {

using nn::Activation;
using nn::Layer;
using nn::LayerType;

// Draws a network block by block; every layer is checked by InferShapes as it is added, and
// a block whose shapes do not work out is taken back (so every network is valid).
class NetworkDraw {
 public:
  explicit NetworkDraw(uint64_t seed) : rng_(seed) {}

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  nn::Model Build(const std::string& name) {
    m_.name = name;
    m_.preprocess = "none";
    m_.dataset = "none";
    m_.input = {Uniform(1, 14), Uniform(1, 14), Uniform(1, 16)};
    shape_ = fmt::format("{}x{}x{}", m_.input.h, m_.input.w, m_.input.c);
    const int blocks = Uniform(1, 5);
    for (int b = 0; b < blocks; ++b) Block();
    if (Chance(0.5)) Dense();
    if (m_.layers.empty()) Dense();
    return m_;
  }
  std::string Shape() const { return shape_; }

 private:
  nn::Shape3 Cur() const { return m_.OutputOf(cur_); }
  Activation RandomActivation() {
    const int a = Uniform(0, 2);
    return a == 0 ? Activation::kNone : a == 1 ? Activation::kRelu : Activation::kRelu6;
  }
  static const char* Act(Activation a) {
    return a == Activation::kNone ? "" : a == Activation::kRelu ? " relu" : " relu6";
  }

  // Adds the layers (reading `cur_` or their own inputs) if their shapes work out.
  bool TryAdd(std::vector<Layer> layers, const std::string& text) {
    const size_t before = m_.layers.size();
    for (Layer& l : layers) {
      l.name = fmt::format("l{}", m_.layers.size());
      m_.layers.push_back(std::move(l));
    }
    try {
      nn::InferShapes(&m_);
    } catch (const UsageError&) {
      m_.layers.resize(before);
      return false;
    }
    cur_ = static_cast<int>(m_.layers.size()) - 1;
    shape_ += " -> " + text;
    return true;
  }

  Layer Conv(int input, int filters, int kh, int kw, int stride, const std::string& padding) {
    Layer l;
    l.type = LayerType::kConv2d;
    l.inputs = {input};
    l.kernel_h = kh;
    l.kernel_w = kw;
    l.stride = stride;
    l.padding = padding;
    l.out.c = filters;
    return l;
  }

  void Block() {
    if (dense_) return Dense();
    const int kind = Uniform(0, 10);
    if (kind < 4) return Chance(0.3) ? ConvThenPool() : RandomConv();
    if (kind < 6) return Pool();
    if (kind < 7) return Residual();
    if (kind < 8) return Concat();
    if (kind < 9) return Gate();
    if (kind == 10 && Cur().h * Cur().w <= 64) return Lstm();
    Dense();
  }

  // An LSTM over the map's pixels as its steps (at most 64), to a vector of H: as after a
  // dense layer, only dense layers follow.
  void Lstm() {
    Layer l;
    l.type = LayerType::kLstm;
    l.inputs = {cur_};
    l.out = {1, 1, Uniform(1, 40)};
    if (TryAdd({l}, fmt::format("lstm {} steps -> {}", Cur().h * Cur().w, l.out.c))) dense_ = true;
  }

  void RandomConv() {
    const nn::Shape3 in = Cur();
    Layer l = Conv(cur_, Uniform(1, 40), Uniform(1, std::min(5, in.h + 2)),
                   Uniform(1, std::min(5, in.w + 2)), Uniform(1, 3), "valid");
    const int pad = Uniform(0, 2);
    l.padding = pad == 0 ? "valid" : pad == 1 ? "same" : "explicit";
    if (pad == 2) {
      l.pad_top = Uniform(0, l.kernel_h - 1);
      l.pad_bottom = Uniform(0, l.kernel_h - 1);
      l.pad_left = Uniform(0, l.kernel_w - 1);
      l.pad_right = Uniform(0, l.kernel_w - 1);
    }
    l.depthwise = Chance(0.2);
    if (l.depthwise) l.out.c = in.c;
    l.activation = RandomActivation();
    const std::string text =
        fmt::format("{}conv{}x{}/{} {} {}{}", l.depthwise ? "dw" : "", l.kernel_h, l.kernel_w,
                    l.stride, l.padding, l.out.c, Act(l.activation));
    TryAdd({l}, text);
  }

  void Pool() {
    const nn::Shape3 in = Cur();
    Layer l;
    l.type = Chance(0.5) ? LayerType::kMaxPool2d : LayerType::kAvgPool2d;
    l.inputs = {cur_};
    if (l.type == LayerType::kAvgPool2d && Chance(0.25)) {
      l.global_pool = true;
      TryAdd({l}, "global avgpool");
      return;
    }
    l.pool_h = Uniform(1, std::min(3, in.h));
    l.pool_w = Uniform(1, std::min(3, in.w));
    l.pool_stride = Uniform(1, 3);
    if (Chance(0.3)) {
      l.padding = "explicit";
      l.pad_top = Uniform(0, l.pool_h - 1);
      l.pad_left = Uniform(0, l.pool_w - 1);
      l.pad_bottom = Uniform(0, l.pool_h - 1);
      l.pad_right = Uniform(0, l.pool_w - 1);
    }
    const char* kind = l.type == LayerType::kMaxPool2d ? "maxpool" : "avgpool";
    TryAdd({l}, fmt::format("{}{}x{}/{}{}", kind, l.pool_h, l.pool_w, l.pool_stride,
                            l.Padded() ? " padded" : ""));
  }

  // A convolution of stride 1 and its 2 x 2 pooling of stride 2, as CNNs pair them (fused
  // into one operation; with max pooling and few channels, four output pixels a row).
  void ConvThenPool() {
    const int n = static_cast<int>(m_.layers.size()), k = Uniform(1, 4);
    Layer c = Conv(cur_, Chance(0.5) ? Uniform(1, 4) : Uniform(1, 40), k, k, 1,
                   Chance(0.5) ? "same" : "valid");
    c.activation = RandomActivation();
    Layer p;
    p.type = Chance(0.7) ? LayerType::kMaxPool2d : LayerType::kAvgPool2d;
    p.inputs = {n};
    p.pool_h = p.pool_w = p.pool_stride = 2;
    TryAdd({c, p},
           fmt::format("conv{}x{} {} {}{} + {}2x2/2", k, k, c.padding, c.out.c, Act(c.activation),
                       p.type == LayerType::kMaxPool2d ? "maxpool" : "avgpool"));
  }

  // x + conv(x): a "same" convolution of stride 1 keeping the channels, then the add. A
  // third of them crossed: conv(x) + x beside it and the two concatenated, each input then
  // read by both adds, so that no convolution's activate takes either (an int8 chip's
  // identity pass, a bf16 chip's vector unit: docs/compiler.md).
  void Residual() {
    const int x = cur_, k = 2 * Uniform(0, 1) + 1;
    const int n = static_cast<int>(m_.layers.size());
    Layer c = Conv(x, Cur().c, k, k, 1, "same");
    c.activation = RandomActivation();
    Layer add;
    add.type = LayerType::kAdd;
    add.inputs = {x, n};
    add.activation = Chance(0.5) ? Activation::kRelu : Activation::kNone;
    if (Chance(1.0 / 3)) {
      Layer other = add, cat;
      other.inputs = {n, x};
      other.activation = Chance(0.5) ? Activation::kRelu : Activation::kNone;
      cat.type = LayerType::kConcat;
      cat.inputs = {n + 1, n + 2};
      TryAdd({c, add, other, cat}, fmt::format("crossed residual(conv{}x{}){}{}", k, k,
                                               Act(add.activation), Act(other.activation)));
      return;
    }
    TryAdd({c, add}, fmt::format("residual(conv{}x{}){}", k, k, Act(add.activation)));
  }

  // conv(x) * conv'(x): a gated linear unit, two "same" convolutions of stride 1 and of one
  // width, then their elementwise product; half of them as an LSTM cell's i g, the sigmoid of
  // one times the tanh of the other (the vector unit's tables).
  void Gate() {
    const int x = cur_, n = static_cast<int>(m_.layers.size()), c = Uniform(1, 40);
    const int k = 2 * Uniform(0, 1) + 1;
    Layer a = Conv(x, c, k, k, 1, "same");
    Layer b = Conv(x, c, k, k, 1, "same");
    a.activation = RandomActivation();
    b.activation = RandomActivation();
    std::vector<Layer> layers = {a, b};
    const bool cell = Chance(0.5);
    if (cell) {
      Layer s, t;
      s.type = LayerType::kSigmoid;
      s.inputs = {n};
      t.type = LayerType::kTanh;
      t.inputs = {n + 1};
      layers.push_back(s);
      layers.push_back(t);
    }
    Layer mul;
    mul.type = LayerType::kMul;
    mul.inputs = cell ? std::vector<int>{n + 2, n + 3} : std::vector<int>{n, n + 1};
    mul.activation = Chance(0.5) ? Activation::kRelu : Activation::kNone;
    layers.push_back(mul);
    TryAdd(layers, fmt::format("gate({}conv{}x{} {}){}", cell ? "sigmoid, tanh of " : "", k, k, c,
                               Act(mul.activation)));
  }

  // concat(conv1x1(x), conv3x3(x)), both "same" and of stride 1.
  void Concat() {
    const int x = cur_, n = static_cast<int>(m_.layers.size());
    Layer a = Conv(x, Uniform(1, 20), 1, 1, 1, "same");
    Layer b = Conv(x, Uniform(1, 20), 3, 3, 1, "same");
    a.activation = RandomActivation();
    b.activation = RandomActivation();
    Layer cat;
    cat.type = LayerType::kConcat;
    cat.inputs = {n, n + 1};
    TryAdd({a, b, cat}, fmt::format("concat({}, {})", a.out.c, b.out.c));
  }

  void Dense() {
    std::vector<Layer> layers;
    std::string text;
    const int n = static_cast<int>(m_.layers.size());
    if (Cur().h != 1 || Cur().w != 1) {
      Layer f;
      f.type = LayerType::kFlatten;
      f.inputs = {cur_};
      layers.push_back(f);
      text = "flatten -> ";
    }
    Layer d;
    d.type = LayerType::kDense;
    d.inputs = {layers.empty() ? cur_ : n};
    d.out = {1, 1, Uniform(1, 40)};
    d.activation = RandomActivation();
    text += fmt::format("dense {}{}", d.out.c, Act(d.activation));
    layers.push_back(d);
    if (TryAdd(layers, text)) dense_ = true;
  }

  std::mt19937_64 rng_;
  nn::Model m_;
  int cur_ = nn::kModelInput;
  bool dense_ = false;  // after a dense layer only dense layers follow
  std::string shape_;
};

// Weights drawn N(0, 2 / fan-in) (He), biases N(0, 0.1): activations stay in range.
void FillWeights(nn::Model* m, std::mt19937_64& rng) {
  for (Layer& l : m->layers) {
    if (!l.HasWeights()) continue;
    const int64_t taps = int64_t{l.kernel_h} * l.kernel_w;
    const int64_t fan_in = l.type == LayerType::kDense  ? l.in.Size()
                           : l.type == LayerType::kLstm ? int64_t{l.in.c} + l.out.c
                           : l.depthwise                ? taps
                                                        : taps * l.in.c;
    std::normal_distribution<float> w(0.0f, static_cast<float>(std::sqrt(2.0 / fan_in)));
    std::normal_distribution<float> b(0.0f, 0.1f);
    Tensor<float> t;
    t.shape = l.type == LayerType::kConv2d
                  ? std::vector<int64_t>{l.kernel_h, l.kernel_w, l.in.c, l.out.c}
                  : nn::ops::Op(l.type).weight_shape(l);
    if (l.depthwise) t.shape.back() = 1;  // kh x kw x c x 1, expanded below
    t.data.resize(static_cast<size_t>(t.Size()));
    for (float& v : t.data) v = w(rng);
    l.weights = l.depthwise ? nn::ExpandDepthwise(t) : t;
    const int64_t columns = nn::ops::WeightColumns(l);
    l.bias.shape = {columns};
    l.bias.data.resize(static_cast<size_t>(columns));
    for (float& v : l.bias.data) v = b(rng);
  }
}

}  // namespace

// A draw whose calibration leaves some layer without a representable scale (every output of
// a ReLU zero, say) is drawn again: the case is the first draw that quantizes.
NetworkCase RandomNetwork(uint64_t seed, uint64_t index) {
  for (uint64_t attempt = 0;; ++attempt) {
    const uint64_t case_seed = (seed * 1000003u + index) * 64 + attempt;
    NetworkDraw builder(case_seed);
    NetworkCase c;
    c.model = builder.Build(fmt::format("random-{}-{}", seed, index));
    c.shape = builder.Shape();
    std::mt19937_64 rng(case_seed ^ 0x9e3779b97f4a7c15u);
    FillWeights(&c.model, rng);
    c.seed = case_seed;
    c.images = std::uniform_int_distribution<int>(1, 12)(rng);
    c.batch = std::uniform_int_distribution<int>(1, c.images)(rng);
    try {
      nn::Quantize(&c.model, nn::SyntheticInputs(c.model, 8, case_seed + 1), 8);
    } catch (const UsageError&) {
      if (attempt == 63) throw;
      continue;
    }
    return c;
  }
}

std::string CompareRuns(const run::TpuRunResult& rtl, const run::TpuRunResult& fast) {
  if (rtl.logits != fast.logits || rtl.logits_bf16 != fast.logits_bf16)
    return "the rtl engine's outputs differ from the fast engine's";
  if (rtl.plan != fast.plan) return "the plans differ: '" + rtl.plan + "' and '" + fast.plan + "'";
  if (rtl.chip_cycles != fast.chip_cycles) {
    return fmt::format("the chip's cycles: rtl {}, fast {}", rtl.chip_cycles, fast.chip_cycles);
  }
  if (rtl.layers.size() != fast.layers.size()) return "the engines ran different layer rows";
  const auto differ = [](const std::string& what, const hw::ChipCounters& a,
                         const hw::ChipCounters& b) {
    return fmt::format("{}: rtl counters {} and fast counters {}", what,
                       report::CountersJson(a).dump(), report::CountersJson(b).dump());
  };
  for (size_t i = 0; i < rtl.layers.size(); ++i) {
    const run::LayerStats &a = rtl.layers[i], &b = fast.layers[i];
    const std::string row = fmt::format("layer row '{}'", a.name);
    if (a.name != b.name || a.macs != b.macs || !(a.counters == b.counters))
      return differ(row, a.counters, b.counters);
    if (a.cores.size() != b.cores.size()) return row + ": the engines split it over other cores";
    for (size_t c = 0; c < a.cores.size(); ++c) {
      if (a.cores[c].macs != b.cores[c].macs || !(a.cores[c].counters == b.cores[c].counters))
        return differ(fmt::format("{}, core {}", row, c), a.cores[c].counters, b.cores[c].counters);
    }
    if (a.mxu_busy != b.mxu_busy || a.mxus != b.mxus)
      return row + ": the matrix units' busy cycles differ";
  }
  return "";
}

namespace {

// Writes the failing network as a model folder and returns what to tell people.
std::string SaveFailure(const NetworkCase& c, const std::string& what, const std::string& config,
                        const std::string& dir, uint64_t seed, uint64_t index) {
  const std::string folder = fmt::format("{}/{}-seed{}-network{}", dir, config, seed, index);
  std::string saved;
  try {
    std::filesystem::create_directories(folder);
    nn::SaveModel(c.model, folder);
    saved = fmt::format(
        "; saved in {}: replay with tpusim run --model {} --config {} --engine "
        "fast --synthetic {} --seed {} --batch {}{}",
        folder, folder, config, c.images, c.seed, c.batch, c.sets.empty() ? "" : " " + c.sets);
  } catch (const std::exception& e) {
    saved = fmt::format(" (could not save it in {}: {})", folder, e.what());
  }
  return fmt::format("network {} ({}, {} inputs, batch {}): {}{}", index, c.shape, c.images,
                     c.batch, what, saved);
}

// A refusal's reason without the names of the network's layers and sizes, so that refusals
// of one kind count together: "add 'l4' reads the model's input directly" -> "add '*' reads
// the model's input directly".
std::string Reason(const std::string& message) {
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    const char ch = message[i];
    if (ch == '\'' && (i == 0 || message[i - 1] == ' ')) {  // a quoted name: 'l4'
      const size_t close = message.find('\'', i + 1);
      if (close != std::string::npos && message.find(' ', i) > close) {
        out += "'*'";
        i = close;
        continue;
      }
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      if (out.empty() || out.back() != '#') out += '#';
      continue;
    }
    out += ch;
  }
  return out;
}

// Each config draws its own networks from the seed (FNV-1a of its name mixed in), so a run
// over several sizes covers more shapes; the same seed and config give the same networks.
uint64_t ConfigSeed(uint64_t seed, const std::string& config) {
  uint64_t h = 1469598103934665603u;
  for (const char ch : config) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211u;
  return seed ^ (h & 0xffffffffu);
}

// The config with memory timings and a FIFO depth drawn from the case's seed; the fields
// drawn, as `--set` flags, into `sets`.
config::TpuConfig RandomFields(const config::TpuConfig& base, uint64_t seed, std::string* sets) {
  std::mt19937_64 rng(seed ^ 0x5bd1e995u);
  const auto draw = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  config::TpuConfig c = base;
  c.host_mem_bytes_per_cycle = draw(1, 2 * c.array_dim);
  c.weight_mem_bytes_per_cycle = draw(1, 2 * c.array_dim);
  c.host_mem_latency_cycles = draw(0, 400);
  c.weight_mem_latency_cycles = draw(0, 400);
  c.weight_fifo_tiles = draw(1, 8);
  c.Validate();
  *sets = fmt::format(
      "--set host_mem_bytes_per_cycle={} --set weight_mem_bytes_per_cycle={} --set "
      "host_mem_latency_cycles={} --set weight_mem_latency_cycles={} --set weight_fifo_tiles={}",
      c.host_mem_bytes_per_cycle, c.weight_mem_bytes_per_cycle, c.host_mem_latency_cycles,
      c.weight_mem_latency_cycles, c.weight_fifo_tiles);
  return c;
}

// The layer whose map layer input `i` is (through flattens, which keep its rows), or
// nn::kModelInput.
int MapOf(const nn::Model& m, int i) {
  while (i != nn::kModelInput && m.layers[static_cast<size_t>(i)].type == nn::LayerType::kFlatten)
    i = m.layers[static_cast<size_t>(i)].inputs[0];
  return i;
}

// Whether layer l's window is larger than the window registers hold (a kernel, a pooling
// window or a stride above their largest; a dense layer's window is its input map).
bool LargerThanTheWindowRegisters(const nn::Model& m, const nn::Layer& l) {
  const int most = static_cast<int>(hw::kOpdSetWindowKh.Max());
  const int map = MapOf(m, l.inputs[0]);
  const nn::Shape3& in = map == nn::kModelInput ? m.input : m.layers[static_cast<size_t>(map)].out;
  if (l.type == nn::LayerType::kDense) return in.h > most || in.w > most;
  return std::max({l.kernel_h, l.kernel_w, l.stride}) > most ||
         (l.IsPool() && std::max({l.pool_h, l.pool_w, l.pool_stride}) > most);
}

// Whether the compiler's refusal `message` of model m names a limit that docs/compiler.md
// states and that m has: a layer it quotes reads the model's input directly (an add, a max
// pooling, a concatenation or a product: the chip reads maps that an operation wrote), has a
// window larger than the window registers hold (which a window over a whole map escapes only
// where docs/compiler.md says), or on a bf16 chip is an add ending in ReLU6, a product or a
// table (sigmoid, tanh). The
// generator draws such layers; any other refusal, or one whose layer does not have what it says, is
// a failure (issue 71: a compiler that refused every network passed).
bool DocumentedRefusal(const nn::Model& m, const std::string& message) {
  for (const nn::Layer& l : m.layers) {
    const auto says = [&](const char* kind, const char* what) {
      return message.find(fmt::format("{} '{}' {}", kind, l.name, what)) != std::string::npos;
    };
    const bool direct = std::any_of(l.inputs.begin(), l.inputs.end(),
                                    [&](int i) { return MapOf(m, i) == nn::kModelInput; });
    const char* input = "reads the model's input directly";
    if ((says("add", input) && l.type == nn::LayerType::kAdd && direct) ||
        (says("max pooling", input) && l.type == nn::LayerType::kMaxPool2d && direct) ||
        (says("concat", input) && l.type == nn::LayerType::kConcat && direct) ||
        (says("mul", input) && l.type == nn::LayerType::kMul && direct) ||
        (says(l.TypeName().c_str(), "runs on int8 chips only") &&
         (l.type == nn::LayerType::kMul || l.type == nn::LayerType::kSigmoid ||
          l.type == nn::LayerType::kTanh || l.type == nn::LayerType::kLstm)) ||
        (says("add", "ends in ReLU6") && l.type == nn::LayerType::kAdd &&
         l.activation == nn::Activation::kRelu6) ||
        (says("layer", "does not fit the window registers") && LargerThanTheWindowRegisters(m, l)))
      return true;
  }
  return false;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

NetworkCosimSummary RunNetworkCosim(engine::ChipEngine* rtl, engine::ChipEngine& fast,
                                    const NetworkCosimOptions& o) {
  NetworkCosimSummary s;
  s.config = fast.Config().name;
  s.array_dim = fast.Config().array_dim;
  s.dtype = hw::Name(fast.Config().dtype);
  for (uint64_t k = 0; k < o.networks; ++k) {
    const uint64_t index = o.first + k;
    NetworkCase c = RandomNetwork(ConfigSeed(o.seed, s.config), index);
    const bool on_rtl = rtl != nullptr && o.rtl_every > 0 && index % o.rtl_every == 0;
    std::unique_ptr<engine::ChipEngine> own;  // a fast engine with fields of its own
    if (o.random_fields && !on_rtl) {
      own = std::make_unique<engine::FastEngine>(RandomFields(fast.Config(), c.seed, &c.sets),
                                                 engine::EngineOptions{});
    }
    engine::ChipEngine& chip = own ? *own : fast;
    const nn::InputSet inputs = nn::SyntheticInputs(c.model, c.images, c.seed);
    std::string what;
    bool refused = false;
    run::TpuRunResult f;
    auto start = std::chrono::steady_clock::now();
    try {
      f = run::RunModelOnTpu(c.model, chip, inputs, c.images, c.batch);
      if (f.mismatches > 0) {
        what = fmt::format("{} of {} inputs differ from the CPU {} reference", f.mismatches,
                           c.images, f.dtype);
      }
    } catch (const UsageError& e) {  // the chip or the compiler does not take this network
      ++s.unsupported[Reason(e.what())];
      refused = true;
      if (!DocumentedRefusal(c.model, e.what()))
        what = std::string("refused for a reason the network does not have: ") + e.what();
    } catch (const std::exception& e) {
      what = std::string("the fast engine's run stopped: ") + e.what();
    }
    s.fast_seconds += Seconds(start);
    const double cells = static_cast<double>(fast.Config().array_dim) * fast.Config().array_dim;
    const bool over = on_rtl && static_cast<double>(f.Total().cycles) * cells > kRtlBudget;
    s.rtl_over_budget += !refused && what.empty() && over;
    if (!refused && what.empty() && on_rtl && !over) {
      start = std::chrono::steady_clock::now();
      try {
        what = CompareRuns(run::RunModelOnTpu(c.model, *rtl, inputs, c.images, c.batch), f);
      } catch (const std::exception& e) {
        what = std::string("the rtl engine's run stopped: ") + e.what();
      }
      s.rtl_seconds += Seconds(start);
      ++s.rtl_networks;
    }
    ++s.networks;
    s.layers += c.model.layers.size();
    if (!what.empty()) {
      ++s.mismatches;
      const std::string text = SaveFailure(c, what, s.config, o.mismatch_dir, o.seed, index);
      if (s.first_mismatch.empty()) s.first_mismatch = text;
    }
    if (o.progress) o.progress(static_cast<double>(k + 1) / static_cast<double>(o.networks));
  }
  return s;
}

}  // namespace tpu::cosim
