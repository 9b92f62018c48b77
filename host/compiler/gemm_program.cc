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
#include "host/compiler/packing.h"
#include "host/isa/program_builder.h"

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
  return MakeMatrix<T>(m, cols, [&](int64_t i, int64_t j) {
    T v;
    std::memcpy(&v, &out[static_cast<size_t>((((j / n) * m + i) * n + j % n) * sizeof(T))],
                sizeof(T));
    return v;
  });
}

template <class T>
std::vector<uint8_t> GemmProgramOf<T>::PackA(const Matrix<T>& a) const {
  const int64_t row = n * int64_t{sizeof(T)};  // a row's bytes
  std::vector<uint8_t> out(static_cast<size_t>(kt * m * row), 0);
  for (int64_t kb = 0; kb < kt; ++kb) {
    const auto bytes = static_cast<size_t>(std::min(n, k - kb * n)) * sizeof(T);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(&out[static_cast<size_t>((kb * m + i) * row)], &a.at(i, kb * n), bytes);
  }
  return out;
}

template <class T>
GemmRun<T> GemmProgramOf<T>::Run(engine::ChipEngine& engine, const Matrix<T>& a) const {
  if (a.rows != m || a.cols != k)
    throw UsageError(fmt::format("the GEMM program was compiled for A of {} x {}, not {} x {}", m,
                                 k, a.rows, a.cols));
  engine.Write("a", PackA(a));
  GemmRun<T> out{engine.Run(), {}};
  if (out.result.ok && engine.ComputesValues()) out.c = Unpack(engine.Read("c"));
  return out;
}

template struct GemmProgramOf<int8_t>;
template struct GemmProgramOf<uint16_t>;

