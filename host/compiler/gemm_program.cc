// The GEMM program (see gemm_program.h).
#include "host/compiler/gemm_program.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "arith/bf16.h"
#include "arith/int8.h"
#include "contract/tpu_contract.h"
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

template struct GemmProgramOf<int8_t>;
template struct GemmProgramOf<uint16_t>;

namespace {

// The program and memory images of C = A x B, for either format: A's column blocks in the
// unified buffer, B's tiles (`weights`, packed) through the FIFO, the parameter sets
// (`sets`, packed) after A in host memory; T is the operand (int8_t, or uint16_t in bf16).
template <class T>
void BuildGemm(GemmProgramOf<T>* g, const Matrix<T>& a, int n, bool overlap,
               const std::vector<uint8_t>& sets, std::vector<uint8_t> weights) {
  const bool bf16 = sizeof(T) == 2;
  const int64_t m = g->m, row = int64_t{n} * int64_t{sizeof(T)};  // a row's bytes
  engine::ExecJob& job = g->job;
  job.name = "gemm";
  std::vector<uint8_t>& host = job.host_image;
  host.assign(static_cast<size_t>(g->kt * m * row), 0);
  for (int64_t kb = 0; kb < g->kt; ++kb)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < n && kb * n + c < g->k; ++c)
        std::memcpy(&host[static_cast<size_t>((kb * m + i) * row + c * int64_t{sizeof(T)})],
                    &a.at(i, kb * n + c), sizeof(T));
  const uint64_t params_addr = host.size();
  host.insert(host.end(), sets.begin(), sets.end());
  job.host_out_addr = host.size();
  job.host_out_bytes = static_cast<uint64_t>(g->nt * m * row);
  job.weight_image = std::move(weights);

  isa::ProgramBuilder p;
  if (bf16) p.SetFormat(true);
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t out_ub = g->kt * m, tiles = g->kt * g->nt, tile = n * row;
  constexpr auto kMost = static_cast<int64_t>(isa::ProgramBuilder::kMaxLength);
  for (int64_t r0 = 0; r0 < g->kt * m; r0 += kMost)  // A, in transfers a length field holds
    p.ReadHost(u(r0 * row), u(r0), u(std::min(kMost, g->kt * m - r0)));
  p.ReadParams(params_addr, 0, u(g->nt));
  for (int64_t j = 0; j < g->nt; ++j) {
    const int64_t acc = (j % 2) * m;  // two accumulator buffers: tile j+1 overlaps activate j
    for (int64_t kb = 0; kb < g->kt; ++kb) {
      const int64_t t = j * g->kt + kb;
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
  for (int64_t r0 = 0; r0 < g->nt * m; r0 += kMost)
    p.WriteHost(u(out_ub + r0), job.host_out_addr + u(r0 * row),
                u(std::min(kMost, g->nt * m - r0)));
  p.Halt();
  job.program = p.Take();
}

template <class T>
GemmProgramOf<T> Shape(const Matrix<T>& a, const Matrix<T>& b, int n) {
  GemmProgramOf<T> g;
  g.m = a.rows;
  g.k = a.cols;
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

// Rows [first, last) of m.
Matrix<int8_t> Rows(const Matrix<int8_t>& m, int64_t first, int64_t last) {
  Matrix<int8_t> y;
  y.rows = last - first;
  y.cols = m.cols;
  y.data.assign(m.data.begin() + static_cast<std::ptrdiff_t>(first * m.cols),
                m.data.begin() + static_cast<std::ptrdiff_t>(last * m.cols));
  return y;
}

// The part of `whole` that computes a x b: b is whole's columns from `col` on (a multiple of
// n), so its parameter sets are those columns'.
GemmProgram Part(const GemmProgram& whole, const Matrix<int8_t>& a, const Matrix<int8_t>& b,
                 int64_t col, bool overlap) {
  const int n = static_cast<int>(whole.n);
  GemmProgram g = Shape(a, b, n);
  const auto from = static_cast<std::ptrdiff_t>(col), to = from + g.nt * n;
  g.channels.assign(whole.channels.begin() + from, whole.channels.begin() + to);
  BuildGemm(&g, a, n, overlap, PackParamSets<arith::Int8Format>(g.channels, n),
            PackWeightTiles(b.data.data(), g.k, g.cols, n));
  return g;
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
GemmProgramOf<T> MakeGemmProgram(const Matrix<T>& a, const Matrix<T>& b, int n, bool overlap,
                                 uint64_t seed) {
  GemmProgramOf<T> g = Shape(a, b, n);
  g.channels = RandomChannels<T>(g.nt * n, seed);
  BuildGemm(&g, a, n, overlap, PackParamSets<arith::FormatOf<T>>(g.channels, n),
            PackWeightTiles(b.data.data(), g.k, g.cols, n));
  return g;
}

template GemmProgramOf<int8_t> MakeGemmProgram(const Matrix<int8_t>&, const Matrix<int8_t>&, int,
                                               bool, uint64_t);
template GemmProgramOf<uint16_t> MakeGemmProgram(const Matrix<uint16_t>&, const Matrix<uint16_t>&,
                                                 int, bool, uint64_t);

GemmOnCores MakeGemmOnCores(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n, bool overlap,
                            int cores, CoreSplit split, uint64_t seed) {
  if (cores < 1) throw std::invalid_argument("MakeGemmOnCores: cores must be at least 1");
  GemmOnCores g;
  g.split = split;
  g.whole = Shape(a, b, n);
  g.whole.channels = RandomChannels<int8_t>(g.whole.nt * n, seed);
  std::vector<engine::ExecJob> jobs;
  for (int c = 0; c < cores; ++c) {
    if (split == CoreSplit::kRows) {
      const int64_t first = a.rows * c / cores, last = a.rows * (c + 1) / cores;
      if (last == first) continue;
      g.parts.push_back(Part(g.whole, Rows(a, first, last), b, 0, overlap));
      g.first.push_back(first);
    } else {
      const int64_t nt = g.whole.nt, first = nt * c / cores * n,
                    last = std::min<int64_t>(nt * (c + 1) / cores * n, b.cols);
      if (last <= first) continue;
      g.parts.push_back(Part(g.whole, a, Columns(b, first, last), first, overlap));
      g.first.push_back(first);
    }
    jobs.push_back(g.parts.back().job);
  }
  g.jobs = CombineCoreJobs(std::move(jobs));
  return g;
}

Matrix<int8_t> GemmOnCores::Unpack(const std::vector<uint8_t>& out) const {
  Matrix<int8_t> y;
  y.rows = whole.m;
  y.cols = whole.cols;
  y.data.assign(static_cast<size_t>(y.rows * y.cols), 0);
  for (size_t c = 0; c < parts.size(); ++c) {
    const Matrix<int8_t> part = parts[c].Unpack(jobs.HostOut(out, c));
    const bool rows = split == CoreSplit::kRows;
    for (int64_t i = 0; i < part.rows; ++i)
      for (int64_t j = 0; j < part.cols; ++j)
        y.at(rows ? first[c] + i : i, rows ? j : first[c] + j) = part.at(i, j);
  }
  return y;
}

}  // namespace tpu::compiler
