// See vector.h.
#include "arith/vector.h"

#include <vector>

#include "arith/fp32.h"

namespace tpu::arith {

uint32_t VectorLane(hw::VectorOp op, uint32_t a, uint32_t b, uint32_t old) {
  using hw::VectorOp;
  switch (op) {
    case VectorOp::kAdd:
      return Fp32Add(a, b);
    case VectorOp::kSub:
      return Fp32Sub(a, b);
    case VectorOp::kMul:
      return Fp32Mul(a, b);
    case VectorOp::kMax:
      return Fp32Max(a, b);
    case VectorOp::kMin:
      return Fp32Min(a, b);
    case VectorOp::kLess:
      return Fp32Less(a, b);
    case VectorOp::kEqual:
      return Fp32Equal(a, b);
    case VectorOp::kSelect:
      return Fp32Select(a, b, old);
    case VectorOp::kExp:
      return Fp32Exp(a);
    case VectorOp::kRecip:
      return Fp32Recip(a);
    case VectorOp::kRsqrt:
      return Fp32Rsqrt(a);
    case VectorOp::kLog:
      return Fp32Log(a);
    default:  // copy
      return Fp32Canonical(a);
  }
}

uint32_t VectorValue(const uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane,
                     bool fp32) {
  const auto r = static_cast<int64_t>(first + row * (fp32 ? 2 : 1));
  if (!fp32) return Fp32OfBf16(buffer[r * n + lane]);
  return Fp32Canonical(uint32_t{buffer[r * n + lane]} << 16 | buffer[(r + 1) * n + lane]);
}

void VectorStore(uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane, bool fp32,
                 uint32_t x) {
  const auto r = static_cast<int64_t>(first + row * (fp32 ? 2 : 1));
  if (!fp32) {
    buffer[r * n + lane] = Bf16OfFp32(x);
    return;
  }
  buffer[r * n + lane] = static_cast<uint16_t>(x >> 16);
  buffer[(r + 1) * n + lane] = static_cast<uint16_t>(x);
}

namespace {

// A reduction over rows: lane by lane, row after row from the first.
void ReduceRows(const VectorInstr& v, uint16_t* buffer, int64_t n) {
  std::vector<uint32_t> acc(static_cast<size_t>(n));
  for (uint32_t i = 0; i < v.rows; ++i)
    for (int64_t l = 0; l < n; ++l) {
      const uint32_t x = VectorValue(buffer, n, v.a, i, l, v.a32);
      uint32_t& s = acc[static_cast<size_t>(l)];
      s = i == 0 ? x : v.op == hw::VectorOp::kRowMax ? Fp32Max(s, x) : Fp32Add(s, x);
    }
  for (int64_t l = 0; l < n; ++l)
    VectorStore(buffer, n, v.out, 0, l, v.o32, acc[static_cast<size_t>(l)]);
}

}  // namespace

void VectorRun(const VectorInstr& v, uint16_t* buffer, int64_t n) {
  const hw::VectorKind kind = hw::Info(v.op).kind;
  if (kind == hw::VectorKind::kRows) {
    ReduceRows(v, buffer, n);
    return;
  }
  std::vector<uint32_t> row(static_cast<size_t>(n));
  for (uint32_t i = 0; i < v.rows; ++i) {
    for (int64_t l = 0; l < n; ++l) {
      const uint32_t a = VectorValue(buffer, n, v.a, i, l, v.a32);
      uint32_t b = 0, old = 0;
      if (kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect)
        b = VectorValue(buffer, n, v.b, v.bcast ? 0 : i, l, v.b32);
      if (kind == hw::VectorKind::kSelect) old = VectorValue(buffer, n, v.out, i, l, v.o32);
      row[static_cast<size_t>(l)] =
          kind == hw::VectorKind::kLanes ? a : VectorLane(v.op, a, b, old);
    }
    if (kind == hw::VectorKind::kLanes) {
      const uint32_t r = v.op == hw::VectorOp::kLaneMax
                             ? Fp32TreeMax(row.data(), static_cast<int>(n))
                             : Fp32TreeSum(row.data(), static_cast<int>(n));
      for (auto& x : row) x = r;
    }
    for (int64_t l = 0; l < n; ++l)
      VectorStore(buffer, n, v.out, i, l, v.o32, row[static_cast<size_t>(l)]);
  }
}

}  // namespace tpu::arith
