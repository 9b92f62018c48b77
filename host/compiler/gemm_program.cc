// The GEMM program (see gemm_program.h).
#include "host/compiler/gemm_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/compiler/network_compiler.h"
#include "host/compiler/packing.h"
#include "host/nn/model.h"

namespace tpu::compiler {

GemmParams RandomGemmParams(int64_t columns, std::mt19937& rng, int shift_lo, int shift_hi) {
  GemmParams p;
  std::uniform_int_distribution<int32_t> bias(-(1 << 15), 1 << 15);
  std::uniform_int_distribution<int32_t> mult(1 << 30, 0x7fffffff);
  std::uniform_int_distribution<int32_t> shift(shift_lo, shift_hi);
  for (int64_t i = 0; i < columns; ++i) {
    p.bias.push_back(bias(rng));
    p.multiplier.push_back(mult(rng));
    p.shift.push_back(shift(rng));
  }
  return p;
}

std::vector<arith::Int8Format::Channel> GemmParams::Channels() const {
  return Int8Channels(bias.data(), multiplier.data(), shift.data(),
                      static_cast<int64_t>(bias.size()));
}

namespace {

// An m x cols matrix whose element (i, j) is value(i, j).
template <class T, class F>
Matrix<T> MakeMatrix(int64_t m, int64_t cols, F&& value) {
  Matrix<T> y;
  y.rows = m;
  y.cols = cols;
  y.data.resize(static_cast<size_t>(m * cols));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < cols; ++j) y.at(i, j) = value(i, j);
  }
  return y;
}

}  // namespace

template <class T>
Matrix<T> GemmProgramOf<T>::Expected(const Matrix<int32_t>& c) const {
  return MakeMatrix<T>(m, cols, [&](int64_t i, int64_t j) {
    return Format::Activate(static_cast<typename Format::Accumulator>(c.at(i, j)),
                            channels[static_cast<size_t>(j)], false);
  });
}

template <class T>
Matrix<T> GemmProgramOf<T>::Unpack(const std::vector<uint8_t>& out) const {
  return {m, cols, network->Decode<T>(out, static_cast<int>(m))};
}

template <class T>
std::vector<uint8_t> GemmProgramOf<T>::PackA(const Matrix<T>& a) const {
  return network->EncodeInputs(a.data, static_cast<int>(m));
}

template <class T>
GemmRun<T> GemmProgramOf<T>::Run(engine::ChipEngine& engine, const Matrix<T>& a) const {
  if (a.rows != m || a.cols != k)
    throw UsageError(fmt::format("the GEMM program was compiled for A of {} x {}, not {} x {}", m,
                                 k, a.rows, a.cols));
  engine.Write("inputs", PackA(a));
  GemmRun<T> out{engine.Run(), {}};
  if (out.result.ok && engine.ComputesValues()) out.c = Unpack(engine.Read("outputs"));
  return out;
}

template struct GemmProgramOf<int8_t>;
template struct GemmProgramOf<uint16_t>;

namespace {

template <class T>
GemmProgramOf<T> Shape(int64_t m, const Matrix<T>& b, int n) {
  GemmProgramOf<T> g;
  g.m = m;
  g.k = b.rows;
  g.cols = b.cols;
  g.n = n;
  g.kt = (g.k + n - 1) / n;
  g.nt = (g.cols + n - 1) / n;
  return g;
}

}  // namespace

namespace {

// Columns [first, last) of m.
Matrix<int8_t> Columns(const Matrix<int8_t>& m, int64_t first, int64_t last) {
  Matrix<int8_t> y;
  y.rows = m.rows;
  y.cols = last - first;
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = first; j < last; ++j) y.data.push_back(m.at(i, j));
  return y;
}

