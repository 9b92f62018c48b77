#include "host/compiler/lstm_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "arith/int8.h"
#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/compiler/packing.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler {
namespace {

// The layout of one LSTM layer on an N-lane chip. Padding: X and H to whole tiles (xt, ht);
// the gate columns of hidden tile j are column j of each gate's block.
struct Layout {
  int64_t n, x, h, b, xt, ht, kt;
  // Unified buffer: two x buffers (batch i's K-tile t at row i xt + t, as host memory holds
  // a step's inputs, so one read_host brings them), two h buffers (batch i's tile j at row
  // i ht + j), the cell state (tile j, batch i at row c + j B + i), and scratch rows.
  int64_t xb[2], hb[2], c, g, ig, fc, tc, ub_rows;
  // Accumulators: the four gates (gate k at k B), then two rows blocks for the identity
  // passes.
  int64_t acc_rows;
  // Parameter sets in host memory: 0 identity, 1 c' to the tanh input, 2 + 4 j + k gate k
  // of hidden tile j. All of them stay on chip when the chip has room; otherwise sets 2..5
  // are loaded again before each hidden tile (`reload`).
  int64_t sets;
  bool reload = false;

  Layout(const nn::QuantizedLstm& q, int64_t batch, int lanes, int64_t chip_sets)
      : n(lanes), x(q.inputs), h(q.hidden), b(batch) {
    xt = (x + n - 1) / n;
    ht = (h + n - 1) / n;
    kt = xt + ht;
    xb[0] = 0;
    xb[1] = b * xt;
    hb[0] = 2 * b * xt;
    hb[1] = hb[0] + b * ht;
    c = hb[1] + b * ht;
    g = c + ht * b;
    ig = g + b;
    fc = ig + b;
    tc = fc + b;  // b rows ht apart, like the h rows they multiply
    ub_rows = tc + (b - 1) * ht + 1;
    acc_rows = 6 * b;
    sets = 2 + 4 * ht;
    reload = sets > chip_sets;
  }
  int64_t GateSet(int64_t j) const { return reload ? 2 : 2 + 4 * j; }
  int64_t TilesPerStep() const { return ht * (4 * kt + 2); }
};

void CheckFits(const Layout& l, const config::TpuConfig& chip) {
  auto fail = [&](const std::string& what) {
    throw UsageError(
        fmt::format("an LSTM of {} inputs and {} hidden units at batch {} does not "
                    "fit chip '{}': {}",
                    l.x, l.h, l.b, chip.name, what));
  };
  if (l.acc_rows > chip.acc_depth_rows)
    fail(fmt::format("it needs {} accumulator rows (6 x batch), the chip has {}", l.acc_rows,
                     chip.acc_depth_rows));
  if (l.ub_rows > chip.ub_depth_rows)
    fail(fmt::format("it needs {} unified-buffer rows, the chip has {}", l.ub_rows,
                     chip.ub_depth_rows));
  if (chip.param_sets < 6)
    fail(fmt::format("it needs 6 VPU parameter sets, the chip has {}", chip.param_sets));
  constexpr auto kMost = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  if (l.TilesPerStep() > kMost) fail("a step's weight tiles do not fit one read_weights");
  if (std::max(l.b * l.xt, l.b * l.ht) > kMost)
    fail("a step's inputs or its h do not fit one read_host (65,535 rows)");
}

// The weight tiles of one step in the order its matmuls take them: for each hidden tile j,
// gates i, f, g, o, each K-tile of [x; h], then two identity tiles.
std::vector<uint8_t> WeightImage(const nn::QuantizedLstm& q, const Layout& l) {
  const int64_t n = l.n, G = q.Gates(), tile = n * n;
  std::vector<uint8_t> image(static_cast<size_t>(l.TilesPerStep() * tile), 0);
  int64_t t = 0;
  for (int64_t j = 0; j < l.ht; ++j) {
    for (int64_t k = 0; k < 4; ++k) {
      for (int64_t kb = 0; kb < l.kt; ++kb, ++t) {
        for (int64_t r = 0; r < n; ++r) {
          // Tile row r multiplies lane r of K-tile kb: an input row or an h row.
          const int64_t row = kb < l.xt ? kb * n + r : q.inputs + (kb - l.xt) * n + r;
          if ((kb < l.xt && row >= q.inputs) || (kb >= l.xt && row >= q.Rows())) continue;
          for (int64_t c = 0; c < n && j * n + c < q.hidden; ++c) {
            image[static_cast<size_t>(t * tile + r * n + c)] =
                static_cast<uint8_t>(q.weights[row * G + k * q.hidden + j * n + c]);
          }
        }
      }
    }
    for (int64_t i = 0; i < 2; ++i, ++t)
      for (int64_t r = 0; r < n; ++r) image[static_cast<size_t>(t * tile + r * n + r)] = 1;
  }
  return image;
}

// The parameter sets: identity, c' to the tanh table's input, then each tile's gates.
std::vector<uint8_t> ParamImage(const nn::QuantizedLstm& q, const Layout& l) {
  const int64_t n = l.n, lanes = l.sets * n;
  std::vector<int32_t> bias(static_cast<size_t>(lanes), 0), mult(static_cast<size_t>(lanes), 0),
      shift(static_cast<size_t>(lanes), 1);
  for (int64_t c = 0; c < n; ++c) {
    mult[c] = 1 << 30;  // identity: (v 2^30 + 2^29) >> 30 = v
    shift[c] = 30;
    mult[n + c] = q.tanh_mul;
    shift[n + c] = q.tanh_shift;
  }
  for (int64_t j = 0; j < l.ht; ++j) {
    for (int64_t k = 0; k < 4; ++k) {
      for (int64_t c = 0; c < n && j * n + c < q.hidden; ++c) {
        const int64_t lane = (2 + 4 * j + k) * n + c, col = k * q.hidden + j * n + c;
        bias[lane] = q.bias[col];
        mult[lane] = q.multiplier[col];
        shift[lane] = q.shift[col];
      }
    }
  }
  return PackParamSets<arith::Int8Format>(
      Int8Channels(bias.data(), mult.data(), shift.data(), lanes), static_cast<int>(n));
}

// One hidden tile of one step: the gate matmuls, then the cell (docs/quantization.md).
void EmitTile(isa::ProgramBuilder& p, const nn::QuantizedLstm& q, const Layout& l, int64_t j,
              int64_t s, int64_t params_at) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t b = l.b, set = l.GateSet(j);
  if (l.reload) p.ReadParams(u(params_at + (2 + 4 * j) * hw::kParamRows * l.n), 2, 4);
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t kb = 0; kb < l.kt; ++kb) {  // K-tile kb: x's tiles, then h's
      const bool x = kb < l.xt;
      p.Matmul(u(x ? l.xb[s % 2] + kb : l.hb[s % 2] + kb - l.xt), u(k * b), u(b), true,
               isa::AddIf(kb > 0), u(x ? l.xt : l.ht));
    }
  using isa::Fn;
  using isa::Pool;
  auto product = [&](int64_t ub, int32_t mul, int32_t shift) {
    p.SetResidual({u(ub), u(mul), 0, u(shift), false, true});
  };
  p.Activate(u(2 * b), u(l.g), u(b), u(set + 2), false, Pool::kNone, 1, false, Fn::kTanh);
  product(l.g, q.ig_mul, q.ig_shift);  // i * g
  p.Activate(0, u(l.ig), u(b), u(set), false, Pool::kNone, 1, true, Fn::kSigmoid);
  const int64_t cell = l.c + j * b;
  product(cell, q.fc_mul, q.fc_shift);  // f * c
  p.Activate(u(b), u(l.fc), u(b), u(set + 1), false, Pool::kNone, 1, true, Fn::kSigmoid);
  // c' = f c + i g: f c through the identity tile into the accumulators, i g added to it.
  p.Matmul(u(l.fc), u(4 * b), u(b), true, isa::Acc::kOverwrite);
  p.SetResidual({u(l.ig), 2, 2, 1, false, false});
  p.Activate(u(4 * b), u(cell), u(b), 0, false, Pool::kNone, 1, true);
  // h' = o * tanh(c'), written where the next step's matmuls read h.
  p.Matmul(u(cell), u(5 * b), u(b), true, isa::Acc::kOverwrite);
  p.Activate(u(5 * b), u(l.tc), u(b), 1, false, Pool::kNone, u(l.ht), false, Fn::kTanh);
  product(l.tc, q.h_mul, q.h_shift);
  p.Activate(u(3 * b), u(l.hb[(s + 1) % 2] + j), u(b), u(set + 3), false, Pool::kNone, u(l.ht),
             true, Fn::kSigmoid);
}

