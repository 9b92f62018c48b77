// The fast engine's memories and instruction semantics (see chip_values.h, docs/isa.md).
#include "fast/chip_values.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "arith/bf16.h"
#include "arith/format.h"
#include "arith/int8.h"
#include "arith/int8_gemm.h"
#include "arith/vector.h"
#include "arith/vpu_tables.h"

namespace tpu::fast {

ChipValues::ChipValues(const ChipParams& p, ExternalMemories& external)
    : p_(p),
      n_(p.array_dim),
      bf16_(p.dtype == hw::Dtype::kBf16),
      row_bytes_(hw::RowBytes(p)),
      set_bytes_(int64_t{hw::ParamRows(hw::ElementBytes(p.dtype))} * row_bytes_),
      host_(external.host),
      weight_(external.weight),
      cores_(&external.cores),
      ub_(static_cast<uint64_t>(p.ub_depth_rows) * static_cast<uint64_t>(row_bytes_)),
      params_(static_cast<size_t>(p.param_sets) * static_cast<size_t>(set_bytes_), 0) {
  for (int i = 0; i < p.mxus_per_core; ++i) {
    mxus_.push_back(std::make_unique<Mxu>(static_cast<uint64_t>(p.acc_depth_rows) * p.array_dim,
                                          static_cast<size_t>(n_ * row_bytes_),
                                          static_cast<size_t>(n_ * n_)));
  }
  external.cores.push_back(this);
}

void ChipValues::BeginRun() {
  for (auto& m : mxus_) {
    m->tiles.clear();
    m->next_tile = 0;
    m->waiting.clear();
  }
}

void ChipValues::Issue(const Decoded& d) {
  using hw::Opcode;
  switch (static_cast<Opcode>(d.op)) {
    case Opcode::kReadHost:
      if (d.flags & hw::kFlagParams) {
        std::memcpy(&params_[static_cast<size_t>(d.dst * set_bytes_)], &host_[d.src],
                    static_cast<size_t>(d.len * set_bytes_));
      } else {
        std::memcpy(Ub<uint8_t>(d.dst), &host_[d.src], static_cast<size_t>(d.len * row_bytes_));
      }
      break;
    case Opcode::kReadHbm:  // the controller kept readers off the rows until they land
      if (d.flags & hw::kFlagParams) {
        std::memcpy(&params_[static_cast<size_t>(d.dst * set_bytes_)], &weight_[d.weight_addr],
                    static_cast<size_t>(d.len * set_bytes_));
      } else {
        std::memcpy(Ub<uint8_t>(d.dst), &weight_[d.weight_addr],
                    static_cast<size_t>(uint64_t{d.len} * row_bytes_));
      }
      break;
    case Opcode::kReadWeights:
    case Opcode::kLoadWeights:
      BringTiles(d);
      break;
    case Opcode::kWriteHbm:  // its rows land as the memory takes them (HbmWrite)
      for (ChipValues* core : *cores_) core->KeepPendingTiles();
      break;
    case Opcode::kMatmul: {
      Mxu& m = *mxus_[d.mxu];
      if (!m.waiting.empty() || ((d.flags & hw::kFlagSwitch) && m.next_tile == m.tiles.size())) {
        m.waiting.push_back(d);
      } else {
        Matmul(d);
      }
      break;
    }
    case Opcode::kActivate:
      if (bf16_) {
        Activate<arith::Bf16Format>(d);
      } else {
        Activate<arith::Int8Format>(d);
      }
      break;
    case Opcode::kVector: {
      arith::VectorInstr v;
      v.op = d.vec.op;
      v.a = d.src;
      v.b = d.vec.b;
      v.out = d.dst;
      v.rows = d.len;
      v.a32 = d.vec.wa == 2;
      v.b32 = d.vec.wb == 2;
      v.o32 = d.vec.wo == 2;
      v.bcast = d.vec.bcast;
      arith::VectorRun(v, Ub<uint16_t>(0), n_);
      break;
    }
    default:  // write_host moves rows as the memory accepts them; the rest move nothing
      break;
  }
}

void ChipValues::HostWrite(uint64_t host_addr, uint32_t ub_row) {
  std::memcpy(&host_[host_addr], Ub<uint8_t>(ub_row), static_cast<size_t>(row_bytes_));
}

void ChipValues::HbmWrite(uint64_t weight_addr, uint32_t ub_row) {
  std::memcpy(&weight_[weight_addr], Ub<uint8_t>(ub_row), static_cast<size_t>(row_bytes_));
}

void ChipValues::KeepPendingTiles() {
  const auto tile_bytes = static_cast<size_t>(n_ * row_bytes_);
  for (auto& m : mxus_) {
    for (size_t t = m->next_tile; t < m->tiles.size(); ++t) {
      Tile& tile = m->tiles[t];
      if (!tile.operands.empty()) continue;
      const uint8_t* w = &weight_[tile.addr];
      tile.operands = TileBuffer();
      std::memcpy(tile.operands.data(), w, tile_bytes);
    }
  }
}

namespace {

// An n x n tile of elements T transposed: row k of `to` is lane k of each row of `from`.
template <class T>
void Transpose(const uint8_t* from, uint8_t* to, int64_t n) {
  const T* in = reinterpret_cast<const T*>(from);  // as Ub<T> reads the buffer's rows
  T* out = reinterpret_cast<T*>(to);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < n; ++j) out[k * n + j] = in[j * n + k];
}

}  // namespace

