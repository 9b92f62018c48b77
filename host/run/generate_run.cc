// See generate_run.h.
#include "host/run/generate_run.h"

#include <fmt/format.h>

#include <chrono>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/compiler/transformer_program.h"
#include "host/engine/cycle_attribution.h"
#include "host/engine/timeline.h"
#include "host/nn/bf16_net.h"
#include "host/nn/generate.h"
#include "host/run/transformer_rows.h"

namespace tpu::run {
namespace {

// One phase's runs (the prefill, or the decode steps): its rows' counters and bounds.
class Phase {
 public:
  Phase(const nn::Model& m, const compiler::TransformerProgram& first,
        const config::TpuConfig& config, const std::string& plan, TpuRunResult* r)
      : m_(m),
        ops_(first.Operations()),
        r_(r),
        rows_(static_cast<int>(ops_.size()), config.array_dim, 2, config.vector_sublanes) {
    r_->dtype = "bf16";
    r_->batch = 1;
    r_->output_scale = 1.0f;
    r_->labelled = false;
    r_->ub_rows = first.UbRows();
    r_->plan = plan;
    r_->layers = OperationRows(m, ops_);
  }

  // Positions [first, end) of `seq` (the sequence, padded) through `prog`: each one's
  // logits into logits[t] (a run with values).
  void Run(const compiler::TransformerProgram& prog, const std::vector<int64_t>& seq, int64_t first,
           int64_t end, engine::ChipEngine& engine, std::vector<std::vector<uint16_t>>* logits) {
    std::vector<uint16_t> act;
    for (const int64_t id : seq)
      act.push_back(arith::Bf16OfFp32(arith::BitsOfFloat(static_cast<float>(id))));
    const compiler::LayerJob job = prog.Build(act);
    const std::vector<compiler::Bound> bounds = OperationBounds(job, ops_.size(), engine.Config());
    const auto t = static_cast<int64_t>(seq.size());
    for (size_t k = 0; k < ops_.size(); ++k) {
      LayerStats& row = r_->layers[k];
      row.bound += bounds[k];
      // (every operation's work is its rows': the positions' share of the pass's)
      row.macs += m_.layers[static_cast<size_t>(ops_[k])].Macs() * (end - first) / t;
      ++row.jobs;
    }
    rows_.SetRowOf(job.op_of);
    engine.SetObserver(&rows_, 0);
    const engine::ExecResult e = engine.Run(job.exec);
    engine.SetObserver(nullptr, 0);
    if (!e.ok) throw RuntimeError("the decoder failed on the chip: " + e.message);
    r_->chip_cycles += e.cycles;
    ++r_->images;
    rows_.Check(e.CountersOf(0));
    for (size_t k = 0; k < ops_.size(); ++k) r_->layers[k].counters = rows_.Rows()[k];
    if (engine::Timeline* tl = engine.GetTimeline(0))
      for (const auto& s : rows_.Spans())
        tl->LayerSlice(r_->layers[static_cast<size_t>(s.row)].name, s.start, s.end);
    if (!engine.ComputesValues()) return;
    const std::vector<uint16_t> y = prog.Decode(e.host_out);
    const auto v = y.size() / seq.size();
    for (int64_t p = first; p < end; ++p)
      (*logits)[static_cast<size_t>(p)].assign(
          y.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(p) * v),
          y.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(p + 1) * v));
  }

 private:
  const nn::Model& m_;
  std::vector<int> ops_;
  TpuRunResult* r_;
  engine::CycleAttribution rows_;
};

// Each computed position's logits against nn::Bf16Net's over the generated sequence.
void Check(const nn::Model& m, const config::TpuConfig& config, const std::vector<int64_t>& seq,
           const std::vector<std::vector<uint16_t>>& logits, ChipGeneration* g) {
  std::vector<float> x;
  for (const int64_t id : seq) x.push_back(static_cast<float>(id));
  const nn::Bf16Net ref(m, config.array_dim);
  const std::vector<uint16_t> want = ref.Forward(x.data()).back();
  const auto v = static_cast<size_t>(g->vocabulary);
  for (size_t p = 0; p < logits.size(); ++p) {
    if (logits[p].empty()) continue;
    const std::vector<uint16_t> w(want.begin() + static_cast<std::ptrdiff_t>(p * v),
                                  want.begin() + static_cast<std::ptrdiff_t>((p + 1) * v));
    if (w == logits[p]) continue;
    ++(static_cast<int64_t>(p) < g->prompt ? g->prefill : g->decode).mismatches;
    if (g->mismatches++ == 0)
      g->first_mismatch =
          fmt::format("position {}'s logits differ from the CPU bf16 reference's", p);
  }
}

