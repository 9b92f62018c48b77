// A transformer on the chip, batch by batch (tpu_runner.h, RunTransformerOnTpu): one
// compiler::TransformerProgram per batch size, its outputs checked against nn::Bf16Net's bit
// for bit and its cycles attributed to its operations.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/compiler/core_split.h"
#include "host/compiler/transformer_program.h"
#include "host/engine/cycle_attribution.h"
#include "host/engine/timeline.h"
#include "host/nn/bf16_net.h"
#include "host/report/program_bound.h"
#include "host/run/tpu_runner.h"
#include "host/run/transformer_rows.h"

namespace tpu::run {
namespace {

// The layer a view chain ends in where layer i is read through views (reshapes,
// transposes, slices), or i itself: what i computes on.
int ThroughViews(const nn::Model& m, int i) {
  while (i >= 0) {
    const nn::Layer& l = m.layers[static_cast<size_t>(i)];
    if (l.type != nn::LayerType::kReshape && l.type != nn::LayerType::kTranspose &&
        l.type != nn::LayerType::kSlice)
      break;
    i = l.inputs[0];
  }
  return i;
}

}  // namespace

std::vector<compiler::Bound> OperationBounds(const compiler::LayerJob& job, size_t ops,
                                             const config::TpuConfig& config) {
  std::vector<isa::Program> parts(ops);
  const auto& words = job.exec.program.words;
  for (size_t w = 0; w < words.size(); ++w) {
    size_t at = w;
    while (at < words.size() && job.op_of[at] < 0) ++at;
    const int32_t op = at < words.size() ? job.op_of[at] : job.op_of.back();
    if (op >= 0) parts[static_cast<size_t>(op)].words.push_back(words[w]);
  }
  std::vector<compiler::Bound> bounds;
  for (const isa::Program& part : parts) {
    const report::ProgramBound pb = report::BoundPrograms({part}, config);
    const auto term = [&](const char* name) {
      for (const report::BoundTerm& t : pb.terms)
        if (t.resource == name) return t.cycles;
      return 0.0;
    };
    compiler::Bound b;
    b.array = term("matrix unit");
    b.weights = std::max(term("weight memory"), term("weight DMA"));
    b.host = std::max(term("host link"), term("host DMA"));
    b.activation = term("activation unit");
    b.vector_unit = term("vector unit");
    bounds.push_back(b);
  }
  return bounds;
}

std::string TransformerRole(const nn::Model& m, const std::vector<std::vector<int>>& readers,
                            int i) {
  using T = nn::LayerType;
  const nn::Layer& l = m.layers[static_cast<size_t>(i)];
  const auto type_of = [&](int k) {
    return k < 0 ? T::kReshape : m.layers[static_cast<size_t>(k)].type;
  };
  const std::vector<int>& out = readers[static_cast<size_t>(i)];
  const auto all_read_by = [&](T t) {
    return !out.empty() &&
           std::all_of(out.begin(), out.end(), [&](int r) { return type_of(r) == t; });
  };
  const int in = l.inputs.empty() ? -1 : ThroughViews(m, l.inputs[0]);
  switch (l.type) {
    case T::kMatMul: {
      const bool scores = std::any_of(out.begin(), out.end(), [&](int r) {
        return type_of(r) == T::kSoftmax ||
               (type_of(r) == T::kAddConstant && all_read_by(T::kAddConstant) &&
                !readers[static_cast<size_t>(r)].empty() &&
                type_of(readers[static_cast<size_t>(r)][0]) == T::kSoftmax);
      });
      return scores ? "attention scores" : type_of(in) == T::kSoftmax ? "context" : "";
    }
    case T::kConv2d:
      if (in == nn::kModelInput && l.kernel_h > 1) return "patch embedding";
      if (all_read_by(T::kSlice)) return "QKV projection";
      if (type_of(in) == T::kMatMul) return "output projection";
      if (all_read_by(T::kGelu) || l.activation != nn::Activation::kNone) return "feed-forward in";
      if (type_of(in) == T::kGelu ||
          (in >= 0 && m.layers[static_cast<size_t>(in)].activation != nn::Activation::kNone &&
           type_of(in) == T::kConv2d))
        return "feed-forward out";
      return i + 1 == static_cast<int>(m.layers.size()) ? "head" : "";
    case T::kAddConstant:
      return all_read_by(T::kSoftmax) ? "mask" : "position embedding";
    case T::kPrepend:
      return "class token";
    case T::kEmbedding:
      return "token embedding";
    case T::kAdd:
      return "residual";
    default:
      return "";
  }
}

std::vector<LayerStats> OperationRows(const nn::Model& model, const std::vector<int>& ops) {
  const std::vector<std::vector<int>> readers = model.Consumers();
  std::vector<LayerStats> rows;
  for (const int i : ops) {
    const std::string role = TransformerRole(model, readers, i);
    rows.emplace_back().name =
        model.layers[static_cast<size_t>(i)].name + (role.empty() ? "" : " (" + role + ")");
  }
  return rows;
}

namespace {

// A share's program: its images, and how many cores run shares at once.
using Programs = std::function<const compiler::TransformerProgram&(int, int)>;

// What the run's plan line says.
std::string Plan(const compiler::TransformerProgram& whole, int batch, int cores) {
  return fmt::format(
      "transformer program, one per batch of {}{}: {} operations, every tensor in the unified "
      "buffer ({} rows){}",
      batch,
      cores > 1
          ? fmt::format(" in shares of up to {} on {} cores", (batch + cores - 1) / cores, cores)
          : " on core 0",
      whole.Operations().size(), whole.UbRows(),
      whole.Group() < whole.Batch()
          ? fmt::format(" for groups of {} images, one after another", whole.Group())
          : "");
}

// A share of `images` on core `core` (-1: a chip of one core): each operation's MACs, its
// job counted.
void AddMacs(const nn::Model& model, const std::vector<int>& ops, int images, int core,
             TpuRunResult* r) {
  for (size_t k = 0; k < r->layers.size(); ++k) {
    const int64_t macs = images * model.layers[static_cast<size_t>(ops[k])].Macs();
    r->layers[k].macs += macs;
    ++r->layers[k].jobs;
    if (core >= 0) r->layers[k].cores[static_cast<size_t>(core)].macs += macs;
  }
}

// The reference's outputs of the batch's inputs `x` (and where each one's first NaN or
// infinity is), image by image on the machine's threads while the chip runs.
struct Wanted {
  std::vector<std::vector<uint16_t>> out;
  std::vector<nn::NonFinite> nf;
  std::vector<std::future<void>> work;
  Wanted(const nn::Bf16Net& ref, const nn::RowMatrix<float>& x, bool values)
      : out(static_cast<size_t>(x.rows())), nf(static_cast<size_t>(x.rows())) {
    const int b = static_cast<int>(x.rows());
    const int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, b);
    for (int w = 0; w < workers && values; ++w)
      work.push_back(std::async(std::launch::async, [&ref, &x, this, w, workers, b] {
        for (int i = w; i < b; i += workers) {
          std::vector<std::vector<uint16_t>> all = ref.Forward(x.row(i).data());
          nf[static_cast<size_t>(i)] = nn::FirstNonFinite(all);
          out[static_cast<size_t>(i)] = std::move(all.back());
        }
      }));
  }
  Wanted(const Wanted&) = delete;  // its threads write into it
  Wanted& operator=(const Wanted&) = delete;
  // (destroyed, it waits for them: `work` goes first, and std::async's futures block)
  void Wait() {
    for (auto& f : work) f.get();
  }
};

// Input i of the batch: compared with the reference, its class counted.
void Compare(const nn::Model& model, const nn::InputSet& inputs, int64_t first, int i,
             std::vector<uint16_t> got, const Wanted& want, TpuRunResult* r) {
  if (got != want.out[static_cast<size_t>(i)]) ++r->mismatches;
  if (r->labelled)
    r->correct += nn::ArgMaxBf16(got) == inputs.labels[static_cast<size_t>(first + i)];
  const nn::NonFinite& at = want.nf[static_cast<size_t>(i)];
  if (at.layer >= 0 && r->non_finite.empty())
    r->non_finite = fmt::format("input {}: first in layer '{}', value {} of its output", first + i,
                                model.layers[static_cast<size_t>(at.layer)].name, at.index);
  r->non_finite_outputs += nn::FirstNonFinite({got}).layer >= 0;
  r->logits_bf16.push_back(std::move(got));
}

// One batch of b inputs from `first`, core c running share c of it (BatchShares) as its own
// program (docs/transformers.md, "Both cores"): run, attributed core by core, compared with
// the reference.
void RunBatch(const nn::Model& model, const Programs& program, const nn::InputSet& inputs,
              int64_t first, int b, engine::ChipEngine& engine, const nn::Bf16Net& ref,
              std::vector<engine::CycleAttribution>& attributions, TpuRunResult* r) {
  const config::TpuConfig& config = engine.Config();
  const nn::RowMatrix<float> x = nn::Fp32Inputs(inputs, first, b);
  const std::vector<BatchShare> shares = BatchShares(b, config.cores);
  std::vector<LayerJob> jobs;
  std::vector<engine::ExecJob> execs;
  for (size_t c = 0; c < shares.size(); ++c) {
    const BatchShare& s = shares[c];
    std::vector<uint16_t> act(static_cast<size_t>(s.count * x.cols()));
    for (size_t k = 0; k < act.size(); ++k)
      act[k] = arith::Bf16OfFp32(arith::BitsOfFloat(x.data()[s.first * x.cols() + k]));
    const int sharing = static_cast<int>(shares.size());
    jobs.push_back(program(s.count, sharing).Build(act));
    AddMacs(model, program(s.count, sharing).Operations(), s.count,
            config.cores > 1 ? static_cast<int>(c) : -1, r);
    const std::vector<compiler::Bound> bounds =
        OperationBounds(jobs.back(), r->layers.size(), config);
    for (size_t k = 0; k < bounds.size(); ++k) r->layers[k].bound += bounds[k];
    execs.push_back(jobs.back().exec);
  }
  Wanted want(ref, x, engine.ComputesValues());
  const compiler::CoreJobs combined = compiler::CombineCoreJobs(std::move(execs));
  const engine::ExecResult e = RunAttributed(&combined.job, jobs, engine, attributions, r);
  want.Wait();
  if (!engine.ComputesValues()) return;
  for (size_t c = 0; c < shares.size(); ++c) {
    const std::vector<uint16_t> y = program(shares[c].count, static_cast<int>(shares.size()))
                                        .Decode(combined.HostOut(e.host_out, c));
    const auto size = static_cast<std::ptrdiff_t>(model.layers.back().out.Size());
    for (int i = 0; i < shares[c].count; ++i)
      Compare(model, inputs, first, shares[c].first + i,
              std::vector<uint16_t>(y.begin() + i * size, y.begin() + (i + 1) * size), want, r);
  }
}

}  // namespace

