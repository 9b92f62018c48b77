// The VPU's function tables (activate fn=sigmoid|tanh, docs/vpu.md): the requantized int8
// value q stands for x = q / input_step, and the table gives round(output_scale f(x)). The
// tables are generated from contract/tpu_contract.toml (one home), so the RTL, the fast
// engine and the CPU references look up the same bytes.
#pragma once

#include <cstdint>

#include "contract/tpu_contract.h"

namespace tpu::arith {

enum class VpuFunction : uint8_t { kNone, kSigmoid, kTanh };

// The function an activate's flags select.
inline VpuFunction VpuFunctionOfFlags(uint8_t flags) {
  return (flags & hw::kFlagSigmoid) ? VpuFunction::kSigmoid
         : (flags & hw::kFlagTanh)  ? VpuFunction::kTanh
                                    : VpuFunction::kNone;
}

// The table of `f` (entry q + 128), or nullptr for none.
inline const int8_t* VpuFunctionTable(VpuFunction f) {
  switch (f) {
    case VpuFunction::kSigmoid:
      return hw::kVpuTableSigmoid.data();
    case VpuFunction::kTanh:
      return hw::kVpuTableTanh.data();
    case VpuFunction::kNone:
      break;
  }
  return nullptr;
}

inline int8_t ApplyVpuFunction(VpuFunction f, int8_t q) {
  const int8_t* table = VpuFunctionTable(f);
  return table ? table[q + 128] : q;
}

}  // namespace tpu::arith
