// See vector.h.
#include "arith/vector.h"

#include <vector>

#include "arith/clones.h"
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

namespace {

// Where row `row` of an operand at buffer row `first` starts (float32: two buffer rows, the
// lanes' high halves, then their low halves).
int64_t RowStart(int64_t n, uint64_t first, uint64_t row, bool fp32) {
  return static_cast<int64_t>(first + row * (fp32 ? 2 : 1)) * n;
}

// Lane l of the row at `hi` as float32 (canonical), and x stored into it.
uint32_t LaneValue(const uint16_t* hi, int64_t n, int64_t l, bool fp32) {
  return fp32 ? Fp32Canonical(uint32_t{hi[l]} << 16 | hi[n + l]) : Fp32OfBf16(hi[l]);
}
void LaneStore(uint16_t* hi, int64_t n, int64_t l, bool fp32, uint32_t x) {
  if (!fp32) {
    hi[l] = Bf16OfFp32(x);
    return;
  }
  hi[l] = static_cast<uint16_t>(x >> 16);
  hi[n + l] = static_cast<uint16_t>(x);
}

}  // namespace

uint32_t VectorValue(const uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane,
                     bool fp32) {
  return LaneValue(buffer + RowStart(n, first, row, fp32), n, lane, fp32);
}

void VectorStore(uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, int64_t lane, bool fp32,
                 uint32_t x) {
  LaneStore(buffer + RowStart(n, first, row, fp32), n, lane, fp32, x);
}

namespace {

// All n lanes of a row (VectorValue's, VectorStore's).
TPU_VECTOR_CLONES
void LoadRow(const uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, bool fp32,
             uint32_t* out) {
  const uint16_t* hi = buffer + RowStart(n, first, row, fp32);
  for (int64_t l = 0; l < n; ++l) out[l] = LaneValue(hi, n, l, fp32);
}
TPU_VECTOR_CLONES
void StoreRow(uint16_t* buffer, int64_t n, uint64_t first, uint64_t row, bool fp32,
              const uint32_t* x) {
  uint16_t* hi = buffer + RowStart(n, first, row, fp32);
  for (int64_t l = 0; l < n; ++l) LaneStore(hi, n, l, fp32, x[l]);
}

// out[l] = f(a[l], b[l], old[l]) over a row: one loop per operation, so that the compiler
// can inline and vectorize each lane's function.
template <class Lane>
void Lanes(int64_t n, const uint32_t* a, const uint32_t* b, const uint32_t* old, uint32_t* out,
           Lane f) {
  for (int64_t l = 0; l < n; ++l) out[l] = f(a[l], b[l], old[l]);
}

TPU_VECTOR_CLONES
void RowOf(hw::VectorOp op, int64_t n, const uint32_t* a, const uint32_t* b, const uint32_t* old,
           uint32_t* out) {
  using hw::VectorOp;
  auto run = [&](auto f) { Lanes(n, a, b, old, out, f); };
  switch (op) {
    case VectorOp::kAdd:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Add(x, y); });
    case VectorOp::kSub:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Sub(x, y); });
    case VectorOp::kMul:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Mul(x, y); });
    case VectorOp::kMax:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Max(x, y); });
    case VectorOp::kMin:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Min(x, y); });
    case VectorOp::kLess:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Less(x, y); });
    case VectorOp::kEqual:
      return run([](uint32_t x, uint32_t y, uint32_t) { return Fp32Equal(x, y); });
    case VectorOp::kSelect:
      return run([](uint32_t x, uint32_t y, uint32_t o) { return Fp32Select(x, y, o); });
    case VectorOp::kCopy:
      return run([](uint32_t x, uint32_t, uint32_t) { return Fp32Canonical(x); });
    default:
      return run([op](uint32_t x, uint32_t y, uint32_t o) { return VectorLane(op, x, y, o); });
  }
}

// A reduction over rows: lane by lane, row after row from the first.
void ReduceRows(const VectorInstr& v, uint16_t* buffer, int64_t n) {
  std::vector<uint32_t> acc(static_cast<size_t>(n)), x(static_cast<size_t>(n));
  for (uint32_t i = 0; i < v.rows; ++i) {
    LoadRow(buffer, n, v.a, i, v.a32, i == 0 ? acc.data() : x.data());
    if (i == 0) continue;
    for (int64_t l = 0; l < n; ++l) {
      uint32_t& s = acc[static_cast<size_t>(l)];
      s = v.op == hw::VectorOp::kRowMax ? Fp32Max(s, x[static_cast<size_t>(l)])
                                        : Fp32Add(s, x[static_cast<size_t>(l)]);
    }
  }
  StoreRow(buffer, n, v.out, 0, v.o32, acc.data());
}

}  // namespace

void VectorRun(const VectorInstr& v, uint16_t* buffer, int64_t n) {
  const hw::VectorKind kind = hw::Info(v.op).kind;
  if (kind == hw::VectorKind::kRows) {
    ReduceRows(v, buffer, n);
    return;
  }
  const auto size = static_cast<size_t>(n);
  std::vector<uint32_t> a(size), b(size, 0), old(size, 0), row(size);
  const bool binary = kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect;
  for (uint32_t i = 0; i < v.rows; ++i) {
    LoadRow(buffer, n, v.a, i, v.a32, a.data());
    if (binary) LoadRow(buffer, n, v.b, v.bcast ? 0 : i, v.b32, b.data());
    if (kind == hw::VectorKind::kSelect) LoadRow(buffer, n, v.out, i, v.o32, old.data());
    if (kind == hw::VectorKind::kLanes) {
      const uint32_t r = v.op == hw::VectorOp::kLaneMax
                             ? Fp32TreeMax(a.data(), static_cast<int>(n))
                             : Fp32TreeSum(a.data(), static_cast<int>(n));
      std::fill(row.begin(), row.end(), r);
    } else {
      RowOf(v.op, n, a.data(), b.data(), old.data(), row.data());
    }
    StoreRow(buffer, n, v.out, i, v.o32, row.data());
  }
}

}  // namespace tpu::arith
