// Recording a GEMM on the teaching models, in both dataflows (see teach.h).
#include <memory>
#include <optional>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/gemm/gemm_runner.h"
#include "host/teach/teach.h"
#include "sim/teach/teach_registry.h"

namespace tpu::teach {
namespace {

// Adds a value that left the array to C's running sum (wrapping, as the accumulators do).
void AddToC(CProgress& p, size_t at, int32_t v, bool final) {
  p.value[at] = static_cast<int32_t>(static_cast<uint32_t>(p.value[at]) + static_cast<uint32_t>(v));
  p.seen[at] = final ? 2 : 1;
}

// Where each streamed row's results go, in streaming order (the plan's nesting: chunks of
// M, then column tiles of N, then folds of K): its row of C, first column, and whether it
// is the last fold (the sum is final).
struct RowTarget {
  int64_t row, col0;
  bool last_fold;
};
std::vector<RowTarget> RowTargets(const gemm::GemmPlan& p) {
  std::vector<RowTarget> t;
  for (int64_t chunk = 0; chunk < p.m_chunks; ++chunk) {
    for (int64_t nt = 0; nt < p.n_tiles; ++nt) {
      for (int64_t kt = 0; kt < p.k_tiles; ++kt) {
        for (int64_t r = 0; r < p.RowsInChunk(chunk); ++r) {
          t.push_back({chunk * p.m_chunk + r, nt * p.array_dim, kt == p.k_tiles - 1});
        }
      }
    }
  }
  return t;
}

bool SameAsReference(const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                     const std::vector<int32_t>& c) {
  return gemm::ReferenceGemm(a, b).data == c;
}

}  // namespace

TeachRun RecordTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim) {
  std::unique_ptr<sim::MxuEngine> engine;
  try {
    engine = sim::MakeTeachEngine(dim);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  TeachRun run;
  run.dim = dim;
  run.a = a;
  run.b = b;
  const int acc_depth = engine->Params().acc_depth;
  run.plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, dim, acc_depth);
  const std::vector<RowTarget> targets = RowTargets(run.plan);
  const auto n = static_cast<uint64_t>(dim);

  std::optional<sim::MxuProbe> probe;  // the model exists only while it runs
  std::vector<bool> fired;             // a_fire, cycle by cycle
  uint64_t rows_in = 0, tiles = 0, results = 0, weight_writes = 0;
  CProgress c{std::vector<int32_t>(static_cast<size_t>(a.rows * b.cols), 0),
              std::vector<uint8_t>(static_cast<size_t>(a.rows * b.cols), 0)};
  sim::RunOptions options;
  options.on_cycle = [&](uint64_t cycle) {
    if (!probe) probe.emplace(dim);
    TeachCycle t;
    t.cycle = cycle;
    t.state = probe->Sample();
    // The weight-stationary PE carries no valid bit (idle cycles move zeros): a row that
    // fired at cycle f is in PE (r, c)'s activation register during cycle f + r + c + 2
    // (lane r is skewed by r cycles, the array's left-edge register takes one, then one
    // PE per cycle).
    t.active.assign(static_cast<size_t>(dim * dim), 0);
    for (int r = 0; r < dim; ++r) {
      for (int col = 0; col < dim; ++col) {
        const int64_t f = static_cast<int64_t>(cycle) - r - col - 2;
        t.active[static_cast<size_t>(r * dim + col)] = f >= 0 && fired[static_cast<size_t>(f)];
      }
    }
    fired.push_back(t.state.a_fire);
    rows_in += t.state.a_fire;
    // The switch bit enters with the first row of a tile.
    tiles += t.state.a_fire && !t.state.switch_in.empty() && t.state.switch_in[0];
    for (bool w : t.state.w_write) weight_writes += w;
    if (t.state.out_valid) {
      if (results >= targets.size()) throw std::runtime_error("more result rows than rows in");
      const RowTarget& to = targets[results];
      for (int col = 0; col < dim && to.col0 + col < b.cols; ++col) {
        AddToC(c, static_cast<size_t>(to.row * b.cols + to.col0 + col), t.state.out[col],
               to.last_fold);
      }
      ++results;
    }
    t.rows_in = rows_in;
    t.tiles = tiles;
    t.results_out = results;
    t.c = c;
    run.cycles.push_back(std::move(t));
  };
  const gemm::GemmRunResult r = gemm::RunGemm(run.plan, a, b, *engine, options);
  run.c = r.c;
  run.matches_reference = r.matches_reference;
  run.predicted = r.predicted;
  run.counters = r.counters;
  // Every fired row moves n activations through n PEs each and n partial sums down n PEs
  // each; weights arrive on the column buses into the shadow registers and are copied to
  // the active ones once per tile.
  Movement& m = run.moved;
  m.reads_in = weight_writes + rows_in * n;
  m.operand_writes = weight_writes + tiles * n * n + rows_in * n * n;
  m.sum_writes = rows_in * n * n;
  m.passes = 2 * rows_in * n * (n - 1);
  m.writes_out = results * n;
  return run;
}

