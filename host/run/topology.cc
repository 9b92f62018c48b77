// Running topology files' layers on the chip (see topology.h).
#include "host/run/topology.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <new>
#include <optional>
#include <random>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/compiler/network_compiler.h"
#include "host/engine/cycle_attribution.h"
#include "host/gemm/gemm_runner.h"
#include "host/nn/bf16_net.h"
#include "host/nn/inputs.h"
#include "host/nn/int8_net.h"

namespace tpu::run {

using compiler::Bound;
using compiler::LayerJob;
using compiler::LoweredGraph;
using compiler::LowerGraph;
using compiler::MapsOnChip;
using compiler::NetworkCompiler;
using compiler::PlanGraph;
using compiler::TopologyLayer;
namespace {

// Random int8 weights and biases for a layer of `k` inputs per output and `filters` outputs,
// its weights' shape already set (the requantization keeps outputs spread over the int8
// range).
void FillRandom(nn::Layer& c, int64_t k, int64_t filters, std::mt19937_64& rng) {
  c.quantized = true;
  c.q.weights.data.resize(static_cast<size_t>(k * filters));
  for (auto& w : c.q.weights.data) w = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  c.q.bias.shape = {filters};
  c.q.bias.data.resize(static_cast<size_t>(filters));
  for (auto& b : c.q.bias.data) b = static_cast<int32_t>(rng() % 2001) - 1000;
  // Sums of k products of about 64 x 64 each: scale by about 1 / (64 sqrt(k)).
  int shift = 30;
  while ((int64_t{1} << (shift - 30)) < 64 * static_cast<int64_t>(std::sqrt(double(k)) + 1))
    ++shift;
  c.q.multiplier.assign(static_cast<size_t>(filters), int32_t{1} << 30);
  c.q.shift.assign(static_cast<size_t>(filters), shift);
}

// Random float32 weights and biases for a bf16 chip, which runs a model's fp32 weights
// rounded to bfloat16 (docs/bf16.md): weights normal of deviation 1 / sqrt(k), so that a
// sum of k products of normal inputs stays about 1; biases normal of deviation 0.1.
void FillRandomFloat(nn::Layer& c, int64_t k, int64_t filters, std::mt19937_64& rng) {
  c.quantized = false;
  std::normal_distribution<float> weight(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  std::normal_distribution<float> bias(0.0f, 0.1f);
  c.weights.data.resize(static_cast<size_t>(k * filters));
  for (float& w : c.weights.data) w = weight(rng);
  c.bias.shape = {filters};
  c.bias.data.resize(static_cast<size_t>(filters));
  for (float& b : c.bias.data) b = bias(rng);
}

// The layer as a one-layer model, quantized (random int8 weights) or on a bf16 chip fp32
// (random float weights): a dense layer where it is one (a 1 x 1 IFMAP and filter: its
// batch's rows are one GEMM's M), else a convolution.
nn::Model LayerModel(const TopologyLayer& l, std::mt19937_64& rng, bool bf16) {
  nn::Model m;
  m.name = l.name;
  m.preprocess = "none";
  m.input = {static_cast<int>(l.ifmap_h), static_cast<int>(l.ifmap_w),
             static_cast<int>(l.channels)};
  m.quantized = !bf16;
  nn::Layer c;
  c.name = l.name;
  c.type = l.IsDense() ? nn::LayerType::kDense : nn::LayerType::kConv2d;
  c.inputs = {nn::kModelInput};
  c.in = m.input;
  c.out = {static_cast<int>(l.OfmapH()), static_cast<int>(l.OfmapW()), static_cast<int>(l.filters)};
  (bf16 ? c.weights.shape : c.q.weights.shape) =
      l.IsDense() ? std::vector<int64_t>{l.channels, l.filters}
                  : std::vector<int64_t>{l.filter_h, l.filter_w, l.channels, l.filters};
  (bf16 ? FillRandomFloat : FillRandom)(c, l.filter_h * l.filter_w * l.channels, l.filters, rng);
  if (!l.IsDense()) {
    c.kernel_h = static_cast<int>(l.filter_h);
    c.kernel_w = static_cast<int>(l.filter_w);
    c.stride = static_cast<int>(l.stride);
    // SCALE-Sim's output size rounds up: the last window may reach past the map, into zero
    // padding at the bottom and right.
    c.padding = "explicit";
    c.pad_bottom = static_cast<int>(
        std::max<int64_t>(0, (l.OfmapH() - 1) * l.stride + l.filter_h - l.ifmap_h));
    c.pad_right = static_cast<int>(
        std::max<int64_t>(0, (l.OfmapW() - 1) * l.stride + l.filter_w - l.ifmap_w));
  }
  m.layers = {c};
  return m;
}

// Maps on chip: the largest group of images (at most the batch) whose input and output
// maps both fit the unified buffer beside the layer's work, as a network's segment runs its
// images in groups; the batch when none does (its maps then cross the host link).
int MapsGroup(const nn::Model& m, const config::TpuConfig& c, int batch, bool maps_on_chip) {
  if (!maps_on_chip) return batch;
  const LoweredGraph graph = LowerGraph(m, c.array_dim, c.dtype);
  const auto fits = [&](int g) { return PlanGraph(graph, c, g, {true, true}).why_not.empty(); };
  if (fits(batch)) return batch;
  // A larger group only needs more rows, so the groups that fit are 1 to some g: bisect
  // (a GEMM row's batch is its M, up to millions).
  int lo = 0, hi = batch;  // lo fits (0: none known), hi does not
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo > 0 ? lo : batch;
}

// A round of the layer on the chip's cores, each core its own job (a share of the images, or
// of the output channels), combined by CombineCoreJobs with the maps-in and maps-out
// programs combined the same way. Holds the layer program's result and each core's output
// bytes (none in timing-only runs; one core: the job as it is).
struct CoresResult {
  engine::ExecResult exec;
  // On a core of several matrix units, the cycles each had work in exec, over the cores
  // (host/engine/cycle_attribution.h); empty otherwise.
  std::vector<uint64_t> mxu_busy;
  std::vector<int> share;                 // images of each core that runs (cores 0, 1, ...)
  std::vector<std::vector<uint8_t>> out;  // each such core's output bytes
};

// run(job) on a chip of cores of several matrix units with each core observed: the cycles
// each matrix unit had work, over the cores, into *mxu_busy (left empty on one unit).
template <typename Run>
engine::ExecResult RunObservingUnits(engine::ChipEngine& engine, const engine::ExecJob& job,
                                     Run run, std::vector<uint64_t>* mxu_busy) {
  const config::TpuConfig& c = engine.Config();
  if (c.mxus_per_core == 1) return run(job);
  std::vector<engine::CycleAttribution> units(static_cast<size_t>(c.cores),
                                              engine::CycleAttribution(1, c.array_dim));
  engine::ExecResult e;
  {
    const engine::ScopedCoreObservers observe(engine, units, units.size());
    e = run(job);
  }
  mxu_busy->assign(static_cast<size_t>(c.mxus_per_core), 0);
  for (const engine::CycleAttribution& a : units)
    for (size_t m = 0; m < mxu_busy->size(); ++m) (*mxu_busy)[m] += a.MxuBusy()[0][m];
  return e;
}

// The jobs on cores 0, 1, ... at once; `share`: each core's images.
CoresResult RunOnCores(engine::ChipEngine& engine, std::vector<LayerJob> jobs,
                       std::vector<int> share, const std::string& name) {
  CoresResult r;
  for (LayerJob& j : jobs) j.exec.name = name;
  r.share = std::move(share);
  auto combined = [&](auto pick) {
    std::vector<engine::ExecJob> parts;
    for (const LayerJob& j : jobs) parts.push_back(pick(j));
    return compiler::CombineCoreJobs(std::move(parts));
  };
  auto run = [&](const engine::ExecJob& ex) {
    engine::ExecResult e = engine.Run(ex);
    if (!e.ok)
      throw RuntimeError(fmt::format("layer '{}' stopped on the chip: {}", name, e.message));
    return e;
  };
  for (size_t b = 0; b < jobs[0].before.size(); ++b)
    run(combined([&](const LayerJob& j) { return j.before[b]; }).job);
  const compiler::CoreJobs exec = combined([](const LayerJob& j) { return j.exec; });
  r.exec = RunObservingUnits(engine, exec.job, run, &r.mxu_busy);
  const compiler::CoreJobs* last = &exec;
  std::vector<uint8_t> bytes = r.exec.host_out;
  std::optional<compiler::CoreJobs> after;
  for (size_t a = 0; a < jobs[0].after.size(); ++a) {
    after = combined([&](const LayerJob& j) { return j.after[a]; });
    bytes = run(after->job).host_out;
    last = &*after;
  }
  if (!engine.ComputesValues()) return r;  // no bytes come back
  for (size_t c = 0; c < jobs.size(); ++c) r.out.push_back(last->HostOut(bytes, c));
  return r;
}

// A layer's batch: its own (a GEMM row's M) or the run's.
int LayerBatch(const TopologyLayer& l, int batch) {
  if (l.batch == 0) return batch;
  if (batch != 1) {
    throw UsageError(fmt::format("{} {} does not apply to layer '{}': a GEMM's batch is its M ({})",
                                 Field("batch"), batch, l.name, l.batch));
  }
  return static_cast<int>(l.batch);
}

// Whether a GEMM list is one network: every row a GEMM of one M, each row's K the previous
// row's N (its input is the previous row's output).
bool IsChain(const std::vector<TopologyLayer>& layers) {
  if (layers.size() < 2) return false;
  for (size_t i = 0; i < layers.size(); ++i) {
    const TopologyLayer& l = layers[i];
    if (l.batch == 0 || l.batch != layers[0].batch) return false;
    if (i > 0 && l.channels != layers[i - 1].filters) return false;
  }
  return true;
}

// The chain as one model of dense layers (random int8 weights, or float ones on a bf16
// chip; ReLU between them), each layer reading the one before.
nn::Model ChainModel(const std::vector<TopologyLayer>& layers, std::mt19937_64& rng, bool bf16) {
  nn::Model m;
  m.name = "gemm-chain";
  m.preprocess = "none";
  m.input = {1, 1, static_cast<int>(layers[0].channels)};
  m.quantized = !bf16;
  for (const TopologyLayer& l : layers) {
    nn::Layer c = LayerModel(l, rng, bf16).layers[0];
    c.inputs = {m.layers.empty() ? nn::kModelInput : static_cast<int>(m.layers.size()) - 1};
    if (&l != &layers.back()) c.activation = nn::Activation::kRelu;
    m.layers.push_back(std::move(c));
  }
  return m;
}

// A chained GEMM list runs as the application it describes: one whole-network program for
// the batch of M (NetworkCompiler), its input over the host link once, the activations in
// the unified buffer from layer to layer, the output back to the host; per-layer rows from
// the program's attribution (docs/timing.md).
TpuRunResult RunChain(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                      uint64_t seed, const std::function<void(double)>& progress) {
  std::mt19937_64 rng(seed);
  const nn::Model model = ChainModel(layers, rng, engine.Config().dtype == hw::Dtype::kBf16);
  const auto m = static_cast<int>(layers[0].batch);
  const nn::InputSet inputs = nn::SyntheticInputs(model, m, seed);
  TpuRunResult r = RunModelOnTpu(model, engine, inputs, m, m, progress);
  r.images = 1;  // the list runs once
  return r;
}

// A layer's random input maps as the chip takes them (int8 from random pixels, or bfloat16
// from normal floats) and as its CPU reference takes them (the pixels, or the floats).
template <class T>
struct LayerInputs {
  std::vector<T> act;
  std::vector<uint8_t> pixels;
  std::vector<float> x;
};
template <class T>
LayerInputs<T> RandomInputs(size_t size, std::mt19937_64& rng) {
  LayerInputs<T> in;
  in.act.resize(size);
  if constexpr (sizeof(T) == 2) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    in.x.resize(size);
    for (size_t i = 0; i < size; ++i) {
      in.x[i] = normal(rng);
      in.act[i] = arith::Bf16OfFp32(arith::BitsOfFloat(in.x[i]));
    }
  } else {
    in.pixels.resize(size);
    for (auto& p : in.pixels) p = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < size; ++i) in.act[i] = arith::QuantizePixel(in.pixels[i]);
  }
  return in;
}

// Whether a core's outputs (`out`, for images [first, first + count) of `in`) are the CPU
// reference's for model m.
template <class T>
bool CoreExact(const nn::Model& m, const NetworkCompiler& nc, const std::vector<uint8_t>& out,
               const LayerInputs<T>& in, int64_t first, int64_t count, int array_dim) {
  const int64_t size = m.input.Size();
  if constexpr (sizeof(T) == 2) {
    const nn::Bf16Net net(m, array_dim);
    std::vector<uint16_t> want;
    for (int64_t i = first; i < first + count; ++i) {
      const std::vector<uint16_t> y = net.Forward(in.x.data() + i * size).back();
      want.insert(want.end(), y.begin(), y.end());
    }
    return nc.Decode<uint16_t>(out, static_cast<int>(count)) == want;
  } else {
    const std::vector<int8_t> got = nc.Decode<int8_t>(out, static_cast<int>(count));
    const nn::MatrixI8 want = nn::Int8Net(m).Forward(in.pixels.data() + first * size, count).back();
    return std::equal(got.begin(), got.end(), want.data());
  }
}

// How a layer's work is shared out over the cores: one model for them all (data parallel,
// each core a share of the images), or a model per core (model parallel: each core a share
// of the output channels, whole column tiles, for every image; each share's weights random
// of their own, as a slice of the layer's would be). Empty `nc` where a share's program does
// not fit the chip.
struct LayerParts {
  std::vector<nn::Model> models;                     // one, or one per core
  std::vector<std::unique_ptr<NetworkCompiler>> nc;  // each model's program
  int group = 0;                                     // images a program takes at once