int64_t Tiles(int64_t rows, int64_t cols, int n) {
  return ((rows + n - 1) / n) * ((cols + n - 1) / n);
}

}  // namespace

DecodeBound WeightsAndCacheBound(const nn::Model& m, const config::TpuConfig& config,
                                 int64_t context, int64_t positions) {
  const int n = config.array_dim;
  const double units = std::max(1, config.mxus_per_core);
  DecodeBound b;
  int64_t tiles = 0;
  for (const nn::Layer& l : m.layers) {
    if (l.type == nn::LayerType::kConv2d)
      tiles += Tiles(int64_t{l.kernel_h} * l.kernel_w * l.in.c, l.out.c, n);
    else if (l.type == nn::LayerType::kEmbedding)
      tiles += Tiles(l.start, l.out.c, n);
    if (l.type != nn::LayerType::kMatMul) continue;
    // Scores: each head's keys (positions x K) transposed into the array; context: its
    // values (positions x columns) as they lie.
    const bool keys = l.out.c == context;
    const int64_t t = l.in.h * Tiles(positions, keys ? l.in.c : l.out.c, n);
    b.cache += static_cast<double>(t) * (keys ? 2.0 * n + 1 : n + 1.0) / units;
  }
  b.weights = static_cast<double>(tiles * n) * config.CoreWeightRowCycles();
  return b;
}

ChipGeneration GenerateOnTpu(const nn::Model& m, engine::ChipEngine& engine,
                             const std::vector<int64_t>& prompt, int64_t count,
                             const std::function<void(int64_t, int64_t)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const config::TpuConfig& config = engine.Config();
  ChipGeneration g;
  std::tie(g.context, g.vocabulary) = nn::CheckGeneration(m, prompt, count);
  nn::CheckCausal(m, prompt);  // (a step reads the keys and values of earlier positions only)
  const auto p = static_cast<int64_t>(prompt.size());
  g.prompt = p;
  g.checked = engine.ComputesValues();
  const compiler::TransformerProgram prefill(m, config, 1, {0, p}, nullptr);
  Phase pre(m, prefill, config,
            fmt::format("the prompt's {} positions as one program on core 0, each block's keys "
                        "and values left in the unified buffer ({} rows)",
                        p, prefill.UbRows()),
            &g.prefill);
  Phase dec(m, prefill, config,
            "a program a new token, its position's rows only, reading the keys and values of "
            "the positions before it where the programs before it left them",
            &g.decode);
  std::vector<int64_t> seq(static_cast<size_t>(g.context), 0);
  std::copy(prompt.begin(), prompt.end(), seq.begin());
  std::vector<std::vector<uint16_t>> logits(seq.size());
  pre.Run(prefill, seq, 0, p, engine, &logits);
  // The next token: the first largest logit at the last position (0 without values).
  const auto next = [&](int64_t t) {
    const auto& row = logits[static_cast<size_t>(t)];
    const int64_t id = row.empty() ? 0 : nn::ArgMaxBf16(row);
    if (g.checked) g.tokens.push_back(id);
    if (progress) progress(t - p + 2, count);
    return id;
  };
  int64_t id = next(p - 1);
  for (int64_t t = p; t < p + count - 1; ++t) {
    seq[static_cast<size_t>(t)] = id;
    const compiler::TransformerProgram step(m, config, 1, {t, t + 1}, &prefill);
    dec.Run(step, seq, t, t + 1, engine, &logits);
    const DecodeBound b = WeightsAndCacheBound(m, config, g.context, t + 1);
    g.decode_bound.weights += b.weights;
    g.decode_bound.cache += b.cache;
    id = next(t);
  }
  if (g.checked) Check(m, config, seq, logits, &g);
  g.prefill.checked = g.decode.checked = g.checked;
  g.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace tpu::run
