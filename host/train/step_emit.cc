// See step_emit.h.
#include "host/train/step_emit.h"

#include <fmt/format.h>

#include <algorithm>

#include "host/common/errors.h"
#include "host/train/dense_reference.h"
#include "host/train/step_image.h"

namespace tpu::train {

using hw::VectorOp;
using isa::ProgramBuilder;

namespace {
uint64_t HostAddr(int n, int64_t row) { return static_cast<uint64_t>(row) * 2 * n; }
uint64_t Piece(int64_t rows, int64_t r0) {
  return static_cast<uint64_t>(std::min<int64_t>(ProgramBuilder::kMaxLength, rows - r0));
}
}  // namespace

void EmitReadHost(ProgramBuilder& p, int n, int64_t host_row, int64_t ub, int64_t rows) {
  for (int64_t r0 = 0; r0 < rows; r0 += ProgramBuilder::kMaxLength)
    p.ReadHost(HostAddr(n, host_row + r0), static_cast<uint64_t>(ub + r0), Piece(rows, r0));
}

void EmitWriteHost(ProgramBuilder& p, int n, int64_t ub, int64_t host_row, int64_t rows) {
  for (int64_t r0 = 0; r0 < rows; r0 += ProgramBuilder::kMaxLength)
    p.WriteHost(static_cast<uint64_t>(ub + r0), HostAddr(n, host_row + r0), Piece(rows, r0));
}

void CheckTrainingCores(const config::TpuConfig& config, int cores, int batch) {
  if (cores < 1 || cores > std::min(kMaxTrainingCores, config.cores)) {
    throw UsageError(fmt::format(
        "--cores {}: config '{}' has {} core{}; a training step runs on {}", cores, config.name,
        config.cores, config.cores == 1 ? "" : "s",
        config.cores == 1 ? "core 0 alone (--cores 1)" : "1 or 2 of them (--cores 1 or 2)"));
  }
  if (batch % cores != 0) {
    throw UsageError(fmt::format(
        "--batch {} on {} cores: each core takes an equal share of the batch; give a multiple "
        "of {} (e.g. --batch {})",
        batch, cores, cores, (batch / cores + 1) * cores));
  }
}

int TrainingCores(const config::TpuConfig& config, int asked) {
  return asked != 0 ? asked : std::min(kMaxTrainingCores, config.cores);
}

void EmitGradientSum(ProgramBuilder& p, int n, int core, int64_t g, int64_t other, int64_t rows,
                     uint64_t hbm) {
  const uint64_t slot = static_cast<uint64_t>(rows) * 2 * n;
  for (int64_t r0 = 0; r0 < rows; r0 += ProgramBuilder::kMaxLength)
    p.WriteHbm(static_cast<uint64_t>(g + r0),
               hbm + static_cast<uint64_t>(core) * slot + HostAddr(n, r0), Piece(rows, r0));
  p.Barrier(3);
  for (int64_t r0 = 0; r0 < rows; r0 += ProgramBuilder::kMaxLength)
    p.ReadHbm(hbm + static_cast<uint64_t>(1 - core) * slot + HostAddr(n, r0),
              static_cast<uint64_t>(other + r0), Piece(rows, r0));
  EmitVector(p, VectorOp::kAdd, g, other, g, rows, 0);
}

void EmitLossMean(ProgramBuilder& p, const LossRows& r, int64_t b) {
  EmitVector(p, VectorOp::kRowSum, r.loss, 0, r.mean, b, kA32 | kO32);
  EmitVector(p, VectorOp::kMul, r.mean, r.inv_batch, r.mean, 1, kA32 | kB32 | kO32);
}

namespace {

// EmitSoftmaxLoss over r.blocks blocks of classes: the maximum (each block's lane_max, then
// vector max block after block, in recip's rows), the picked logit (each block's select into
// one row), the sum (each block's lane_sum, added block after block).
void SoftmaxLossOfBlocks(ProgramBuilder& p, const LossRows& r, int64_t b, bool mean) {
  auto vec = [&p](VectorOp op, int64_t a, int64_t x, int64_t out, int64_t rows, int flags) {
    EmitVector(p, op, a, x, out, rows, flags);
  };
  auto sm = [&r](int64_t k) { return r.sm + k * r.sm_stride; };
  auto y = [&r](int64_t k) { return r.y + k * r.y_stride; };
  for (int64_t k = 0; k < r.blocks; ++k) {
    vec(VectorOp::kAdd, r.logits + k * r.logits_stride, r.pad + 2 * k, sm(k), b,
        kB32 | kO32 | kBcast);
    vec(VectorOp::kLaneMax, sm(k), 0, k == 0 ? r.mx : r.recip, b, kA32 | kO32);
    if (k > 0) vec(VectorOp::kMax, r.mx, r.recip, r.mx, b, kA32 | kB32 | kO32);
  }
  vec(VectorOp::kMul, y(0), r.zero, r.pick, b, kO32 | kBcast);
  for (int64_t k = 0; k < r.blocks; ++k) {
    vec(VectorOp::kSub, sm(k), r.mx, sm(k), b, kA32 | kB32 | kO32);
    vec(VectorOp::kSelect, y(k), sm(k), r.pick, b, kB32 | kO32);
  }
  vec(VectorOp::kLaneSum, r.pick, 0, r.pick, b, kA32 | kO32);
  for (int64_t k = 0; k < r.blocks; ++k) {
    vec(VectorOp::kExp, sm(k), 0, sm(k), b, kA32 | kO32);
    vec(VectorOp::kLaneSum, sm(k), 0, k == 0 ? r.sum : r.recip, b, kA32 | kO32);
    if (k > 0) vec(VectorOp::kAdd, r.sum, r.recip, r.sum, b, kA32 | kB32 | kO32);
  }
  vec(VectorOp::kLog, r.sum, 0, r.loss, b, kA32 | kO32);
  vec(VectorOp::kSub, r.loss, r.pick, r.loss, b, kA32 | kB32 | kO32);
  if (mean) EmitLossMean(p, r, b);
  vec(VectorOp::kRecip, r.sum, 0, r.recip, b, kA32 | kO32);
  for (int64_t k = 0; k < r.blocks; ++k) {
    vec(VectorOp::kMul, sm(k), r.recip, sm(k), b, kA32 | kB32 | kO32);
    vec(VectorOp::kSub, sm(k), y(k), sm(k), b, kA32 | kO32);
    vec(VectorOp::kMul, sm(k), r.inv_batch, r.dz + k * r.dz_stride, b, kA32 | kB32 | kBcast);
  }
}

}  // namespace

void EmitSoftmaxLoss(ProgramBuilder& p, const LossRows& r, int64_t b, bool mean) {
  if (r.blocks > 1) return SoftmaxLossOfBlocks(p, r, b, mean);
  auto vec = [&p](VectorOp op, int64_t a, int64_t x, int64_t out, int64_t rows, int flags) {
    EmitVector(p, op, a, x, out, rows, flags);
  };
  vec(VectorOp::kAdd, r.logits, r.pad, r.sm, b, kB32 | kO32 | kBcast);
  vec(VectorOp::kLaneMax, r.sm, 0, r.mx, b, kA32 | kO32);
  vec(VectorOp::kSub, r.sm, r.mx, r.sm, b, kA32 | kB32 | kO32);
  vec(VectorOp::kMul, r.y, r.zero, r.pick, b, kO32 | kBcast);
  vec(VectorOp::kSelect, r.y, r.sm, r.pick, b, kB32 | kO32);
  vec(VectorOp::kLaneSum, r.pick, 0, r.pick, b, kA32 | kO32);
  vec(VectorOp::kExp, r.sm, 0, r.sm, b, kA32 | kO32);
  vec(VectorOp::kLaneSum, r.sm, 0, r.sum, b, kA32 | kO32);
  vec(VectorOp::kLog, r.sum, 0, r.loss, b, kA32 | kO32);
  vec(VectorOp::kSub, r.loss, r.pick, r.loss, b, kA32 | kB32 | kO32);
  if (mean) EmitLossMean(p, r, b);
  vec(VectorOp::kRecip, r.sum, 0, r.recip, b, kA32 | kO32);
  vec(VectorOp::kMul, r.sm, r.recip, r.sm, b, kA32 | kB32 | kO32);
  vec(VectorOp::kSub, r.sm, r.y, r.sm, b, kA32 | kO32);
  vec(VectorOp::kMul, r.sm, r.inv_batch, r.dz, b, kA32 | kB32 | kBcast);
}

void CheckTrainingChip(const config::TpuConfig& config) {
  if (config.dtype == hw::Dtype::kBf16) return;
  throw UsageError(fmt::format(
      "config '{}' is an int8 chip: training needs float32 sums and the float32 vector unit "
      "of a bf16 chip (tpu-v2, tpu-v3, tpu-v4, or --set dtype=bf16)",
      config.name));
}

void PutStepScalars(std::vector<uint16_t>* img, int n, const Optimizer& opt, int64_t step) {
  if (opt.kind != Optimizer::Kind::kAdam) return;
  const StepScalars k = ScalarsOfStep(opt, step);
  for (int j = 0; j < n; ++j) {
    PutFp32(img, 0, n, j, k.c1);
    PutFp32(img, 2, n, j, k.c2);
  }
}

void EmitUpdate(const Optimizer& opt, const UpdateRows& r, const VecFn& vec) {
  const int f3 = kA32 | kB32 | kO32;
  auto c = [&r](int i) { return r.consts + 2 * i; };
  if (opt.kind == Optimizer::Kind::kSgd) {
    vec(VectorOp::kMul, r.slot0, c(0), r.tmp, f3 | kBcast);
    vec(VectorOp::kAdd, r.tmp, r.g, r.slot0, kA32 | kO32);  // v = mu v + g
    vec(VectorOp::kMul, r.slot0, c(1), r.tmp, f3 | kBcast);
    vec(VectorOp::kSub, r.w, r.tmp, r.w, f3);  // w = w - lr v
    return;
  }
  const int64_t m = r.slot0, s = r.slot1;
  vec(VectorOp::kMul, m, c(0), r.tmp, f3 | kBcast);
  vec(VectorOp::kMul, r.g, c(1), r.tmp2, kB32 | kO32 | kBcast);
  vec(VectorOp::kAdd, r.tmp, r.tmp2, m, f3);  // m = b1 m + (1 - b1) g
  vec(VectorOp::kMul, s, c(2), r.tmp, f3 | kBcast);
  vec(VectorOp::kMul, r.g, r.g, r.tmp2, kO32);
  vec(VectorOp::kMul, r.tmp2, c(3), r.tmp2, f3 | kBcast);
  vec(VectorOp::kAdd, r.tmp, r.tmp2, s, f3);  // s = b2 s + (1 - b2) g^2
  vec(VectorOp::kRsqrt, s, 0, r.tmp, kA32 | kO32);
  vec(VectorOp::kRecip, r.tmp, 0, r.tmp, kA32 | kO32);  // sqrt(s), 0 at 0
  vec(VectorOp::kMul, r.tmp, r.scalars + 2, r.tmp, f3 | kBcast);
  vec(VectorOp::kAdd, r.tmp, c(4), r.tmp, f3 | kBcast);  // sqrt(s / (1 - b2^t)) + eps
  vec(VectorOp::kRecip, r.tmp, 0, r.tmp, kA32 | kO32);
  vec(VectorOp::kMul, m, r.tmp, r.tmp, f3);
  vec(VectorOp::kMul, r.tmp, r.scalars, r.tmp, f3 | kBcast);
  vec(VectorOp::kSub, r.w, r.tmp, r.w, f3);  // w = w - c1 m / (...)
}

int PassLog::Name(const std::string& name, int64_t macs) {
  const auto at = std::find(names_.begin(), names_.end(), name);
  if (at != names_.end()) {  // its MACs where it had none yet (started before they were known)
    const size_t k = static_cast<size_t>(at - names_.begin());
    if (macs_[k] == 0) macs_[k] = macs;
    return static_cast<int>(k);
  }
  names_.push_back(name);
  macs_.push_back(macs);
  return static_cast<int>(names_.size()) - 1;
}

std::vector<int32_t> PassLog::PassOf(size_t instructions) const {
  std::vector<int32_t> of(instructions, 0);
  for (size_t i = 0; i < runs_.size(); ++i) {  // each run up to the next one's start
    const size_t end =
        i + 1 < runs_.size() ? std::min(runs_[i + 1].start, instructions) : instructions;
    for (size_t w = runs_[i].start; w < end; ++w) of[w] = runs_[i].pass;
  }
  for (const Run& r : filled_)
    for (size_t w = r.start; w < r.end; ++w) of[w] = r.pass;
  return of;
}

}  // namespace tpu::train