// B and its output columns' parameters as a one-layer model: a dense layer of k inputs and
// cols outputs whose input is a 1 x 1 x k map (one of A's rows), in int8 (B's values; the
// channels' biases, multipliers and shifts) or, T bfloat16, in float32 (B's values exactly,
// the channels' biases).
template <class T>
nn::Model GemmModel(const Matrix<T>& b,
                    const std::vector<typename arith::FormatOf<T>::Channel>& channels) {
  nn::Model model;
  model.name = "gemm";
  model.preprocess = "none";
  model.dataset = "none";
  model.input = {1, 1, static_cast<int>(b.rows)};
  nn::Layer d;
  d.name = "gemm";
  d.type = nn::LayerType::kDense;
  d.inputs = {nn::kModelInput};
  d.in = model.input;
  d.out = {1, 1, static_cast<int>(b.cols)};
  if constexpr (std::is_same_v<T, int8_t>) {
    model.quantized = d.quantized = true;
    d.q.weights = {{b.rows, b.cols}, b.data};
    d.q.bias.shape = {b.cols};
    for (const arith::Int8Format::Channel& c : channels) {
      d.q.bias.data.push_back(c.bias);
      d.q.multiplier.push_back(c.multiplier);
      d.q.shift.push_back(c.shift);
    }
  } else {
    d.weights.shape = {b.rows, b.cols};
    for (const uint16_t w : b.data) d.weights.data.push_back(arith::FloatOfBits(uint32_t{w} << 16));
    d.bias.shape = {b.cols};
    for (const arith::Bf16Format::Channel& c : channels)
      d.bias.data.push_back(arith::FloatOfBits(c.bias));
  }
  model.layers = {std::move(d)};
  return model;
}

// The program of m rows of A x b whose output columns take `channels`, compiled for a core
// among `sharers` that share the host link: with its job and its inputs' bytes, to combine.
template <class T>
struct Part {
  GemmProgramOf<T> g;
  engine::ExecJob job;
  uint64_t input_bytes = 0;
};
template <class T>
Part<T> Compile(int64_t m, const Matrix<T>& b,
                std::vector<typename arith::FormatOf<T>::Channel> channels,
                const config::TpuConfig& config, int sharers) {
  Part<T> p;
  p.g = Shape(m, b, config.array_dim);
  p.g.channels = std::move(channels);
  const auto fail = [&](const std::string& why) {
    return UsageError(fmt::format("a GEMM of {} x {} by {} x {} does not run on chip '{}': {}", m,
                                  b.rows, b.rows, b.cols, config.name, why));
  };
  if (m < 1 || m > INT32_MAX) throw fail("A must have 1 to 2^31 - 1 rows");
  auto network =
      std::make_shared<NetworkCompiler>(GemmModel(b, p.g.channels), config, static_cast<int>(m));
  if (!network->Fits()) throw fail(network->WhyNot());
  CompiledNetwork c = network->Compile(static_cast<int>(m), sharers);
  p.job = std::move(c.job.exec);
  p.input_bytes = c.input_bytes;
  p.g.network = std::move(network);
  return p;
}

}  // namespace

namespace {

// Seeded random parameters for `columns` output columns in the format of operands T.
template <class T>
std::vector<typename arith::FormatOf<T>::Channel> RandomChannels(int64_t columns, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  if constexpr (std::is_same_v<T, int8_t>) {
    return RandomGemmParams(columns, rng, 39, 43).Channels();
  } else {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<arith::Bf16Format::Channel> c;
    for (int64_t i = 0; i < columns; ++i)
      c.push_back({arith::BitsOfFloat(d(rng)), arith::kFp32Inf});
    return c;
  }
}

}  // namespace

template <class T>
GemmProgramOf<T> MakeGemmProgram(int64_t m, const Matrix<T>& b, const config::TpuConfig& config,
                                 uint64_t seed) {
  Part<T> p = Compile(m, b, RandomChannels<T>(b.cols, seed), config, 1);
  std::vector<engine::ExecJob> jobs;
  jobs.push_back(std::move(p.job));
  CoreJobs layout = CombineCoreJobs(std::move(jobs));
  p.g.exe = TakeExecutable(&layout, {p.input_bytes}, "gemm");
  return std::move(p.g);
}

template GemmProgramOf<int8_t> MakeGemmProgram(int64_t, const Matrix<int8_t>&,
                                               const config::TpuConfig&, uint64_t);