void ChipValues::BringTiles(const Decoded& d) {
  Mxu& m = *mxus_[d.mxu];
  const auto tile_bytes = static_cast<uint64_t>(n_ * row_bytes_);
  const bool from_ub = d.op == static_cast<uint8_t>(hw::Opcode::kLoadWeights);
  for (uint32_t t = 0; t < d.len; ++t) {
    Tile tile;
    tile.addr = d.weight_addr + uint64_t{t} * tile_bytes;
    if (from_ub) {
      // The tile's rows as they are now: the controller keeps writers off them until the
      // weight DMA has read them (docs/isa.md). Transposed: FIFO row k is lane k of each.
      const uint8_t* rows = Ub<uint8_t>(uint64_t{d.src} + uint64_t{t} * static_cast<uint64_t>(n_));
      tile.operands = TileBuffer();
      if (!(d.flags & hw::kFlagTranspose)) {
        std::memcpy(tile.operands.data(), rows, tile_bytes);
      } else {
        if (bf16_)
          Transpose<uint16_t>(rows, tile.operands.data(), n_);
        else
          Transpose<uint8_t>(rows, tile.operands.data(), n_);
      }
    }
    m.tiles.push_back(std::move(tile));
  }
  while (!m.waiting.empty()) {
    const bool needs_tile = m.waiting.front().flags & hw::kFlagSwitch;
    if (needs_tile && m.next_tile == m.tiles.size()) break;
    Matmul(m.waiting.front());
    m.waiting.pop_front();
  }
}