namespace {

// The job of C = A x B, for either format: A's column blocks in the unified buffer (zeros
// in the host image: each run writes them), B's tiles (`weights`, packed) through the FIFO,
// the parameter sets (`sets`, packed) after A in host memory; T is the operand (int8_t, or
// uint16_t in bf16).
template <class T>
engine::ExecJob GemmJob(const GemmProgramOf<T>& g, bool overlap, const std::vector<uint8_t>& sets,
                        std::vector<uint8_t> weights) {
  const bool bf16 = sizeof(T) == 2;
  const int64_t m = g.m, n = g.n, row = n * int64_t{sizeof(T)};  // a row's bytes
  engine::ExecJob job;
  job.name = "gemm";
  std::vector<uint8_t>& host = job.host_image;
  host.assign(static_cast<size_t>(g.kt * m * row), 0);
  const uint64_t params_addr = host.size();
  host.insert(host.end(), sets.begin(), sets.end());
  job.host_out_addr = host.size();
  job.host_out_bytes = static_cast<uint64_t>(g.nt * m * row);
  job.weight_image = std::move(weights);

  isa::ProgramBuilder p;
  if (bf16) p.SetFormat(true);
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t out_ub = g.kt * m, tiles = g.kt * g.nt, tile = n * row;
  constexpr auto kMost = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  for (int64_t r0 = 0; r0 < g.kt * m; r0 += kMost)  // A, in transfers a length field holds
    p.ReadHost(u(r0 * row), u(r0), u(std::min(kMost, g.kt * m - r0)));
  p.ReadParams(params_addr, 0, u(g.nt));
  for (int64_t j = 0; j < g.nt; ++j) {
    const int64_t acc = (j % 2) * m;  // two accumulator buffers: tile j+1 overlaps activate j
    for (int64_t kb = 0; kb < g.kt; ++kb) {
      const int64_t t = j * g.kt + kb;
      // Overlapped: the weights in reads as long as a length field holds, each right before
      // the matmul of its first tile (a read waiting for FIFO room never stands in front of
      // the matmuls that would make it).
      if (overlap && t % kMost == 0) p.ReadWeights(u(t * tile), u(std::min(kMost, tiles - t)));
      if (!overlap) {
        p.ReadWeights(u(t * tile), 1);
        p.Sync();
      }
      p.Matmul(u(kb * m), u(acc), u(m), /*switch_tile=*/true, isa::AddIf(kb > 0));
      if (!overlap) p.Sync();
    }
    p.Activate(u(acc), u(out_ub + j * m), u(m), u(j), /*relu=*/false, isa::Pool::kNone);
  }
  for (int64_t r0 = 0; r0 < g.nt * m; r0 += kMost)
    p.WriteHost(u(out_ub + r0), job.host_out_addr + u(r0 * row), u(std::min(kMost, g.nt * m - r0)));
  p.Halt();
  job.program = p.Take();
  return job;
}

// The executable of a GEMM's job (GemmProgramOf says what its regions hold).
engine::Executable GemmExecutable(engine::ExecJob job, uint64_t a_bytes) {
  using engine::Memory;
  engine::Executable exe;
  exe.name = job.name;
  exe.programs = {std::move(job.program)};
  std::vector<uint8_t> params(job.host_image.begin() + static_cast<std::ptrdiff_t>(a_bytes),
                              job.host_image.end());
  const uint64_t params_bytes = params.size(), weight_bytes = job.weight_image.size();
  exe.regions = {{"a", Memory::kHost, 0, a_bytes, {}},
                 {"params", Memory::kHost, a_bytes, params_bytes, std::move(params)},
                 {"c", Memory::kHost, job.host_out_addr, job.host_out_bytes, {}},
                 {"weights", Memory::kWeight, 0, weight_bytes, std::move(job.weight_image)}};
  return exe;
}

template <class T>
uint64_t ABytes(const GemmProgramOf<T>& g) {
  return static_cast<uint64_t>(g.kt * g.m * g.n) * sizeof(T);
}

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

// The part of `whole` that computes m rows of A x b: b is whole's columns from `col` on (a
// multiple of n), so its parameter sets are those columns'; with its job, to combine.
std::pair<GemmProgram, engine::ExecJob> Part(const GemmProgram& whole, int64_t m,
                                             const Matrix<int8_t>& b, int64_t col, bool overlap) {
  const int n = static_cast<int>(whole.n);
  GemmProgram g = Shape(m, b, n);
  const auto from = static_cast<std::ptrdiff_t>(col), to = from + g.nt * n;
  g.channels.assign(whole.channels.begin() + from, whole.channels.begin() + to);
  engine::ExecJob job = GemmJob(g, overlap, PackParamSets<arith::Int8Format>(g.channels, n),
                                PackWeightTiles(b.data.data(), g.k, g.cols, n));
  return {std::move(g), std::move(job)};
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
GemmProgramOf<T> MakeGemmProgram(int64_t m, const Matrix<T>& b, int n, bool overlap,
                                 uint64_t seed) {
  GemmProgramOf<T> g = Shape(m, b, n);
  g.channels = RandomChannels<T>(g.nt * n, seed);
  g.exe = GemmExecutable(GemmJob(g, overlap, PackParamSets<arith::FormatOf<T>>(g.channels, n),
                                 PackWeightTiles(b.data.data(), g.k, g.cols, n)),
                         ABytes(g));
  return g;
}

template GemmProgramOf<int8_t> MakeGemmProgram(int64_t, const Matrix<int8_t>&, int, bool, uint64_t);
template GemmProgramOf<uint16_t> MakeGemmProgram(int64_t, const Matrix<uint16_t>&, int, bool,
                                                 uint64_t);

GemmOnCores MakeGemmOnCores(int64_t m, const Matrix<int8_t>& b, int n, bool overlap, int cores,
                            CoreSplit split, uint64_t seed) {
  if (cores < 1) throw std::invalid_argument("MakeGemmOnCores: cores must be at least 1");
  GemmOnCores g;
  g.split = split;
  g.whole = Shape(m, b, n);
  g.whole.channels = RandomChannels<int8_t>(g.whole.nt * n, seed);
  std::vector<engine::ExecJob> jobs;
  for (int c = 0; c < cores; ++c) {
    std::pair<GemmProgram, engine::ExecJob> part;
    if (split == CoreSplit::kRows) {
      const int64_t first = m * c / cores, last = m * (c + 1) / cores;
      if (last == first) continue;
      part = Part(g.whole, last - first, b, 0, overlap);
      g.first.push_back(first);
    } else {
      const int64_t nt = g.whole.nt, first = nt * c / cores * n,
                    last = std::min<int64_t>(nt * (c + 1) / cores * n, b.cols);
      if (last <= first) continue;
      part = Part(g.whole, m, Columns(b, first, last), first, overlap);
      g.first.push_back(first);
    }
    g.parts.push_back(std::move(part.first));
    jobs.push_back(std::move(part.second));
  }
  g.layout = CombineCoreJobs(std::move(jobs));
  std::vector<uint64_t> a_bytes;
  for (const GemmProgram& part : g.parts) a_bytes.push_back(ABytes(part));
  g.exe = TakeExecutable(&g.layout, a_bytes, "gemm");
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
