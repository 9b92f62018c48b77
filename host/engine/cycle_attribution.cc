// Per-layer attribution of a run's counters (see cycle_attribution.h).
#include "host/engine/cycle_attribution.h"

#include <fmt/format.h>

#include <algorithm>

#include "host/common/errors.h"

namespace tpu::engine {

CycleAttribution::CycleAttribution(int rows, int n, int element_bytes, int sublanes)
    : n_(n),
      element_bytes_(element_bytes),
      sublanes_(std::max(sublanes, 1)),
      rows_(static_cast<size_t>(std::max(rows, 1))),
      mxu_rows_(rows_.size(), MxuCycles{}) {}

void CycleAttribution::SetRowOf(std::vector<int32_t> row_of) {
  // Instructions without a row take the next one's (the parameter loads before a layer),
  // the last ones the row before them (the final halt).
  int32_t next = -1;
  for (auto it = row_of.rbegin(); it != row_of.rend(); ++it) {
    if (*it >= 0) next = *it;
    if (*it < 0) *it = next;
  }
  int32_t prev = 0;
  for (int32_t& r : row_of) {
    if (r < 0) r = prev;
    prev = r;
  }
  row_of_ = std::move(row_of);
}

int CycleAttribution::RowOf(uint64_t pc) const {
  if (row_of_.empty()) return 0;
  const uint64_t i = std::min<uint64_t>(pc, row_of_.size() - 1);
  return std::clamp(row_of_[i], 0, static_cast<int>(rows_.size()) - 1);
}

void CycleAttribution::BeginRun(const isa::Program& program, const std::string&) {
  run_.assign(rows_.size(), hw::ChipCounters{});
  mxu_run_.assign(rows_.size(), MxuCycles{});
  OpcodesAndUnits(program, &opcodes_, &units_of_);
  fired_ = 0;
  units_.assign(hw::kNumUnits, Open());
  mxus_.assign(kMaxMxus, Open());
  spans_.clear();
  AddEvents(program);
}

// The events of each instruction, from its operands (docs/architecture.md's counters; the
// rtl's and the fast engine's counts are these summed).
void CycleAttribution::AddEvents(const isa::Program& program) {
  const auto n = static_cast<uint64_t>(n_);
  const uint64_t row = n * static_cast<uint64_t>(element_bytes_);  // a row's bytes
  for (size_t pc = 0; pc < program.words.size(); ++pc) {
    const isa::Instruction in = isa::Decode(program.words[pc]);
    hw::ChipCounters& c = At(pc);
    const uint64_t len = in.length;
    c.instructions += 1;
    switch (in.opcode) {
      case hw::Opcode::kReadHost:
      case hw::Opcode::kReadHbm: {
        const auto rows = static_cast<uint64_t>(isa::ReadRows(in, element_bytes_));
        ((in.flags & hw::kFlagParams) ? c.param_writes : c.ub_writes) += rows;
        (in.opcode == hw::Opcode::kReadHbm ? c.weight_bytes_read : c.host_bytes_read) += rows * row;
        break;
      }
      case hw::Opcode::kWriteHost:
        c.ub_reads += len;
        c.host_bytes_written += len * row;
        break;
      case hw::Opcode::kWriteHbm:
        c.ub_reads += len;
        c.weight_bytes_written += len * row;
        break;
      case hw::Opcode::kReadWeights:
        c.weight_bytes_read += len * n * row;
        c.weight_fifo_pushes += len * n;
        break;
      case hw::Opcode::kLoadWeights:
        c.ub_reads += len * n;
        c.weight_fifo_pushes += len * n;
        break;
      case hw::Opcode::kMatmul:
        c.ub_reads += len;
        c.acc_writes += len;
        c.macs += len * n * n;
        if (in.flags & hw::kFlagSwitch) {
          c.weight_tiles += 1;
          c.weight_fifo_pops += n;
        }
        break;
      case hw::Opcode::kActivate: {
        // 2 x 2 pooling over rows: one pooling flag (both: over lanes, a row per row).
        const bool pooled = bool(in.flags & hw::kFlagPoolAvg) != bool(in.flags & hw::kFlagPoolMax);
        const uint64_t out = pooled ? len / 4 : len;
        c.acc_reads += len;
        c.vpu_rows_in += len;
        c.vpu_rows_out += out;
        c.ub_writes += out;
        if (in.flags & hw::kFlagResidual) c.ub_reads += len;
        break;
      }
      case hw::Opcode::kVector:
        AddVectorEvents(in, &c);
        break;
      default:
        break;
    }
  }
}

// A vector instruction's buffer rows (rtl/tpu_vector_unit.sv): a's, b's (a broadcast row
// once a group of sublanes rows), the result's old rows for select, the rows written.
void CycleAttribution::AddVectorEvents(const isa::Instruction& in, hw::ChipCounters* c) const {
  const auto op = static_cast<hw::VectorOp>(hw::kOpdVectorOp.Get(in.aux));
  if (static_cast<int>(op) >= hw::kNumVectorOps) return;
  const hw::VectorKind kind = hw::Info(op).kind;
  const uint64_t len = in.length, wa = in.flags & hw::kFlagA32 ? 2 : 1,
                 wb = in.flags & hw::kFlagB32 ? 2 : 1, wo = in.flags & hw::kFlagO32 ? 2 : 1;
  const uint64_t groups =
      (len + static_cast<uint64_t>(sublanes_) - 1) / static_cast<uint64_t>(sublanes_);
  c->ub_reads += len * wa;
  if (kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect)
    c->ub_reads += (in.flags & hw::kFlagBcast) ? groups * wb : len * wb;
  if (kind == hw::VectorKind::kSelect) c->ub_reads += len * wo;
  c->ub_writes += (kind == hw::VectorKind::kRows ? 1 : len) * wo;
}

void CycleAttribution::Cycles(uint64_t first, uint64_t count, const CycleObs& obs) {
  // A unit that has no more work ends its instruction (as the timeline sees it).
  for (int u = 0; u < hw::kNumUnits; ++u) {
    Open& o = units_[static_cast<size_t>(u)];
    if (o.open && !(obs.busy & (1u << u)) && first >= o.start) o.open = false;
  }
  auto working = [&](int unit) {
    const Open& o = units_[static_cast<size_t>(unit)];
    return o.open && o.start <= first;
  };
  // The cycle's instruction: the matrix unit's, the activation unit's, the oldest DMA's,
  // or the one the issue stage is at.
  uint64_t owner = fired_;
  if (working(hw::kUnitMatrix)) {
    owner = units_[hw::kUnitMatrix].pc;
  } else if (working(hw::kUnitActivate)) {
    owner = units_[hw::kUnitActivate].pc;
  } else if (working(hw::kUnitVector)) {
    owner = units_[hw::kUnitVector].pc;
  } else {
    for (int u : {hw::kUnitHostDma, hw::kUnitWeightDma})
      if (working(u)) owner = std::min(owner, units_[static_cast<size_t>(u)].pc);
  }
  auto unit_pc = [&](int unit) { return working(unit) ? units_[unit].pc : owner; };
  At(owner).cycles += count;
  const int row = RowOf(owner);
  if (!spans_.empty() && spans_.back().row == row && spans_.back().end == first) {
    spans_.back().end = first + count;
  } else {
    spans_.push_back({row, first, first + count});
  }
  At(unit_pc(hw::kUnitHostDma)).busy_host_dma += count * ((obs.busy >> hw::kUnitHostDma) & 1);
  At(unit_pc(hw::kUnitWeightDma)).busy_weight_dma += count * ((obs.busy >> hw::kUnitWeightDma) & 1);
  At(unit_pc(hw::kUnitMatrix)).busy_matrix += count * ((obs.busy >> hw::kUnitMatrix) & 1);
  At(unit_pc(hw::kUnitActivate)).busy_activate += count * ((obs.busy >> hw::kUnitActivate) & 1);
  At(unit_pc(hw::kUnitVector)).busy_vector += count * ((obs.busy >> hw::kUnitVector) & 1);
  AddMxuBusy(first, count, obs.mxus, owner);
  hw::ChipCounters& mxu = At(unit_pc(hw::kUnitMatrix));
  // The matrix unit's cycle class (hw::MxuCycle) and its counter.
  const uint8_t cls = std::min<uint8_t>(obs.obs & hw::kObsMxuMask, hw::kMxuIdle);
  mxu[hw::kMxuCycleCounter[cls]] += count;
  // TPU v1's categories of the cycles the matrix unit does not work (rtl/tpu_top.sv).
  if (cls == hw::kMxuDrain || cls == hw::kMxuIdle) {
    using hw::Issue;
    const auto issue = static_cast<Issue>(obs.issue);
    const bool raw = issue == Issue::kUbHazard || issue == Issue::kAccHazard ||
                     issue == Issue::kParamHazard || issue == Issue::kDrain;
    if ((obs.busy >> hw::kUnitHostDma) & 1) {
      mxu.wait_input += count;
    } else if ((obs.busy >> hw::kUnitVector) & 1) {
      mxu.wait_vector += count;
    } else if (raw) {
      mxu.wait_raw += count;
    } else {
      mxu.wait_non_matrix += count;
    }
  }
  if (obs.obs & hw::kObsHostMemStall) At(unit_pc(hw::kUnitHostDma)).host_mem_stall += count;
  if (obs.obs & hw::kObsWeightMemStall) At(unit_pc(hw::kUnitWeightDma)).weight_mem_stall += count;
  if (obs.obs & hw::kObsWeightDmaStallFifoFull)
    At(unit_pc(hw::kUnitWeightDma)).weight_dma_stall_fifo_full += count;
  const int issue_counter =
      obs.issue < hw::kIssueCounter.size() ? hw::kIssueCounter[obs.issue] : -1;
  if (obs.issue != static_cast<uint8_t>(hw::Issue::kFire)) {
    if (issue_counter >= 0) At(fired_)[issue_counter] += count;
    return;
  }
  for (uint64_t c = first; c < first + count; ++c) {  // instructions counted by AddEvents
    const uint64_t pc = fired_++;
    const uint8_t op = pc < opcodes_.size() ? opcodes_[pc] : 0;
    const int unit = op < hw::kOpcodeUnit.size() ? hw::kOpcodeUnit[op] : -1;
    if (unit >= 0) units_[static_cast<size_t>(unit)] = {true, pc, c + 1};
    if (unit == hw::kUnitMatrix)
      mxus_[std::min<size_t>(units_of_[pc], kMaxMxus - 1)] = {true, pc, c + 1};
  }
}

// Each matrix unit's busy cycles (bits of `busy`) to the row of its matmul (else of `owner`,
// the cycle's instruction).
void CycleAttribution::AddMxuBusy(uint64_t first, uint64_t count, uint8_t busy, uint64_t owner) {
  for (size_t m = 0; m < mxus_.size(); ++m) {
    Open& o = mxus_[m];
    if (o.open && !(busy & (1u << m)) && first >= o.start) o.open = false;
    if (!(busy & (1u << m))) continue;
    const uint64_t pc = o.open && o.start <= first ? o.pc : owner;
    mxu_run_[static_cast<size_t>(RowOf(pc))][m] += count;
  }
}

void CycleAttribution::EndRun(uint64_t) {
  for (size_t r = 0; r < rows_.size(); ++r) {
    rows_[r] += run_[r];
    for (size_t m = 0; m < mxu_rows_[r].size(); ++m) mxu_rows_[r][m] += mxu_run_[r][m];
  }
}

void CycleAttribution::Check(const hw::ChipCounters& total) const {
  hw::ChipCounters sum;
  for (const hw::ChipCounters& r : run_) sum += r;
  const int i = sum.FirstDifference(total);
  if (i >= 0) {
    throw RuntimeError(
        fmt::format("the per-layer attribution of counter '{}' adds up to {}, the chip counted {}",
                    hw::kCounterNames[static_cast<size_t>(i)], sum[i], total[i]));
  }
}

}  // namespace tpu::engine