std::vector<uint8_t> ChipValues::TileBuffer() {
  if (spare_.empty()) return std::vector<uint8_t>(static_cast<size_t>(n_ * row_bytes_));
  std::vector<uint8_t> b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

void ChipValues::SwitchTile(Mxu& m) {
  Tile& tile = m.tiles[m.next_tile++];
  const uint8_t* w = tile.operands.empty() ? &weight_[tile.addr] : tile.operands.data();
  std::memcpy(m.active.data(), w, static_cast<size_t>(n_ * row_bytes_));
  if (!tile.operands.empty()) spare_.push_back(std::move(tile.operands));
  if (bf16_) {  // where the non-zero weights are: the products of zeros are done by need
    arith::WidenBf16(n_, n_, reinterpret_cast<const uint16_t*>(m.active.data()), n_,
                     m.active_f.data());
    m.nonzeros = arith::NonZerosOf(n_, n_, m.active_f.data(), n_);
    return;
  }
  m.row_lo = m.col_lo = n_;
  m.row_hi = m.col_hi = 0;
  for (int64_t r = 0; r < n_; ++r) {
    for (int64_t c = 0; c < n_; ++c) {
      const auto v = static_cast<int8_t>(m.active[static_cast<size_t>(r * n_ + c)]);
      m.active_f[static_cast<size_t>(r * n_ + c)] = v;
      if (v != 0) {
        m.row_lo = std::min(m.row_lo, r);
        m.row_hi = std::max(m.row_hi, r + 1);
        m.col_lo = std::min(m.col_lo, c);
        m.col_hi = std::max(m.col_hi, c + 1);
      }
    }
  }
  if (m.row_hi == 0) m.row_lo = m.col_lo = 0;  // an all-zero tile
}

void ChipValues::Matmul(const Decoded& d) {
  Mxu& m = *mxus_[d.mxu];
  if (d.flags & hw::kFlagSwitch) SwitchTile(*mxus_[d.mxu]);
  if (bf16_) return MatmulBf16(d);
  if (d.flags & hw::kFlagMax) return MatmulMax(d);
  const bool accumulate = d.flags & hw::kFlagAccumulate;
  const int64_t rows = d.len;
  int32_t* acc = &m.acc[static_cast<size_t>(d.dst) * n_];
  const int8_t* x = MatmulRows<int8_t>(d);
  const auto* active = reinterpret_cast<const int8_t*>(m.active.data());
  // Outside the box of non-zero weights every product is zero: the accumulators keep their
  // value (accumulate) or become zero (overwrite).
  if (!accumulate) {
    for (int64_t i = 0; i < rows; ++i) {
      int32_t* row = acc + i * n_;
      std::fill(row, row + m.col_lo, 0);
      std::fill(row + m.col_hi, row + n_, 0);
    }
  }
  const int64_t cols = m.col_hi - m.col_lo, k = m.row_hi - m.row_lo;
  if (cols <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < rows; ++i) std::fill(acc + i * n_, acc + (i + 1) * n_, 0);
    return;
  }
  if (rows * cols * k < 4096) {
    arith::GemmInt8(rows, cols, k, x + m.row_lo, n_, &active[m.row_lo * n_ + m.col_lo], n_,
                    acc + m.col_lo, n_, accumulate);
  } else {
    arith::GemmInt8F(rows, cols, k, x + m.row_lo, n_,
                     &m.active_f[static_cast<size_t>(m.row_lo * n_ + m.col_lo)], n_, acc + m.col_lo,
                     n_, accumulate);
  }
}

// The rows the matmul multiplies: formed by the window stage, gathered with a stride, or
// the unified buffer's own.
template <class T>
const T* ChipValues::MatmulRows(const Decoded& d) {
  const T* x = Ub<T>(d.src);
  if (d.flags & hw::kFlagWindow) {
    // pad_min pads with the most negative operand (rtl/tpu_pkg.sv PadMin).
    FormWindowRows<T>(d, static_cast<T>(sizeof(T) == 1 ? 0x80 : arith::kBf16Lowest));
    return reinterpret_cast<const T*>(formed_.data());
  }
  if (d.step == 1) return x;
  formed_.resize(static_cast<size_t>(int64_t{d.len} * row_bytes_));
  for (int64_t i = 0; i < d.len; ++i)
    std::memcpy(&formed_[static_cast<size_t>(i * row_bytes_)], x + i * d.step * n_,
                static_cast<size_t>(row_bytes_));
  return reinterpret_cast<const T*>(formed_.data());
}

// bf16: the tile's product in the array's order (arith::Bf16TileProductSparse: the whole
// array's sums, multiplying only the non-zero weights); the accumulators store it, add it or
// keep the larger (matmul max).
void ChipValues::MatmulBf16(const Decoded& d) {
  Mxu& m = *mxus_[d.mxu];
  const int64_t rows = d.len, n = n_;
  const uint16_t* x = MatmulRows<uint16_t>(d);
  auto* acc = reinterpret_cast<uint32_t*>(&m.acc[static_cast<size_t>(d.dst) * n]);
  if (!(d.flags & hw::kFlagMax)) {
    arith::Bf16TileProductSparse(rows, n, n, n, x, n, m.active_f.data(), n, m.nonzeros, acc, n,
                                 d.flags & hw::kFlagAccumulate);
    return;
  }
  product_.assign(static_cast<size_t>(rows * n), 0);
  auto* p = reinterpret_cast<uint32_t*>(product_.data());
  arith::Bf16TileProductSparse(rows, n, n, n, x, n, m.active_f.data(), n, m.nonzeros, p, n,
                               /*accumulate=*/false);
  for (int64_t i = 0; i < rows * n; ++i) acc[i] = arith::Fp32Max(acc[i], p[i]);
}

