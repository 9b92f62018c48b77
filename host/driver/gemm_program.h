// A GEMM as a TPU program: C = A x B tiled onto the N x N chip, each output column tile
// requantized to int8 by its own VPU parameter set, with the host and weight memory
// images it needs. Used by the chip tests and the benchmark; a small example of what a
// compiler for the chip emits (docs/isa.md, docs/architecture.md).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/nn/int8_ops.h"

namespace tpu::host {

// One VPU parameter set as the chip reads it: N int32 biases, N int32 multipliers
// (little-endian), N shift bytes.
struct ParamSet {
  std::vector<int32_t> bias, multiplier, shift;
  std::vector<uint8_t> Bytes() const {
    std::vector<uint8_t> b(bias.size() * 9);
    const size_t n = bias.size();
    std::memcpy(b.data(), bias.data(), 4 * n);
    std::memcpy(b.data() + 4 * n, multiplier.data(), 4 * n);
    for (size_t i = 0; i < n; ++i) b[8 * n + i] = static_cast<uint8_t>(shift[i]);
    return b;
  }
};

inline ParamSet RandomParams(int n, std::mt19937& rng, int shift_lo, int shift_hi) {
  ParamSet p;
  std::uniform_int_distribution<int32_t> bias(-(1 << 15), 1 << 15);
  std::uniform_int_distribution<int32_t> mult(1 << 30, 0x7fffffff);
  std::uniform_int_distribution<int32_t> shift(shift_lo, shift_hi);
  for (int i = 0; i < n; ++i) {
    p.bias.push_back(bias(rng));
    p.multiplier.push_back(mult(rng));
    p.shift.push_back(shift(rng));
  }
  return p;
}

inline void Put(std::vector<uint8_t>* image, uint64_t addr, const std::vector<uint8_t>& bytes) {
  if (image->size() < addr + bytes.size()) image->resize(addr + bytes.size());
  std::memcpy(image->data() + addr, bytes.data(), bytes.size());
}

// C = A x B on the chip as a program: A in column blocks of n in the unified buffer, B in
// n x n tiles streamed through the weight FIFO, K folded by accumulating matmuls, every
// output column tile requantized by its own parameter set. `overlap` lets the weight
// DMA run ahead of the matrix unit (one read_weights for all tiles); otherwise each tile
// is fetched and used with a sync on either side.
struct GemmProgram {
  std::string text;
  std::vector<uint8_t> host, weights;
  uint64_t out_addr = 0, out_bytes = 0;
  int64_t m = 0, k = 0, cols = 0, n = 0, kt = 0, nt = 0;
  std::vector<ParamSet> params;

  // The int8 outputs the program must produce, from int32 products.
  Matrix<int8_t> Expected(const Matrix<int32_t>& c) const {
    Matrix<int8_t> y;
    y.rows = m;
    y.cols = cols;
    y.data.resize(static_cast<size_t>(m * cols));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const ParamSet& p = params[static_cast<size_t>(j / n)];
        const size_t l = static_cast<size_t>(j % n);
        y.at(i, j) = nn::Requantize(c.at(i, j) + p.bias[l], p.multiplier[l], p.shift[l], -128);
      }
    }
    return y;
  }
  // The outputs read back from host memory, as an m x cols matrix.
  Matrix<int8_t> Unpack(const std::vector<uint8_t>& out) const {
    Matrix<int8_t> y;
    y.rows = m;
    y.cols = cols;
    y.data.resize(static_cast<size_t>(m * cols));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        y.at(i, j) = static_cast<int8_t>(out[static_cast<size_t>(((j / n) * m + i) * n + j % n)]);
      }
    }
    return y;
  }
};

inline GemmProgram MakeGemmProgram(const Matrix<int8_t>& a, const Matrix<int8_t>& b, int n,
                                   bool overlap, uint64_t seed = 7) {
  GemmProgram g;
  g.m = a.rows;
  g.k = a.cols;
  g.cols = b.cols;
  g.n = n;
  g.kt = (g.k + n - 1) / n;
  g.nt = (g.cols + n - 1) / n;
  const int64_t m = g.m;
  // host: A column blocks, then the parameter sets, then room for the outputs
  for (int64_t kb = 0; kb < g.kt; ++kb) {
    std::vector<uint8_t> block(static_cast<size_t>(m * n), 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < n && kb * n + c < g.k; ++c) {
        block[static_cast<size_t>(i * n + c)] = static_cast<uint8_t>(a.at(i, kb * n + c));
      }
    }
    Put(&g.host, static_cast<uint64_t>(kb * m * n), block);
  }
  const uint64_t params_addr = static_cast<uint64_t>(g.kt * m * n);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int64_t j = 0; j < g.nt; ++j) {
    g.params.push_back(RandomParams(n, rng, 39, 43));
    Put(&g.host, params_addr + static_cast<uint64_t>(j * 9 * n), g.params.back().Bytes());
  }
  g.out_addr = params_addr + static_cast<uint64_t>(g.nt * 9 * n);
  g.out_bytes = static_cast<uint64_t>(g.nt * m * n);
  // weights: tile (k, j) at ((j * kt) + k) * n * n, rows of the tile = rows of B
  for (int64_t j = 0; j < g.nt; ++j) {
    for (int64_t kb = 0; kb < g.kt; ++kb) {
      std::vector<uint8_t> tile(static_cast<size_t>(n * n), 0);
      for (int64_t r = 0; r < n && kb * n + r < g.k; ++r) {
        for (int64_t c = 0; c < n && j * n + c < g.cols; ++c) {
          tile[static_cast<size_t>(r * n + c)] = static_cast<uint8_t>(b.at(kb * n + r, j * n + c));
        }
      }
      Put(&g.weights, static_cast<uint64_t>((j * g.kt + kb) * n * n), tile);
    }
  }
  const int64_t out_ub = g.kt * m;
  std::string& t = g.text;
  t += fmt::format("read_host host=0 ub=0 rows={}\n", g.kt * m);
  t += fmt::format("read_host host={} params=0 rows={}\n", params_addr, g.nt);
  if (overlap) t += fmt::format("read_weights addr=0 tiles={}\n", g.kt * g.nt);
  for (int64_t j = 0; j < g.nt; ++j) {
    const int64_t acc = (j % 2) * m;  // two accumulator buffers: tile j+1 overlaps activate j
    for (int64_t kb = 0; kb < g.kt; ++kb) {
      if (!overlap) {
        t += fmt::format("read_weights addr={} tiles=1\nsync\n", (j * g.kt + kb) * n * n);
      }
      t += fmt::format("matmul ub={} acc={} rows={} switch{}\n", kb * m, acc, m,
                       kb > 0 ? " accumulate" : "");
      if (!overlap) t += "sync\n";
    }
    t += fmt::format("activate acc={} ub={} rows={} params={}\n", acc, out_ub + j * m, m, j);
  }
  t += fmt::format("write_host ub={} host={} rows={}\nhalt\n", out_ub, g.out_addr, g.nt * m);
  return g;
}

}  // namespace tpu::host