OsTeachRun RecordOsTeachRun(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int dim) {
  std::unique_ptr<sim::OsArrayEngine> engine;
  try {
    engine = sim::MakeOsTeachEngine(dim);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  OsTeachRun run;
  run.dim = dim;
  run.a = a;
  run.b = b;
  const int64_t tiles_n = (b.cols + dim - 1) / dim;
  const auto n = static_cast<uint64_t>(dim);

  std::optional<sim::OsProbe> probe;
  uint64_t beats = 0, rows_out = 0;
  CProgress c{std::vector<int32_t>(static_cast<size_t>(a.rows * b.cols), 0),
              std::vector<uint8_t>(static_cast<size_t>(a.rows * b.cols), 0)};
  Movement& m = run.moved;
  auto on_cycle = [&](uint64_t cycle) {
    if (!probe) probe.emplace(dim);
    OsTeachCycle t;
    t.cycle = cycle;
    t.state = probe->Sample();
    const sim::OsArrayState& s = t.state;
    beats += s.fire;
    for (bool v : s.in_valid) m.reads_in += 2 * v;  // row r's A and column r's B
    for (int r = 0; r < dim; ++r) {
      for (int col = 0; col < dim; ++col) {
        if (!s.pe[static_cast<size_t>(r * dim + col)].valid) continue;
        ++run.macs;             // the edge that filled these registers also did the MAC
        m.operand_writes += 2;  // its A and B registers
        ++m.sum_writes;         // its accumulator
        m.passes += (col + 1 < dim) + (r + 1 < dim);  // A goes right, B goes down
      }
    }
    if (s.draining) {
      m.sum_writes += n * n;  // every accumulator takes the one above
      m.passes += n * (n - 1);
      m.writes_out += n;
      const int64_t tile = static_cast<int64_t>(rows_out / n);
      const int64_t row = (tile / tiles_n) * dim + s.out_row;
      const int64_t col0 = (tile % tiles_n) * dim;
      for (int col = 0; col < dim && row < a.rows && col0 + col < b.cols; ++col) {
        AddToC(c, static_cast<size_t>(row * b.cols + col0 + col), s.out[col], true);
      }
      ++rows_out;
    }
    t.beats_in = beats;
    t.macs = run.macs;
    t.results_out = rows_out;
    t.c = c;
    run.cycles.push_back(std::move(t));
  };
  const sim::OsRunResult r = engine->Run({a.rows, a.cols, b.cols, a.data, b.data}, on_cycle);
  run.c = {a.rows, b.cols, r.c};
  run.matches_reference = SameAsReference(a, b, r.c);
  run.counters = r.counters;
  run.predicted = gemm::PredictOsCycles(a.rows, a.cols, b.cols, dim);
  return run;
}

}  // namespace tpu::teach