  bool Columns() const { return models.size() > 1; }
  size_t PartOf(size_t core) const { return Columns() ? core : 0; }  // the model core k runs
  // Each core's images of a round of `count`: every core all of them where each has a share
  // of the output channels, else each a share of the images (BatchShares).
  std::vector<BatchShare> Images(int count, int cores) const {
    return Columns() ? std::vector<BatchShare>(models.size(), BatchShare{0, count})
                     : BatchShares(count, cores);
  }
};
// The cores a layer's output channels could be shared out over: on a chip of more cores than
// the batch has images, one per column tile up to the cores; 1 otherwise.
int ColumnSplit(const TopologyLayer& l, int batch, const config::TpuConfig& c) {
  const int64_t tiles = (l.filters + c.array_dim - 1) / c.array_dim;
  return c.cores > batch ? static_cast<int>(std::min<int64_t>(c.cores, tiles)) : 1;
}
// The most images, up to `group`, that one program of model m runs on the chip: its plan
// fits (host memory holds the group's maps, ...) and its instructions a core's program
// region. They grow with the images, so a program too long is compiled again for
// proportionally fewer until it fits. `group` where none fits (the caller says why).
int FittingGroup(const nn::Model& m, const config::TpuConfig& c, int group, bool maps_on_chip) {
  for (;;) {
    const NetworkCompiler nc(m, c, group, maps_on_chip);
    if (!nc.Fits()) {
      const int most = nc.LargestBatch(group);
      if (most < 1 || most >= group) return group;
      group = most;
      continue;
    }
    const uint64_t words = nc.Compile(group).job.exec.program.words.size();
    if (words <= engine::kMaxProgramWords || group == 1) return group;
    group = std::max(
        1, static_cast<int>(static_cast<uint64_t>(group) * engine::kMaxProgramWords / words));
  }
}
// The parts of `split` cores sharing the output channels (1: data parallel).
LayerParts PartsOf(const TopologyLayer& l, int batch, const config::TpuConfig& c, bool maps_on_chip,
                   bool bf16, int split, std::mt19937_64& rng) {
  LayerParts parts;
  const int64_t n = c.array_dim, tiles = (l.filters + n - 1) / n;
  const std::vector<BatchShare> shares = BatchShares(static_cast<int>(tiles), split);
  parts.models.reserve(shares.size());
  for (const BatchShare& sh : shares) {  // one share of all the tiles where split is 1
    TopologyLayer part = l;
    part.filters = std::min<int64_t>(l.filters, (sh.first + sh.count) * n) - sh.first * n;
    parts.models.push_back(LayerModel(part, rng, bf16));
  }
  parts.group = batch;
  for (const nn::Model& m : parts.models) {
    parts.group = std::min(parts.group, MapsGroup(m, c, batch, maps_on_chip));
    parts.group = FittingGroup(m, c, parts.group, maps_on_chip);
  }
  for (const nn::Model& m : parts.models) {
    parts.nc.push_back(std::make_unique<NetworkCompiler>(m, c, parts.group, maps_on_chip));
    const MapsOnChip a = parts.nc.back()->Maps(), b = parts.nc.front()->Maps();
    if (!parts.nc.back()->Fits() || a.input != b.input || a.output != b.output) {
      parts.nc.clear();
      break;
    }
  }
  return parts;
}
// The fewest cycles the parts could take for `batch` images (batch < cores) from the bound of
// each core's program (graph_bound.h): the slowest core's array, weight or vector-unit term;
// the host link's terms added over the cores, which share the one link; or the weight
// channel's: the cores' weight bytes over its bytes a cycle (a core's weight term is its
// rows times the cycles its weight DMAs take for a row, CoreWeightRowCycles).
double RoundBound(const LayerParts& parts, int batch, const config::TpuConfig& c) {
  // A core's weight term in cycles of the shared channel.
  const double channel = static_cast<double>(hw::RowBytes(c)) /
                         static_cast<double>(c.weight_mem_bytes_per_cycle) /
                         c.CoreWeightRowCycles();
  double slowest = 0, host = 0, weights = 0;
  const std::vector<BatchShare> images = parts.Images(batch, c.cores);
  for (size_t k = 0; k < images.size(); ++k) {
    Bound b;
    for (const Bound& op : parts.nc[parts.PartOf(k)]->Bounds(images[k].count)) b += op;
    slowest = std::max({slowest, b.array, b.weights, b.activation, b.vector_unit});
    host += b.host + b.staged_host;
    weights += b.weights * channel;
  }
  return std::max({slowest, host, weights});
}
// The parts layer l runs as: its output channels shared out where that fits and its bound
// (RoundBound) is below the batch split's, else the batch split.
LayerParts ChooseParts(const TopologyLayer& l, int batch, const config::TpuConfig& c,
                       bool maps_on_chip, bool bf16, std::mt19937_64& rng) {
  LayerParts data = PartsOf(l, batch, c, maps_on_chip, bf16, 1, rng);
  const int split = ColumnSplit(l, batch, c);
  if (split == 1) return data;
  LayerParts columns = PartsOf(l, batch, c, maps_on_chip, bf16, split, rng);
  if (columns.nc.empty()) return data;
  if (data.nc.empty() || RoundBound(columns, batch, c) < RoundBound(data, batch, c)) return columns;
  return data;
}

// The layer's row name: how it runs, where its maps are, and how the cores share it.
std::string LayerRowName(const TopologyLayer& l, const LayerParts& parts) {
  const MapsOnChip maps = parts.nc.front()->Maps();
  std::string how = l.IsDense() ? "dense" : "windows";
  how += maps.input && maps.output ? ", maps on chip"
         : maps.input              ? ", input on chip"
         : maps.output             ? ", output on chip"
                                   : "";
  if (parts.Columns())
    how += fmt::format(", {} {} cores", kOutputChannelsSplit, parts.models.size());
  return l.name + " (" + how + ")";
}

// Layer l as one-layer network programs (NetworkCompiler: the chip forms the windows), the
// batch in groups whose maps fit a core, shared out over the cores as LayerParts says;
// added to *row; false (nothing run) where the layer does not fit that way. `exact` is
// cleared where computed outputs differ from the CPU reference.
template <class T>
bool RunLayerProgram(const TopologyLayer& l, int batch, engine::ChipEngine& engine,
                     bool maps_on_chip, std::mt19937_64& rng, TpuRunResult& result, bool& exact,
                     LayerStats* row) {
  const config::TpuConfig& c = engine.Config();
  const LayerParts parts = ChooseParts(l, batch, c, maps_on_chip, sizeof(T) == 2, rng);
  if (parts.nc.empty()) return false;
  const int64_t in_size = parts.models[0].input.Size();
  const gemm::GemmShape g = l.Gemm();
  const LayerInputs<T> in = RandomInputs<T>(static_cast<size_t>(in_size * batch), rng);
  LayerStats& stats = *row;
  for (const auto& nc : parts.nc) result.ub_rows = std::max(result.ub_rows, nc->UbRows());
  stats.name = LayerRowName(l, parts);
  stats.m = g.m * batch;
  stats.k = g.k;
  stats.n += g.n;  // a layer run in groups of its columns: each group's
  const int round = parts.group * (parts.Columns() ? 1 : c.cores);
  for (int i0 = 0; i0 < batch; i0 += round) {
    const int count = std::min(round, batch - i0);
    std::vector<LayerJob> jobs;
    std::vector<int> share;  // each core's images
    const std::vector<BatchShare> images = parts.Images(count, c.cores);
    for (size_t k = 0; k < images.size(); ++k) {
      const auto [f, n] = images[k];
      const std::vector<T> act(in.act.begin() + (i0 + f) * in_size,
                               in.act.begin() + (i0 + f + n) * in_size);
      jobs.push_back(parts.nc[parts.PartOf(k)]->Build(act, n, static_cast<int>(images.size())));
      share.push_back(n);
    }
    const CoresResult r = RunOnCores(engine, std::move(jobs), std::move(share), l.name);
    result.chip_cycles += r.exec.cycles;
    stats.mxu_busy.resize(r.mxu_busy.size());
    for (size_t u = 0; u < r.mxu_busy.size(); ++u) stats.mxu_busy[u] += r.mxu_busy[u];
    for (size_t k = 0; k < r.share.size(); ++k) {
      const nn::Model& model = parts.models[parts.PartOf(k)];
      const NetworkCompiler& nc = *parts.nc[parts.PartOf(k)];
      // The core's part: its images, with its share of the output channels.
      report::AddJob(r.exec.CountersOf(static_cast<int>(k)),
                     g.m * g.k * model.layers[0].out.c * r.share[k], static_cast<int>(k), c.cores,
                     &stats);
      for (const Bound& b : nc.Bounds(r.share[k])) stats.bound += b;
      if (engine.ComputesValues()) {
        exact = exact && CoreExact(model, nc, r.out[k], in, i0 + images[k].first, r.share[k],
                                   static_cast<int>(c.array_dim));
      }
    }
  }
  return true;
}

// Layer l as the GEMM its im2col rows make (SCALE-Sim's view of it, --host-im2col): a dense
// layer of K = fh x fw x c inputs and the filters as outputs, every output pixel of every
// image of the batch a row of A, formed on the host.
TopologyLayer Im2colLayer(const TopologyLayer& l) {
  const gemm::GemmShape g = l.Gemm();
  TopologyLayer d;
  d.name = l.name;
  d.ifmap_h = d.ifmap_w = d.filter_h = d.filter_w = 1;
  d.channels = g.k;
  d.filters = g.n;
  return d;
}

// The bytes the simulation of layer l holds at the least: the batch's input and output maps
// (the random inputs it makes, and what the chip writes back) and the weights, each value
// `bytes` wide. In double: a topology's sizes may overflow an int64 product.
double LayerHostBytes(const TopologyLayer& l, int batch, double bytes) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double maps =
      d(l.ifmap_h) * d(l.ifmap_w) * d(l.channels) + d(l.OfmapH()) * d(l.OfmapW()) * d(l.filters);
  return bytes * (batch * maps + d(l.filter_h) * d(l.filter_w) * d(l.channels) * d(l.filters));
}