TpuRunResult RunTransformerOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                                 const nn::InputSet& inputs, int64_t images, int batch,
                                 const std::function<void(double)>& progress) {
  const config::TpuConfig& config = engine.Config();
  CheckBatch(batch);
  const auto start = std::chrono::steady_clock::now();
  images = std::min(images, inputs.count);
  batch = static_cast<int>(std::clamp<int64_t>(batch, 1, std::max<int64_t>(images, 1)));
  // A program per share size, and per how many cores run shares at once (they share the
  // host link: compiler::ScheduleUnits).
  std::map<std::pair<int, int>, compiler::TransformerProgram> programs;
  const auto program = [&](int b, int sharing) -> const compiler::TransformerProgram& {
    auto it = programs.find({b, sharing});
    if (it == programs.end())
      it = programs
               .emplace(std::pair{b, sharing},
                        compiler::TransformerProgram(model, config, b, sharing))
               .first;
    return it->second;
  };
  // The largest share's program (core 0's), for the plan and the rows.
  const std::vector<BatchShare> first_shares = BatchShares(batch, config.cores);
  const compiler::TransformerProgram& whole =
      program(first_shares[0].count, static_cast<int>(first_shares.size()));
  TpuRunResult r;
  r.images = images;
  r.batch = batch;
  r.dtype = "bf16";
  r.checked = engine.ComputesValues();
  r.labelled = inputs.HasLabels();
  r.output_scale = 1.0f;
  r.ub_rows = whole.UbRows();
  const int cores = static_cast<int>(first_shares.size());
  r.plan = Plan(whole, batch, cores);
  r.layers = OperationRows(model, whole.Operations());
  std::vector<engine::CycleAttribution> rows;
  for (int c = 0; c < config.cores; ++c)
    rows.emplace_back(static_cast<int>(r.layers.size()), config.array_dim, 2,
                      config.vector_sublanes);
  for (LayerStats& l : r.layers) l.cores.resize(config.cores > 1 ? config.cores : 0);
  const nn::Bf16Net ref(model, config.array_dim);
  for (int64_t first = 0; first < images; first += batch) {
    const int b = static_cast<int>(std::min<int64_t>(batch, images - first));
    RunBatch(model, program, inputs, first, b, engine, ref, rows, &r);
    if (progress) progress(static_cast<double>(first + b) / static_cast<double>(images));
  }
  report::CollectRows({}, config, rows, &r.layers);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tpu::run
