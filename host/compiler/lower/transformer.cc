// See lower_ops.h: a transformer's operations (host/nn/ops/views.cc, matmul.cc,
// normalize.cc, gelu.cc), which the chips do not run yet: each lowering ends saying so.
#include <string>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {
namespace {

void NotOnChips(Lowering& lw, int i) {
  const nn::Layer& l = lw.L(i);
  lw.No(l.TypeName() + " '" + l.name +
        "' is a transformer's operation, which tpusim runs on the CPU only so far (tpusim "
        "infer --backend cpu-fp32, or cpu-bf16 for the chip's rules; docs/transformers.md)");
}

}  // namespace

void LowerReshape(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerTranspose(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerSlice(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerMatMul(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerSoftmax(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerLayerNorm(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerGelu(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerAddConstant(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerPrepend(Lowering& lw, int i) { NotOnChips(lw, i); }
void LowerEmbedding(Lowering& lw, int i) { NotOnChips(lw, i); }

}  // namespace tpu::compiler::lower
