// The GEMM program (see gemm_program.h).
#include "host/compiler/gemm_program.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

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

namespace {

// An m x cols int8 matrix whose element (i, j) is value(i, j).
template <class F>
Matrix<int8_t> MakeMatrix(int64_t m, int64_t cols, F&& value) {
  Matrix<int8_t> y;
  y.rows = m;
  y.cols = cols;
  y.data.resize(static_cast<size_t>(m * cols));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < cols; ++j) y.at(i, j) = value(i, j);
  }
  return y;
}

}  // namespace

Matrix<int8_t> GemmProgram::Expected(const Matrix<int32_t>& c) const {
  return MakeMatrix(m, cols, [&](int64_t i, int64_t j) {
    const auto l = static_cast<size_t>(j);
    return arith::Requantize(static_cast<int32_t>(static_cast<uint32_t>(c.at(i, j)) +
                                                  static_cast<uint32_t>(params.bias[l])),
                             static_cast<uint32_t>(params.multiplier[l]),
                             static_cast<uint32_t>(params.shift[l]), -128);
  });
}

Matrix<int8_t> GemmProgram::Unpack(const std::vector<uint8_t>& out) const {
  return MakeMatrix(m, cols, [&](int64_t i, int64_t j) {
    return static_cast<int8_t>(out[static_cast<size_t>(((j / n) * m + i) * n + j % n)]);
  });
}

namespace {

// The program and memory images of C = A x B, for either format: A's column blocks in the
// unified buffer, B's tiles (`weights`, packed) through the FIFO, the parameter sets
// (`sets`, packed) after A in host memory; T is the operand (int8_t, or uint16_t in bf16).
template <class T>
void BuildGemm(GemmProgram* g, const Matrix<T>& a, int n, bool overlap,
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
GemmProgram Shape(const Matrix<T>& a, const Matrix<T>& b, int n) {
  GemmProgram g;
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
  g.params.bias.assign(whole.params.bias.begin() + from, whole.params.bias.begin() + to);
  g.params.multiplier.assign(whole.params.multiplier.begin() + from,
                             whole.params.multiplier.begin() + to);
  g.params.shift.assign(whole.params.shift.begin() + from, whole.params.shift.begin() + to);
  const std::vector<uint8_t> sets = PackParamSets(g.params.bias.data(), g.params.multiplier.data(),
                                                  g.params.shift.data(), g.nt * n, n);
  BuildGemm(&g, a, n, overlap, sets, PackWeightTiles(b.data.data(), g.k, g.cols, n));
  return g;
}

}  // namespace

GemmProgram MakeGemmProgram(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n, bool overlap,
                            uint64_t seed) {
  GemmProgram whole = Shape(a, b, n);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  whole.params = RandomGemmParams(whole.nt * n, rng, 39, 43);
  return Part(whole, a, b, 0, overlap);
}

GemmProgram MakeGemmProgramBf16(const Matrix<uint16_t>& a, const Matrix<uint16_t>& b, int n,
                                bool overlap, uint64_t seed) {
  GemmProgram g = Shape(a, b, n);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t c = 0; c < g.nt * n; ++c) g.bias_bf16.push_back(arith::BitsOfFloat(d(rng)));
  const std::vector<uint32_t> hi(g.bias_bf16.size(), arith::kFp32Inf);
  const std::vector<uint8_t> sets = PackParamSetsBf16(g.bias_bf16.data(), hi.data(), g.nt * n, n);
  BuildGemm(&g, a, n, overlap, sets, PackWeightTilesBf16(b.data.data(), g.k, g.cols, n));
  return g;
}

GemmOnCores MakeGemmOnCores(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n, bool overlap,
                            int cores, CoreSplit split, uint64_t seed) {
  if (cores < 1) throw std::invalid_argument("MakeGemmOnCores: cores must be at least 1");
  GemmOnCores g;
  g.split = split;
  g.whole = Shape(a, b, n);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  g.whole.params = RandomGemmParams(g.whole.nt * n, rng, 39, 43);
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

std::vector<uint16_t> GemmProgram::ExpectedBf16(const std::vector<uint32_t>& c) const {
  std::vector<uint16_t> y(static_cast<size_t>(m * cols));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < cols; ++j)
      y[static_cast<size_t>(i * cols + j)] = arith::Bf16Activate(
          arith::Fp32Add(c[static_cast<size_t>(i * cols + j)], bias_bf16[static_cast<size_t>(j)]),
          false, arith::kFp32Inf);
  return y;
}

std::vector<uint16_t> GemmProgram::UnpackBf16(const std::vector<uint8_t>& out) const {
  std::vector<uint16_t> y(static_cast<size_t>(m * cols));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(&y[static_cast<size_t>(i * cols + j)],
                  &out[static_cast<size_t>((((j / n) * m + i) * n + j % n) * 2)], 2);
  return y;
}

}  // namespace tpu::compiler
