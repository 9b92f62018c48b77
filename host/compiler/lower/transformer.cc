// See lower_ops.h: a transformer's operations (host/nn/ops/views.cc, matmul.cc,
// normalize.cc, gelu.cc), which run as a compiler::TransformerProgram (tpusim run), not
// through the graph lowering: each lowering ends saying so, for the commands that lower.
#include <string>

#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {
namespace {

void NotOnChips(Lowering& lw, int i) {
  const nn::Layer& l = lw.L(i);
  lw.No(l.TypeName() + " '" + l.name +
        "' is a transformer's operation: tpusim run runs transformers on a bf16 chip as "
        "their own program; this command does not take them yet (docs/transformers.md, \"On "
        "the chip\")");
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
