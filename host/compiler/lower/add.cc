// See lower_ops.h: adds.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

void LowerAdd(Lowering& lw, int i) {
  const nn::Layer& l = lw.L(i);
  if (lw.bf16() && l.activation == nn::Activation::kRelu6) {
    lw.No("add '" + l.name +
          "' ends in ReLU6, which a bf16 chip's residual add does not apply (it applies ReLU "
          "or nothing; docs/bf16.md)");
    return;
  }
  if (lw.Fused(i)) return;
  LowerResidualJoin(lw, i, /*product=*/false, "add", "adds");
}

}  // namespace tpu::compiler::lower
