// The register map of tpu_top (rtl/tpu_pkg.sv): status, build parameters and performance
// counters, read through reg_addr_i / reg_data_o. Same order as the RTL.
#pragma once

#include <array>
#include <cstdint>

namespace tpu::sim {

inline constexpr int kRegStatus = 0;
inline constexpr int kRegHalted = 1;
inline constexpr int kRegErrorPc = 2;
inline constexpr int kRegRetired = 3;
inline constexpr int kRegArrayDim = 4;
inline constexpr int kRegAccDepth = 5;
inline constexpr int kRegUbDepth = 6;
inline constexpr int kRegWfifoTiles = 7;
inline constexpr int kRegParamSets = 8;
inline constexpr int kRegIqDepth = 9;
inline constexpr int kRegFirstCounter = 16;

// Status register values (status_e).
inline constexpr std::array<const char*, 5> kStatusNames = {
    "ok", "invalid-opcode", "address-out-of-range", "buffer-overflow", "bad-operand"};
inline constexpr std::array<const char*, 5> kStatusText = {
    "ok",
    "invalid opcode (above 0x07)",
    "an address outside its memory",
    "a transfer that runs past the end of its memory",
    "a bad operand (zero length, a reserved flag, or pooling rows not a multiple of 4)"};

// Counter names, in register order (RegFirstCounter + index); units in docs/architecture.md.
inline constexpr std::array<const char*, 34> kCounterNames = {
    "cycles",
    "busy_host_dma",
    "busy_weight_dma",
    "busy_matrix",
    "busy_activate",
    "mxu_stream_cycles",
    "mxu_load_cycles",
    "mxu_stall_weights",
    "mxu_drain_cycles",
    "mxu_idle_cycles",
    "issue_wait_instruction",
    "issue_stall_unit_busy",
    "issue_stall_ub_hazard",
    "issue_stall_acc_hazard",
    "issue_stall_param_hazard",
    "issue_stall_drain",
    "weight_dma_stall_fifo_full",
    "host_mem_stall",
    "weight_mem_stall",
    "ub_reads",
    "ub_writes",
    "acc_reads",
    "acc_writes",
    "weight_fifo_pushes",
    "weight_fifo_pops",
    "weight_tiles",
    "param_writes",
    "host_bytes_read",
    "host_bytes_written",
    "weight_bytes_read",
    "macs",
    "vpu_rows_in",
    "vpu_rows_out",
    "instructions",
};

// issue_e: what the controller's issue stage did.
inline constexpr std::array<const char*, 8> kIssueText = {
    "waiting for an instruction",
    "issuing",
    "waiting for its unit to finish the previous instruction",
    "waiting for unified-buffer rows another unit still uses",
    "waiting for accumulator rows another unit still uses",
    "waiting for a VPU parameter set another unit still uses",
    "waiting for every unit to finish (sync/halt)",
    "halted"};

inline constexpr std::array<const char*, 4> kUnitNames = {"host DMA", "weight DMA",
                                                          "matrix unit", "activation unit"};

}  // namespace tpu::sim