// Refuses, before anything runs, a layer whose simulation cannot fit this machine's memory
// (it ended in std::bad_alloc, naming nothing).
void CheckLayersFitThisMachine(const std::vector<TopologyLayer>& layers, int run_batch,
                               double bytes) {
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                     static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  for (const TopologyLayer& l : layers) {
    const int batch = LayerBatch(l, run_batch);
    const double need = LayerHostBytes(l, batch, bytes);
    if (ram > 0 && need > ram) {
      throw UsageError(fmt::format(
          "layer '{}' ({} x {} x {} input, {} filters of {} x {}, batch {}) needs at least "
          "{:.1f} GB to simulate (its input and output maps and its weights), more than this "
          "machine's {:.1f} GB of memory: make the layer or the batch smaller",
          l.name, l.ifmap_h, l.ifmap_w, l.channels, l.filters, l.filter_h, l.filter_w, batch,
          need / 1e9, ram / 1e9));
    }
  }
}

// Layer l as the GEMM of its im2col rows (Im2colLayer), its maps in host memory, added to
// *row: in groups of output columns whose weight tiles fit the weight memory, each group
// one-layer programs (RunLayerProgram).
template <class T>
void RunIm2col(const TopologyLayer& l, int batch, engine::ChipEngine& engine, std::mt19937_64& rng,
               TpuRunResult& result, bool& exact, LayerStats* row) {
  const config::TpuConfig& c = engine.Config();
  const gemm::GemmShape g = l.Gemm();
  const int64_t n = c.array_dim, rows = g.m * batch;
  if (rows > INT32_MAX) {
    throw UsageError(fmt::format(
        "layer '{}' has {} im2col rows at batch {}, more than 2^31 - 1: make the batch smaller",
        l.name, rows, batch));
  }
  const int64_t column_bytes = (g.k + n - 1) / n * n * n * static_cast<int64_t>(sizeof(T));
  const int64_t columns = c.weight_mem_bytes / column_bytes * n;
  if (columns < 1) {
    throw UsageError(fmt::format(
        "layer '{}' (K = {}) does not fit the chip: one column of its weight tiles is {} bytes "
        "and the weight memory holds {}; raise weight_mem_bytes",
        l.name, g.k, column_bytes, c.weight_mem_bytes));
  }
  for (int64_t col0 = 0; col0 < g.n; col0 += columns) {
    TopologyLayer part = Im2colLayer(l);
    part.filters = std::min(columns, g.n - col0);
    if (!RunLayerProgram<T>(part, static_cast<int>(rows), engine, false, rng, result, exact, row)) {
      const NetworkCompiler nc(LayerModel(part, rng, sizeof(T) == 2), c, 1);
      throw UsageError(
          fmt::format("layer '{}' does not fit chip '{}', even as the GEMM of its "
                      "im2col rows: {}",
                      l.name, c.name, nc.WhyNot()));
    }
  }
  row->name = l.name;
}