// Host memory: x (step s, batch i: xt rows), h0 (batch i: ht rows), c0 (ht x B rows), the
// parameter sets, then the outputs h and c in the same layouts; weight memory: the tiles.
void AddRegions(const nn::QuantizedLstm& q, const Layout& l, int64_t steps,
                engine::Executable* exe) {
  uint64_t at = 0;
  const auto rows = [&](const char* name, int64_t count, std::vector<uint8_t> initial = {}) {
    const auto bytes = initial.empty() ? static_cast<uint64_t>(count * l.n) : initial.size();
    exe->regions.push_back({name, engine::Memory::kHost, at, bytes, std::move(initial)});
    at += bytes;
  };
  rows("x", steps * l.b * l.xt);
  rows("h0", l.b * l.ht);
  rows("c0", l.ht * l.b);
  rows("params", 0, ParamImage(q, l));
  rows("h", l.b * l.ht);
  rows("c", l.ht * l.b);
  exe->regions.push_back({"weights", engine::Memory::kWeight, 0, 0, WeightImage(q, l)});
  exe->regions.back().bytes = exe->regions.back().initial.size();
}

// The program: the parameter sets, h0 and c0 in; each step's x in, its weight tiles, its
// tiles of hidden units; h and c out.
isa::Program Steps(const nn::QuantizedLstm& q, const Layout& l, int64_t steps,
                   const engine::Executable& exe) {
  const auto at = [&](const char* r) { return static_cast<int64_t>(exe.At(r).addr); };
  const int64_t n = l.n, b = l.b, params_at = at("params");
  isa::ProgramBuilder p;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  p.ReadParams(u(params_at), 0, u(l.reload ? 2 : l.sets));
  p.ReadHost(u(at("h0")), u(l.hb[0]), u(b * l.ht));
  p.ReadHost(u(at("c0")), u(l.c), u(l.ht * b));
  for (int64_t s = 0; s < steps; ++s) {
    p.ReadHost(u(at("x") + s * b * l.xt * n), u(l.xb[s % 2]), u(b * l.xt));
    p.ReadWeights(0, u(l.TilesPerStep()));
    for (int64_t j = 0; j < l.ht; ++j) EmitTile(p, q, l, j, s, params_at);
  }
  p.WriteHost(u(l.hb[steps % 2]), u(at("h")), u(b * l.ht));
  p.WriteHost(u(l.c), u(at("c")), u(l.ht * b));
  p.Halt();
  return p.Take();
}

}  // namespace

