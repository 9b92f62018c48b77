// Running a model on the TPU, batch by batch (see tpu_runner.h).
#include "host/run/tpu_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/transformer_program.h"
#include "host/engine/cycle_attribution.h"
#include "host/nn/bf16_net.h"
#include "host/nn/cpu_backend.h"
#include "host/nn/int8_net.h"

namespace tpu::run {

using compiler::Bound;
using compiler::LayerCompiler;
using compiler::LayerJob;
using compiler::LayerStep;
using compiler::NetworkCompiler;
using compiler::PlanSteps;

hw::ChipCounters TpuRunResult::Total() const {
  hw::ChipCounters t;
  for (const LayerStats& l : layers) t += l.counters;
  return t;
}

int64_t TpuRunResult::TotalMacs() const {
  int64_t s = 0;
  for (const LayerStats& l : layers) s += l.macs;
  return s;
}

namespace {

// Layer jobs: each step of a chain its own program, its output put together on the host
// (channel groups) and handed to the next. Returns the model's output of the batch.
std::vector<int8_t> RunLayerJobs(const std::vector<LayerStep>& steps,
                                 const std::vector<LayerCompiler>& compilers,
                                 engine::ChipEngine& engine, std::vector<int8_t> act, int b,
                                 TpuRunResult* r) {
  const bool values = engine.ComputesValues();
  std::vector<int8_t> next;  // a layer's output, put together from its channel groups
  for (size_t s = 0; s < compilers.size(); ++s) {
    const LayerCompiler& lc = compilers[s];
    const engine::ExecResult e = engine.Run(lc.Build(act, b).exec);
    if (!e.ok) {
      throw RuntimeError("layer '" + r->layers[s].name + "' failed on the chip: " + e.message);
    }
    report::AddJob(e.CountersOf(0), lc.MacsPerImage() * b, 0, 1, &r->layers[s]);  // on core 0
    r->chip_cycles += e.cycles;
    std::vector<int8_t> out =
        values ? lc.Decode(e.host_out, b)
               : std::vector<int8_t>(static_cast<size_t>(b * lc.OutShape().Size()), 0);
    if (steps[s].channels == 0) {
      act = std::move(out);
      continue;
    }
    const nn::Shape3 whole = lc.LayerOutShape();
    const int64_t group = lc.OutShape().c, pixels_out = b * int64_t{whole.h} * whole.w;
    if (lc.ChannelFirst() == 0) next.assign(static_cast<size_t>(b * whole.Size()), 0);
    for (int64_t p = 0; p < pixels_out; ++p) {
      std::copy_n(&out[static_cast<size_t>(p * group)], group,
                  &next[static_cast<size_t>(p * whole.c + lc.ChannelFirst())]);
    }
    if (lc.ChannelFirst() + group == whole.c) act = std::move(next);
  }
  return act;
}

// The network as the engine holds it for one batch size: compiled once, a program per core
// for its share of the batch (docs/compiler.md, "Several cores"), or for one image split
// over the cores (`split`, model parallel), combined and loaded (the programs, parameters
// and weights), so that each batch writes only its inputs.
struct LoadedNetwork {
  int batch = 0;                           // the batch size loaded; 0: none yet
  bool split = false;                      // one image split over the cores (RunSplit)
  std::vector<LayerJob> jobs;              // by core: the operation of each instruction, its units
  std::vector<std::vector<Bound>> bounds;  // by core: each operation's bound (its program's)
  std::vector<int> share;                  // by core: its images of the batch
  compiler::CoreJobs windows;              // each core's read-back range (the job's images dropped)
};

// What a run keeps from batch to batch: the network as the engine holds it, or the layer
// jobs' steps and compilers; each core's attribution of cycles to the operations (whole
// networks, host/engine/cycle_attribution.h); the reference (the CPU int8 one, batched and
// bit-exact with the scalar ReferenceInt8, tested; on a bf16 chip nn::Bf16Net).
struct RunState {
  LoadedNetwork loaded;
  std::vector<LayerStep> steps;
  std::vector<LayerCompiler> compilers;
  std::vector<engine::CycleAttribution> attributions;
  std::optional<nn::Int8Net> int8_reference;
  std::optional<nn::Bf16Net> bf16_reference;
};

// Loads the combined jobs (`windows`) with their inputs regions of `input_bytes` each;
// `windows` keeps only what later runs use (the read-back ranges).
void LoadJobs(const NetworkCompiler& network, const std::vector<uint64_t>& input_bytes,
              engine::ChipEngine& engine, LoadedNetwork* l) {
  engine.Load(compiler::TakeExecutable(&l->windows, input_bytes, network.Name()));
}

// Compiles the network for batches of b on the engine's cores and loads it.
void LoadNetwork(const NetworkCompiler& network, int b, engine::ChipEngine& engine,
                 LoadedNetwork* loaded) {
  const std::vector<BatchShare> shares = BatchShares(b, engine.Config().cores);
  const int sharers = static_cast<int>(shares.size());  // the cores sharing the host link
  LoadedNetwork l;
  std::vector<engine::ExecJob> execs;
  std::vector<uint64_t> input_bytes;
  for (const BatchShare& s : shares) {
    compiler::CompiledNetwork c = network.Compile(s.count, sharers);
    execs.push_back(std::move(c.job.exec));
    l.jobs.push_back(std::move(c.job));  // keeps its op_of and units
    l.bounds.push_back(std::move(c.bounds));
    input_bytes.push_back(c.input_bytes);
    l.share.push_back(s.count);
  }
  l.windows = compiler::CombineCoreJobs(std::move(execs));
  LoadJobs(network, input_bytes, engine, &l);
  l.batch = b;
  *loaded = std::move(l);
}

// Compiles one image split over the cores (model parallel, docs/compiler.md) and loads it:
// the cores' programs share the one host and weight image; core 0 sends the model's output.
void LoadSplit(const NetworkCompiler& network, engine::ChipEngine& engine, LoadedNetwork* loaded) {
  LoadedNetwork l;
  std::vector<compiler::CompiledNetwork> cores = network.CompileCores();
  engine::ExecJob& job = l.windows.job;
  job = std::move(cores[0].job.exec);
  for (size_t c = 1; c < cores.size(); ++c)
    job.other_programs.push_back(std::move(cores[c].job.exec.program));
  for (compiler::CompiledNetwork& c : cores) {
    l.jobs.push_back(std::move(c.job));
    l.bounds.push_back(std::move(c.bounds));
  }
  l.windows.host_base = {0};
  l.windows.out_addr = {job.host_out_addr};
  l.windows.out_bytes = {job.host_out_bytes};
  LoadJobs(network, {cores[0].input_bytes}, engine, &l);
  l.batch = 1;
  l.split = true;
  *loaded = std::move(l);
}

// One image on every core with the operations of SplitOfOne() split by output channels,
// through the loaded split (loaded first where it is not): its input written, the cores'
// programs run at once. Returns the model's output (none in timing-only runs).
template <class T>
std::vector<T> RunSplit(const NetworkCompiler& network, const std::vector<T>& act,
                        engine::ChipEngine& engine,
                        std::vector<engine::CycleAttribution>& attributions, LoadedNetwork* loaded,
                        TpuRunResult* r) {
  const int cores = engine.Config().cores;
  if (!loaded->split) LoadSplit(network, engine, loaded);
  engine.Write(compiler::InputsRegion(0, 1), network.EncodeInputs(act, 1));
  RunAttributed(nullptr, loaded->jobs, engine, attributions, r);
  for (int c = 0; c < cores; ++c)
    report::AddSplitShare(network, c, cores, loaded->bounds[static_cast<size_t>(c)], &r->layers);
  report::CollectRows(loaded->jobs, engine.Config(), attributions, &r->layers);
  if (!engine.ComputesValues()) return {};
  return network.Decode<T>(engine.Read("outputs"), 1);
}

// A batch of whole-network programs through the loaded network (loaded first where the
// batch size changes): core c runs images [b c / C, b (c + 1) / C) of the batch, their
// inputs written to its region. Each core's counters are attributed to the operations
// (rows of `r`, summed over cores: cycles are core-cycles) cycle by cycle and their bounds
// added; r->chip_cycles gets the run's cycles. Returns the model's outputs of the batch, in
// order (T: int8_t, or uint16_t on a bf16 chip); none in timing-only runs. One image whose
// operations split over the cores runs as RunSplit.
template <class T>
std::vector<T> RunWhole(const NetworkCompiler& network, const std::vector<T>& act, int b,
                        engine::ChipEngine& engine,
                        std::vector<engine::CycleAttribution>& attributions, LoadedNetwork* loaded,
                        TpuRunResult* r) {
  const int cores = engine.Config().cores;
  if (b == 1 && r->batch == 1 && network.SplitOfOne().Any())
    return RunSplit(network, act, engine, attributions, loaded, r);
  if (loaded->batch != b || loaded->split) LoadNetwork(network, b, engine, loaded);
  const std::vector<int>& share = loaded->share;
  const size_t in_size = act.size() / static_cast<size_t>(b);
  for (size_t c = 0, first = 0; c < share.size(); first += static_cast<size_t>(share[c++])) {
    const std::vector<T> part(
        act.begin() + static_cast<std::ptrdiff_t>(first * in_size),
        act.begin() + static_cast<std::ptrdiff_t>((first + share[c]) * in_size));
    engine.Write(compiler::InputsRegion(c, share.size()), network.EncodeInputs(part, share[c]));
  }
  RunAttributed(nullptr, loaded->jobs, engine, attributions, r);
  for (size_t c = 0; c < share.size(); ++c)
    report::AddShare(network, share[c], static_cast<int>(c), cores, loaded->bounds[c], &r->layers);
  report::CollectRows(loaded->jobs, engine.Config(), attributions, &r->layers);
  std::vector<T> y;
  if (!engine.ComputesValues()) return y;
  const std::vector<uint8_t> out = engine.Read("outputs");
  for (size_t c = 0; c < share.size(); ++c) {
    const std::vector<T> part = network.Decode<T>(loaded->windows.HostOut(out, c), share[c]);
    y.insert(y.end(), part.begin(), part.end());
  }
  return y;
}

// A batch on a bf16 chip (docs/bf16.md): the fp32 inputs rounded to bfloat16, the outputs
// compared with nn::Bf16Net's bit for bit; the first NaN or infinity the reference meets is
// named (image, layer, value).
void RunBf16Batch(const nn::Model& model, const NetworkCompiler& network,
                  const nn::InputSet& inputs, int64_t first, int b, engine::ChipEngine& engine,
                  RunState& s, TpuRunResult* r) {
  const nn::RowMatrix<float> x = nn::Fp32Inputs(inputs, first, b);
  std::vector<uint16_t> act(static_cast<size_t>(x.size()));
  for (size_t i = 0; i < act.size(); ++i)
    act[i] = arith::Bf16OfFp32(arith::BitsOfFloat(x.data()[i]));
  const std::vector<uint16_t> y = RunWhole(network, act, b, engine, s.attributions, &s.loaded, r);
  if (!engine.ComputesValues()) return;
  const nn::Bf16Net& ref = *s.bf16_reference;
  const auto out_size = static_cast<size_t>(model.layers.back().out.Size());
  for (int i = 0; i < b; ++i) {
    const std::vector<std::vector<uint16_t>> want = ref.Forward(x.row(i).data());
    std::vector<uint16_t> got(y.begin() + static_cast<std::ptrdiff_t>(i * out_size),
                              y.begin() + static_cast<std::ptrdiff_t>((i + 1) * out_size));
    if (got != want.back()) ++r->mismatches;
    if (r->labelled)
      r->correct += nn::ArgMaxBf16(got) == inputs.labels[static_cast<size_t>(first + i)];
    // A finite input beyond the largest bfloat16 rounds to an infinity: the input itself.
    const nn::NonFinite in = nn::FirstNonFinite(
        {std::vector<uint16_t>(act.begin() + static_cast<std::ptrdiff_t>(i * x.cols()),
                               act.begin() + static_cast<std::ptrdiff_t>((i + 1) * x.cols()))});
    const nn::NonFinite nf = nn::FirstNonFinite(want);
    if (in.layer >= 0 && r->non_finite.empty()) {
      r->non_finite = fmt::format(
          "input {}: first in the input, value {} (beyond bfloat16's range)", first + i, in.index);
    } else if (nf.layer >= 0 && r->non_finite.empty()) {
      r->non_finite =
          fmt::format("input {}: first in layer '{}', value {} of its output", first + i,
                      model.layers[static_cast<size_t>(nf.layer)].name, nf.index);
    }
    r->non_finite_outputs += nn::FirstNonFinite({got}).layer >= 0;
    r->logits_bf16.push_back(std::move(got));
  }
}

// A bf16 chip runs the fp32 weights, an int8 one the quantized ones.
void CheckWeightsFor(const nn::Model& model, bool bf16) {
  if (bf16) {
    for (const nn::Layer& l : model.layers) {
      if (l.HasWeights() && l.weights.data.empty()) {
        throw UsageError("model '" + model.name + "' has no fp32 weights in layer '" + l.name +
                         "'; a bf16 chip runs a model's fp32 weights (docs/bf16.md)");
      }
    }
  } else {
    nn::RequireQuantized(model, " (a bf16 chip, as tpu-v3, runs the fp32 model itself)");
  }
}

// A model that is not one program runs as layer jobs: int8 chains only.
void CheckLayerJobs(const nn::Model& model, const NetworkCompiler& network, bool bf16,
                    bool layer_jobs) {
  if (bf16) {
    throw UsageError(
        "model '" + model.name + "' does not run on this bf16 chip: " +
        (layer_jobs ? Field("host_im2col") + " runs on int8 chips" : network.WhyNot()));
  }
  if (model.IsGraph()) {
    throw UsageError(layer_jobs ? Field("host_im2col") + " runs chains of layers; model '" +
                                      model.name + "' is a graph (it has residual adds or concats)"
                                : "model '" + model.name +
                                      "' does not run on this chip: " + network.WhyNot());
  }
  const auto& ls = model.layers;
  if (!layer_jobs && !std::all_of(ls.begin(), ls.end(), compiler::LayerJobsRun))
    throw UsageError("model '" + model.name + "' does not run on this chip: " + network.WhyNot());
}

// The run's plan line: whole network or layer jobs, and how the cores share the work.
std::string RunPlanText(NetworkCompiler& network, const config::TpuConfig& config, bool whole,
                        bool layer_jobs, int share, bool batch_of_one, bool split) {
  std::string plan = whole ? "whole network, one program per batch: " + network.PlanText(share)
                     : layer_jobs ? "layer jobs (im2col on the host)"
                                  : "layer jobs (" + PlainText(network.WhyNot()) + ")";
  if (split) {
    plan += fmt::format(
        "; one image on {} cores: the operations marked '{} {} cores' split by output "
        "channels, each core its share, their maps exchanged through host memory; the others "
        "whole on every core {}",
        config.cores, kOutputChannelsSplit, config.cores, kModelParallel);
  } else if (config.cores > 1 && whole && batch_of_one) {
    plan += fmt::format(
        "; one image: on core 0 of {} (no operation gains from sharing its output channels "
        "out over the cores: docs/compiler.md, \"Model parallel\")",
        config.cores);
  } else if (config.cores > 1) {
    plan += whole ? fmt::format(
                        "; on {} cores, each a share of every batch (data parallel; the plan is "
                        "that of a share, {} images)",
                        config.cores, share)
                  : fmt::format("; on core 0 of {}", config.cores);
  }
  return plan;
}

// A batch's int8 outputs against the CPU int8 reference's, image by image, and their classes
// against the labels where the inputs have them.
void CheckInt8Outputs(const std::vector<int8_t>& act, const nn::MatrixI8& want,
                      const nn::InputSet& inputs, int64_t first, TpuRunResult* r) {
  const int64_t out_size = want.cols();
  for (int64_t i = 0; i < want.rows(); ++i) {
    std::vector<int8_t> y(act.begin() + i * out_size, act.begin() + (i + 1) * out_size);
    if (!std::equal(y.begin(), y.end(), want.row(i).data())) ++r->mismatches;
    if (r->labelled) {
      const auto best = std::max_element(y.begin(), y.end()) - y.begin();
      r->correct += best == inputs.labels[static_cast<size_t>(first + i)];
    }
    r->logits.push_back(std::move(y));
  }
}

// The whole network's compiler for the run's first batch; where `fit` asks, *batch lowered
// to the most that fit the chip's memories (the plans of other batches reuse the lowered
// graph).
NetworkCompiler PlanNetwork(const nn::Model& model, const config::TpuConfig& config, int64_t images,
                            bool fit, compiler::WeightPath weights, int* batch) {
  const auto planned = [&] {
    return static_cast<int>(std::min<int64_t>(*batch, std::max<int64_t>(images, 1)));
  };
  NetworkCompiler network(model, config, planned(), false, weights);
  if (fit) {
    const int most = network.LargestBatch(*batch);
    if (most > 0 && most < *batch) {
      *batch = most;
      if (planned() != network.Batch())
        network = NetworkCompiler(model, config, planned(), false, weights);
    }
  }
  return network;
}

// A batch on an int8 chip: the whole network's program (or the layer jobs), its outputs
// checked against the CPU int8 reference, which computes on another thread while the chip
// runs (Forward is const).
void RunInt8Batch(const nn::Model& model, const NetworkCompiler& network,
                  const nn::InputSet& inputs, int64_t first, int b, bool whole,
                  engine::ChipEngine& engine, RunState& s, TpuRunResult* r) {
  const bool values = engine.ComputesValues();
  const nn::MatrixI8 in = nn::Int8Inputs(model, inputs, first, b);
  std::future<std::vector<nn::MatrixI8>> want;
  if (values) {
    want =
        std::async(std::launch::async, [&net = *s.int8_reference, &in] { return net.Forward(in); });
  }
  std::vector<int8_t> act(in.data(), in.data() + in.size());
  if (whole) {
    act = RunWhole(network, act, b, engine, s.attributions, &s.loaded, r);
    if (!values) act.assign(static_cast<size_t>(b * model.layers.back().out.Size()), 0);
  } else {
    act = RunLayerJobs(s.steps, s.compilers, engine, std::move(act), b, r);
  }
  if (values) CheckInt8Outputs(act, want.get().back(), inputs, first, r);
}

// The run's rows (a row per operation of the whole network, split over the cores where
// `split` says, or per layer job), the layer jobs' compilers, the attributions and the
// reference (none where the engine computes no values: nothing is checked).
void PrepareRun(const nn::Model& model, const NetworkCompiler& network,
                const config::TpuConfig& config, bool whole, bool split, int share, RunState* s,
                TpuRunResult* r) {
  for (int c = 0; c < config.cores; ++c) {
    s->attributions.emplace_back(static_cast<int>(network.Graph().ops.size()), config.array_dim,
                                 hw::ElementBytes(config.dtype), config.vector_sublanes);
  }
  if (whole) {
    r->layers = report::OperationRows(network, config.cores, split);
    r->spilled = network.Spilled(share);
    r->ub_rows = network.UbRows();
  } else {
    s->steps = PlanSteps(model, config);
    for (const LayerStep& step : s->steps) {
      s->compilers.emplace_back(model, step, config);
      r->layers.emplace_back().name = step.Name(model);
    }
  }
  r->dtype = hw::Name(config.dtype);
  if (!r->checked) return;  // a timing-only run checks nothing: no reference
  if (config.dtype == hw::Dtype::kBf16) {
    s->bf16_reference.emplace(model, config.array_dim);
  } else {
    s->int8_reference.emplace(model);
  }
}

}  // namespace

void CheckBatch(int batch) {
  if (batch < 1) throw UsageError(Field("batch") + " must be at least 1");
}

engine::ExecResult RunAttributed(const engine::ExecJob* job, const std::vector<LayerJob>& jobs,
                                 engine::ChipEngine& engine,
                                 std::vector<engine::CycleAttribution>& attributions,
                                 TpuRunResult* r) {
  for (size_t c = 0; c < jobs.size(); ++c) attributions[c].SetRowOf(jobs[c].op_of);
  const engine::ScopedCoreObservers observe(engine, attributions, jobs.size());
  engine::ExecResult e = job ? engine.Run(*job) : engine.Run();
  if (!e.ok) throw RuntimeError("the network failed on the chip: " + e.message);
  r->chip_cycles += e.cycles;
  for (size_t c = 0; c < jobs.size(); ++c) {
    attributions[c].Check(e.CountersOf(static_cast<int>(c)));
    if (engine::Timeline* t = engine.GetTimeline(static_cast<int>(c))) {  // its layers
      for (const auto& s : attributions[c].Spans())
        t->LayerSlice(r->layers[static_cast<size_t>(s.row)].name, s.start, s.end);
    }
  }
  return e;
}

std::vector<BatchShare> BatchShares(int b, int cores) {
  std::vector<BatchShare> shares;
  for (int c = 0; c < cores; ++c) {
    const int first = b * c / cores, count = b * (c + 1) / cores - first;
    if (count > 0) shares.push_back({first, count});
  }
  return shares;
}

TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const nn::InputSet& inputs, int64_t images, int batch,
                           const std::function<void(double)>& progress, const CompileChoices& how) {
  if (compiler::IsTransformer(model)) {
    if (how.layer_jobs)
      throw UsageError(Field("host_im2col") + " runs int8 chains; model '" + model.name +
                       "' is a transformer");
    return RunTransformerOnTpu(model, engine, inputs, images, batch, progress);
  }
  const bool layer_jobs = how.layer_jobs;
  if (layer_jobs && how.weights != compiler::WeightPath::kFifo)
    throw UsageError(
        "weights through vector memory are a whole-network program's; layer jobs "
        "(host im2col) read them into the FIFO");
  const config::TpuConfig& config = engine.Config();
  CheckBatch(batch);
  const bool bf16 = config.dtype == hw::Dtype::kBf16;
  CheckWeightsFor(model, bf16);
  images = std::min(images, inputs.count);
  const auto start = std::chrono::steady_clock::now();
  NetworkCompiler network =
      PlanNetwork(model, config, images, how.fit_batch && !layer_jobs, how.weights, &batch);
  TpuRunResult r;
  r.images = images;
  r.batch = batch;
  r.checked = engine.ComputesValues();
  r.labelled = inputs.HasLabels();
  r.output_scale = nn::OutputScale(model);
  const bool whole = !layer_jobs && network.Fits();
  if (!whole) CheckLayerJobs(model, network, bf16, layer_jobs);
  // On several cores each runs the program of its share of a batch: the plan shown is the
  // largest share's.
  const int share =
      BatchShares(static_cast<int>(std::clamp<int64_t>(images, 1, batch)), config.cores)
          .back()
          .count;
  // A batch of one whose operations split over the cores (model parallel).
  const bool split = whole && batch == 1 && network.SplitOfOne().Any();
  r.plan = RunPlanText(network, config, whole, layer_jobs, share, batch == 1, split);
  RunState state;
  PrepareRun(model, network, config, whole, split, share, &state, &r);
  for (int64_t first = 0; first < images; first += batch) {
    const int b = static_cast<int>(std::min<int64_t>(batch, images - first));
    if (bf16) {
      RunBf16Batch(model, network, inputs, first, b, engine, state, &r);
    } else {
      RunInt8Batch(model, network, inputs, first, b, whole, engine, state, &r);
    }
    if (progress) progress(static_cast<double>(first + b) / static_cast<double>(images));
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

int LargestBatchThatFits(const nn::Model& model, const config::TpuConfig& config, int most,
                         compiler::WeightPath weights) {
  const int b = NetworkCompiler(model, config, 1, false, weights).LargestBatch(most);
  return b > 0 ? b : most;
}

TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const uint8_t* pixels, const uint8_t* labels, int64_t images, int batch,
                           const std::function<void(double)>& progress, bool layer_jobs) {
  nn::InputSet in;
  in.shape = model.input;
  in.count = images;
  in.pixels.assign(pixels, pixels + images * model.input.Size());
  if (labels) in.labels.assign(labels, labels + images);
  CompileChoices how;
  how.layer_jobs = layer_jobs;
  return RunModelOnTpu(model, engine, in, images, batch, progress, how);
}

}  // namespace tpu::run