// matmul max: each accumulator keeps the larger of its value and the product's. The
// product is the full tile's (zeros outside the box of non-zero weights included).
void ChipValues::MatmulMax(const Decoded& d) {
  Mxu& m = *mxus_[d.mxu];
  const int64_t rows = d.len, n = n_;
  const int8_t* x = MatmulRows<int8_t>(d);
  product_.assign(static_cast<size_t>(rows * n), 0);
  const int64_t cols = m.col_hi - m.col_lo, k = m.row_hi - m.row_lo;
  if (cols > 0) {
    arith::GemmInt8F(rows, cols, k, x + m.row_lo, n,
                     &m.active_f[static_cast<size_t>(m.row_lo * n + m.col_lo)], n,
                     product_.data() + m.col_lo, n, /*accumulate=*/false);
  }
  int32_t* acc = &m.acc[static_cast<size_t>(d.dst) * n];
  for (int64_t i = 0; i < rows * n; ++i)
    acc[i] = std::max(acc[i], product_[static_cast<size_t>(i)]);
}

// The window-gather stage (rtl/tpu_mxu_feeder.sv): lane l of the row of output pixel
// (oy, ox) is element ktile x N + l of its receptive field in (ky, kx, c) order; T is the
// operand (int8_t, or uint16_t in bf16).
template <class T>
void ChipValues::FormWindowRows(const Decoded& d, T pad_min) {
  const Window& w = d.window;
  const int64_t n = n_, rows = d.len;
  const int64_t fields = int64_t{w.kh} * w.kw * w.channels, first = d.first, tile = d.ktile;
  formed_.assign(static_cast<size_t>(rows * row_bytes_), 0);
  // Per lane: (ky, kx, c) and its offset from the window's corner in the map; the lanes
  // past the field's end (a suffix: [used, n)) stay zero.
  std::vector<int64_t> ky(static_cast<size_t>(n), -1), kx(ky), ch(ky), off(ky);
  int64_t used = 0, ky_max = 0, kx_max = 0;
  for (int64_t l = 0; l < n && tile * n + l < fields; ++l, ++used) {
    const int64_t e = tile * n + l;
    ch[l] = e % w.channels;
    kx[l] = e / w.channels % w.kw;
    ky[l] = e / (int64_t{w.channels} * w.kw);
    off[l] = (ky[l] * w.in_w + kx[l]) * w.pixel_bytes + ch[l];
    ky_max = std::max(ky_max, ky[l]);
    kx_max = std::max(kx_max, kx[l]);
  }
  const T* map = Ub<T>(d.src);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t px = first + i;
    int64_t oy, ox;
    if (w.pooled) {
      const int64_t win = px / 4, q = px % 4, pw = w.out_w / 2;
      oy = win / pw * 2 + q / 2;
      ox = win % pw * 2 + q % 2;
    } else {
      oy = px / w.out_w;
      ox = px % w.out_w;
    }
    const int64_t y0 = oy * w.stride_y - w.pad_top, x0 = ox * w.stride_x - w.pad_left;
    T* row = reinterpret_cast<T*>(&formed_[static_cast<size_t>(i * row_bytes_)]);
    if (!w.dilated && y0 >= 0 && x0 >= 0 && y0 + ky_max < w.in_h && x0 + kx_max < w.in_w) {
      const T* corner = map + (y0 * w.in_w + x0) * w.pixel_bytes;  // every lane in the map
      for (int64_t l = 0; l < used; ++l) row[l] = corner[off[l]];
      continue;
    }
    for (int64_t l = 0; l < used; ++l) {
      // Dilated: pixel (y, x) is read at (2y, 2x); an odd coordinate is a zero between pixels.
      const int64_t yv = y0 + ky[l], xv = x0 + kx[l];
      const bool between = w.dilated && ((yv & 1) || (xv & 1));
      const int64_t y = w.dilated ? yv >> 1 : yv, x = w.dilated ? xv >> 1 : xv;
      if (between || y < 0 || y >= w.in_h || x < 0 || x >= w.in_w) {
        if (w.pad_min) row[l] = pad_min;
        continue;
      }
      row[l] = map[(y * w.in_w + x) * w.pixel_bytes + ch[l]];
    }
  }
}