LstmProgram MakeLstmProgram(const nn::QuantizedLstm& q, int64_t batch, int64_t steps,
                            const config::TpuConfig& chip) {
  if (batch < 1 || steps < 1) throw UsageError("an LSTM run needs a batch and steps of at least 1");
  const Layout l(q, batch, chip.array_dim, chip.param_sets);
  CheckFits(l, chip);
  LstmProgram out;
  out.batch = batch;
  out.steps = steps;
  out.inputs = q.inputs;
  out.hidden = q.hidden;
  out.n = l.n;
  out.ht = l.ht;
  out.xt = l.xt;
  out.exe.name = "lstm";
  AddRegions(q, l, steps, &out.exe);
  out.exe.programs = {Steps(q, l, steps, out.exe)};
  return out;
}

engine::ExecResult LstmProgram::Run(engine::ChipEngine& e, const std::vector<int8_t>& x,
                                    const std::vector<int8_t>& h0, const std::vector<int8_t>& c0,
                                    std::vector<int8_t>* h, std::vector<int8_t>* c) const {
  if (static_cast<int64_t>(x.size()) != steps * batch * inputs ||
      static_cast<int64_t>(h0.size()) != batch * hidden ||
      static_cast<int64_t>(c0.size()) != batch * hidden)
    throw UsageError("the LSTM's inputs, h0 and c0 do not match its sizes");
  std::vector<uint8_t> xb(static_cast<size_t>(steps * batch * xt * n), 0);
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < batch; ++i)
      std::memcpy(&xb[static_cast<size_t>((s * batch + i) * xt * n)],
                  &x[static_cast<size_t>((s * batch + i) * inputs)], static_cast<size_t>(inputs));
  e.Write("x", xb);
  e.Write("h0", Pack(h0, /*cell=*/false));
  e.Write("c0", Pack(c0, /*cell=*/true));
  engine::ExecResult r = e.Run();
  if (r.ok && e.ComputesValues()) {
    *h = Unpack(e.Read("h"), /*cell=*/false);
    *c = Unpack(e.Read("c"), /*cell=*/true);
  }
  return r;
}

