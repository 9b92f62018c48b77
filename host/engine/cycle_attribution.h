// Every counter of a run attributed to rows, the layers of a whole-network program
// (docs/timing.md, "Per-layer attribution"): each instruction belongs to a row (program
// metadata, not in the ISA), and
//   - the events (MACs, buffer and memory traffic, tiles, rows through the VPU, ...) go to
//     the row of the instruction that makes them: they follow from its operands alone;
//   - each cycle goes to one row: that of the matmul the matrix unit works on, else of the
//     activate the activation unit works on, else of the vector instruction the vector unit
//     works on, else of the oldest instruction a DMA unit works on, else of the instruction
//     the issue stage is at;
//   - a unit's busy cycles go to the instruction it works on (each matrix unit's to its own
//     matmul: MxuBusy); the issue stage's waits to the
//     instruction that waits; the matrix unit's cycle classes to its matmul (else to the
//     cycle's row); memory stalls to the DMA instruction that waits.
// Both engines report the same cycles (cycle_observer.h), so both give the same rows, and
// the rows add up to the run's counters exactly (Check()).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/engine/cycle_observer.h"

namespace tpu::engine {

class CycleAttribution : public CycleObserver {
 public:
  // `rows` rows on an N x N chip.
  // n: the array size; element_bytes: an operand's bytes (1 int8, 2 bf16); sublanes: the
  // vector unit's rows a cycle (a broadcast operand is read once a group of them).
  CycleAttribution(int rows, int n, int element_bytes = 1, int sublanes = 1);
  // The rows of the next run's instructions, one per instruction (-1: the row of the next
  // instruction that has one, else of the last one before it).
  void SetRowOf(std::vector<int32_t> row_of);

  void BeginRun(const isa::Program& program, const std::string& label) override;
  void Cycles(uint64_t first, uint64_t count, const CycleObs& obs) override;
  void EndRun(uint64_t cycles) override;

  // Per row, over every run observed.
  const std::vector<hw::ChipCounters>& Rows() const { return rows_; }
  // Per row, over every run observed: the cycles each matrix unit had work (mxu_busy_o) on
  // the row's matmuls.
  using MxuCycles = std::array<uint64_t, kMaxMxus>;
  const std::vector<MxuCycles>& MxuBusy() const { return mxu_rows_; }
  // The last run's cycles as spans of one row each, in order (for the timeline).
  struct Span {
    int row = 0;
    uint64_t start = 0, end = 0;
  };
  const std::vector<Span>& Spans() const { return spans_; }
  // Throws RuntimeError unless the rows of the last run add up to `total` (its counters),
  // naming the first counter that differs.
  void Check(const hw::ChipCounters& total) const;

 private:
  int RowOf(uint64_t pc) const;
  void AddEvents(const isa::Program& program);
  void AddMxuBusy(uint64_t first, uint64_t count, uint8_t busy, uint64_t owner);
  hw::ChipCounters& At(uint64_t pc) { return run_[static_cast<size_t>(RowOf(pc))]; }
  void AddVectorEvents(const isa::Instruction& in, hw::ChipCounters* c) const;

  int n_;
  int element_bytes_;
  int sublanes_;
  std::vector<hw::ChipCounters> rows_, run_;
  std::vector<MxuCycles> mxu_rows_, mxu_run_;
  std::vector<int32_t> row_of_;
  std::vector<uint8_t> opcodes_, units_of_;  // each instruction's opcode, its matrix unit
  uint64_t fired_ = 0;
  struct Open {
    bool open = false;
    uint64_t pc = 0, start = 0;
  };
  std::vector<Open> units_, mxus_;  // by unit (hw::kUnit*), by matrix unit
  std::vector<Span> spans_;
};

}  // namespace tpu::engine