namespace {

// activate pool=lanes, in place (rtl/tpu_vpu.sv): lane l below n / 4 the maximum of lanes
// 4l .. 4l + 3, in that order as max(max(max(4l, 4l + 1), 4l + 2), 4l + 3); the others 0.
template <class T, class Max>
void PoolLanes(T* y, int64_t n, Max max) {
  for (int64_t l = 0; l < n / 4; ++l) {
    T m = y[4 * l];
    for (int q = 1; q < 4; ++q) m = max(m, y[4 * l + q]);
    y[l] = m;  // lanes 4l and up are not read again
  }
  std::fill(y + n / 4, y + n, T{0});
}

}  // namespace

// The vector unit in format F (docs/quantization.md, docs/bf16.md; rtl/tpu_vpu.sv): per lane
// the parameter set's channel, the activate of each accumulator (and the function table,
// int8 only), then 2 x 2 pooling, the larger of each four lanes, or the residual stage.
template <class F>
void ChipValues::Activate(const Decoded& d) {
  using E = typename F::Element;
  using A = typename F::Accumulator;
  Mxu& m = *mxus_[d.mxu];
  const int64_t n = n_;
  const uint8_t* set = ParamSet(d.param_set);
  std::vector<typename F::Channel> ch(static_cast<size_t>(n));
  for (int64_t l = 0; l < n; ++l)
    ch[static_cast<size_t>(l)] = F::Unpack(set, l, static_cast<int>(n));
  const bool relu = d.flags & hw::kFlagRelu, avg = d.flags & hw::kFlagPoolAvg;
  const arith::VpuFunction fn = arith::VpuFunctionOfFlags(d.flags);
  const auto* acc = reinterpret_cast<const A*>(&m.acc[static_cast<size_t>(d.src) * n]);
  std::vector<E> rows(static_cast<size_t>(4 * n));  // activated rows before a pooling
  auto activate = [&](int64_t row, E* out) {
    arith::ActivateRow<F>(acc + row * n, ch.data(), relu, fn, out, n);
  };
  if (d.flags & hw::kFlagResidual) {
    const Residual& r = d.residual;
    InResidualOrder<E>(d, [&](uint32_t k, const E* res, E* to) {
      activate(k, rows.data());
      for (int64_t l = 0; l < n; ++l)
        to[l] = F::Residual(rows[static_cast<size_t>(l)], res[l], r.product, r.mul_a, r.mul_b,
                            r.shift, r.relu);
    });
    return;
  }
  for (uint32_t i = 0; i < d.out_rows; ++i) {
    E* y = Ub<E>(d.dst + i * d.step);
    if (!d.pooled) {
      activate(i, y);
      if (d.lanes) PoolLanes(y, n, F::Larger);
      continue;
    }
    for (int q = 0; q < 4; ++q) activate(4 * i + q, &rows[static_cast<size_t>(q * n)]);
    for (int64_t l = 0; l < n; ++l) {
      const E v[4] = {rows[static_cast<size_t>(l)], rows[static_cast<size_t>(n + l)],
                      rows[static_cast<size_t>(2 * n + l)], rows[static_cast<size_t>(3 * n + l)]};
      y[l] = F::Pool(v, avg);
    }
  }
}

// activate residual, row by row in the order the hardware moves them: row k's residual
// row is read in the cycle two after its accumulator row, and row j is written four
// after, so the read of row k sees the rows written up to row k - 3 (an activate may
// write onto its own residual rows).
template <class T>
void ChipValues::InResidualOrder(const Decoded& d,
                                 const std::function<void(uint32_t, const T*, T*)>& row) {
  const int64_t n = n_, step = d.step;
  std::vector<T> rows(static_cast<size_t>(d.len) * static_cast<size_t>(n));
  auto write = [&](uint32_t j) {
    std::memcpy(Ub<T>(d.dst + j * step), &rows[size_t{j} * n], static_cast<size_t>(row_bytes_));
  };
  for (uint32_t k = 0; k < d.len; ++k) {
    if (k >= 3) write(k - 3);
    row(k, Ub<T>(d.residual.ub + k * step), &rows[size_t{k} * n]);
  }
  for (uint32_t k = d.len >= 3 ? d.len - 3 : 0; k < d.len; ++k) write(k);
}

}  // namespace tpu::fast