template GemmProgramOf<uint16_t> MakeGemmProgram(int64_t, const Matrix<uint16_t>&,
                                                 const config::TpuConfig&, uint64_t);

namespace {

// The parts of a GEMM on `cores` cores: each core's first row (column) and block's size.
std::vector<std::pair<int64_t, int64_t>> Blocks(const GemmProgram& whole, int cores,
                                                CoreSplit split) {
  std::vector<std::pair<int64_t, int64_t>> blocks;
  const int64_t n = whole.n, nt = whole.nt;
  for (int c = 0; c < cores; ++c) {
    const int64_t first = split == CoreSplit::kRows ? whole.m * c / cores : nt * c / cores * n;
    const int64_t last = split == CoreSplit::kRows
                             ? whole.m * (c + 1) / cores
                             : std::min<int64_t>(nt * (c + 1) / cores * n, whole.cols);
    if (last > first) blocks.emplace_back(first, last - first);
  }
  return blocks;
}

}  // namespace

GemmOnCores MakeGemmOnCores(int64_t m, const Matrix<int8_t>& b, const config::TpuConfig& config,
                            CoreSplit split, uint64_t seed) {
  GemmOnCores g;
  g.split = split;
  g.whole = Shape(m, b, config.array_dim);
  g.whole.channels = RandomChannels<int8_t>(b.cols, seed);
  const auto blocks = Blocks(g.whole, config.cores, split);
  const int sharers = static_cast<int>(blocks.size());
  std::vector<engine::ExecJob> jobs;
  std::vector<uint64_t> input_bytes;
  for (const auto& [first, size] : blocks) {
    const auto from = g.whole.channels.begin() + static_cast<std::ptrdiff_t>(first);
    Part<int8_t> part =
        split == CoreSplit::kRows
            ? Compile(size, b, g.whole.channels, config, sharers)
            : Compile(m, Columns(b, first, first + size), {from, from + size}, config, sharers);
    g.first.push_back(first);
    g.parts.push_back(std::move(part.g));
    jobs.push_back(std::move(part.job));
    input_bytes.push_back(part.input_bytes);
  }
  g.layout = CombineCoreJobs(std::move(jobs));
  g.exe = TakeExecutable(&g.layout, input_bytes, "gemm");
  return g;
}

GemmRun<int8_t> GemmOnCores::Run(engine::ChipEngine& engine, const Matrix<int8_t>& a) const {
  if (a.rows != whole.m || a.cols != whole.k)
    throw UsageError(fmt::format("the GEMM program was compiled for A of {} x {}, not {} x {}",
                                 whole.m, whole.k, a.rows, a.cols));
  const bool rows = split == CoreSplit::kRows;
  for (size_t c = 0; c < parts.size(); ++c) {
    const GemmProgram& part = parts[c];
    Matrix<int8_t> block = a;
    if (rows) {
      block.rows = part.m;
      block.data.assign(a.data.begin() + static_cast<std::ptrdiff_t>(first[c] * a.cols),
                        a.data.begin() + static_cast<std::ptrdiff_t>((first[c] + part.m) * a.cols));
    }
    engine.Write(InputsRegion(c, parts.size()), part.PackA(block));
  }
  GemmRun<int8_t> out{engine.Run(), {}};
  if (!out.result.ok || !engine.ComputesValues()) return out;
  const std::vector<uint8_t> bytes = engine.Read("outputs");
  out.c = {whole.m, whole.cols, std::vector<int8_t>(static_cast<size_t>(whole.m * whole.cols))};
  for (size_t c = 0; c < parts.size(); ++c) {
    const Matrix<int8_t> part = parts[c].Unpack(layout.HostOut(bytes, c));
    for (int64_t i = 0; i < part.rows; ++i)
      for (int64_t j = 0; j < part.cols; ++j)
        out.c.at(rows ? first[c] + i : i, rows ? j : first[c] + j) = part.at(i, j);
  }
  return out;
}

}  // namespace tpu::compiler