// Layer l as one-layer network programs: forming its windows on the chip where that fits
// (not with --host-im2col), else as the GEMM of its im2col rows (RunIm2col).
template <class T>
LayerStats RunLayer(const TopologyLayer& l, int batch, engine::ChipEngine& engine,
                    std::mt19937_64& rng, const TopologyRunOptions& options,
                    const std::function<void(double)>& on_macs, TpuRunResult& result, bool& exact) {
  LayerStats row;
  if (options.host_im2col ||
      !RunLayerProgram<T>(l, batch, engine, options.maps_on_chip, rng, result, exact, &row))
    RunIm2col<T>(l, batch, engine, rng, result, exact, &row);
  const gemm::GemmShape g = l.Gemm();
  on_macs(static_cast<double>(g.m * g.k * g.n * batch));
  return row;
}

// The layers one after another (RunTopologyOnTpu), T the chip's operand type.
template <class T>
TpuRunResult RunLayers(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                       uint64_t seed, const std::function<void(double)>& progress,
                       const TopologyRunOptions& options) {
  CheckBatch(options.batch);
  CheckLayersFitThisMachine(layers, options.batch, sizeof(T));
  if (options.maps_on_chip && !options.host_im2col && IsChain(layers)) {
    LayerBatch(layers[0], options.batch);  // a GEMM's batch is its M: refuses --batch
    return RunChain(layers, engine, seed, progress);
  }
  const auto start = std::chrono::steady_clock::now();
  TpuRunResult result;
  result.checked = engine.ComputesValues();
  std::mt19937_64 rng(seed);
  double total_macs = 0, done_macs = 0;
  for (const auto& l : layers) {
    const int batch = LayerBatch(l, options.batch);
    result.images = l.batch ? 1 : batch;  // a GEMM list runs once
    const gemm::GemmShape g = l.Gemm();
    total_macs +=
        static_cast<double>(g.m * batch) * static_cast<double>(g.k) * static_cast<double>(g.n);
  }
  const auto on_macs = [&](double macs) {
    done_macs += macs;
    if (progress) progress(total_macs > 0 ? done_macs / total_macs : 1.0);
  };
  for (const TopologyLayer& l : layers) {
    const int batch = LayerBatch(l, options.batch);
    bool exact = true;
    try {
      result.layers.push_back(RunLayer<T>(l, batch, engine, rng, options, on_macs, result, exact));
    } catch (const std::bad_alloc&) {
      throw RuntimeError(fmt::format(
          "this machine ran out of memory simulating layer '{}' (at least {:.1f} GB of maps "
          "and weights at batch {}): make the layer or the batch smaller",
          l.name, LayerHostBytes(l, batch, sizeof(T)) / 1e9, batch));
    }
    result.mismatches += !exact;
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

TpuRunResult RunTopologyOnTpu(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                              uint64_t seed, const std::function<void(double)>& progress,
                              const TopologyRunOptions& options) {
  const bool bf16 = engine.Config().dtype == hw::Dtype::kBf16;
  return bf16 ? RunLayers<uint16_t>(layers, engine, seed, progress, options)
              : RunLayers<int8_t>(layers, engine, seed, progress, options);
}

}  // namespace tpu::run
