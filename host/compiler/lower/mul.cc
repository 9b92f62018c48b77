// See lower_ops.h: elementwise products.
#include <cstdint>
#include <utility>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {

// The first input through the identity tile, the second as the residual that the activate
// multiplies by (set_residual with `product`: clamp((y r m + 2^(s-1)) >> s), docs/isa.md);
// an int8 chip's vector unit only (a bf16 chip's controller refuses the product).
void LowerMul(Lowering& lw, int i) {
  const nn::Layer& l = lw.L(i);
  if (lw.bf16()) {
    lw.No("mul '" + l.name +
          "' runs on int8 chips only: a bf16 chip's vector unit adds a residual but does not "
          "multiply by one (docs/bf16.md)");
    return;
  }
  LowerResidualJoin(lw, i, /*product=*/true, "mul", "multiplies");
}

}  // namespace tpu::compiler::lower