// h: batch i's tile j at row i ht + j; c: tile j, batch i at row j B + i.
size_t LstmProgram::At(int64_t i, int64_t v, bool cell) const {
  return static_cast<size_t>(cell ? ((v / n) * batch + i) * n + v % n : i * ht * n + v);
}

std::vector<uint8_t> LstmProgram::Pack(const std::vector<int8_t>& values, bool cell) const {
  std::vector<uint8_t> out(static_cast<size_t>(batch * ht * n), 0);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t v = 0; v < hidden; ++v)
      out[At(i, v, cell)] = static_cast<uint8_t>(values[static_cast<size_t>(i * hidden + v)]);
  return out;
}

std::vector<int8_t> LstmProgram::Unpack(const std::vector<uint8_t>& region, bool cell) const {
  std::vector<int8_t> out(static_cast<size_t>(batch * hidden), 0);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t v = 0; v < hidden; ++v)
      out[static_cast<size_t>(i * hidden + v)] = static_cast<int8_t>(region[At(i, v, cell)]);
  return out;
}

LstmCase MakeLstmCase(int64_t inputs, int64_t hidden, int64_t batch, int64_t steps, uint64_t seed,
                      const config::TpuConfig& chip) {
  LstmCase k;
  k.inputs = inputs;
  const nn::Lstm fp = nn::RandomLstm(inputs, hidden, seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> unit(-1, 1);
  std::vector<float> xf(static_cast<size_t>(steps * batch * inputs));
  for (float& v : xf) v = unit(rng);
  k.h_fp32.assign(static_cast<size_t>(batch * hidden), 0);
  std::vector<float> cf = k.h_fp32;
  float most = 0;
  for (int64_t s = 0; s < steps; ++s) {
    nn::Fp32LstmStep(fp, &xf[static_cast<size_t>(s * batch * inputs)], k.h_fp32.data(), cf.data(),
                     batch);
    for (const float v : cf) most = std::max(most, std::fabs(v));
  }
  k.cell_scale = most > 0 ? most / 127 : 1.0f / 127;
  k.q = nn::QuantizeLstm(fp, k.cell_scale);
  const nn::QuantizedLstm& q = k.q;
  k.x.resize(xf.size());
  for (size_t i = 0; i < k.x.size(); ++i) k.x[i] = arith::QuantizeInput(xf[i], 1.0f / 127);
  k.h.assign(static_cast<size_t>(batch * hidden), 0);
  k.c = k.h;
  k.program = MakeLstmProgram(q, batch, steps, chip);
  for (int64_t s = 0; s < steps; ++s)
    nn::Int8LstmStep(q, &k.x[static_cast<size_t>(s * batch * inputs)], k.h.data(), k.c.data(),
                     batch);
  return k;
}

int64_t LstmCase::Macs() const {
  const LstmProgram& p = program;
  return (inputs + p.hidden) * 4 * p.hidden * p.batch * p.steps;
}

float LstmCase::WorstHError(const std::vector<int8_t>& h_int8) const {
  float worst = 0;
  for (size_t i = 0; i < h_int8.size() && i < h_fp32.size(); ++i)
    worst = std::max(worst, std::fabs(h_int8[i] / 127.0f - h_fp32[i]));
  return worst;
}

}  // namespace tpu::compiler
