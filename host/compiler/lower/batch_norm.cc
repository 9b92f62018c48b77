// See lower_ops.h: batch normalization, which a chip runs folded.
#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"
#include "host/nn/ops/op.h"

namespace tpu::compiler::lower {

// A batch_norm layer of its own is a model for training; the chip runs it folded into the
// layer before it (nn::FoldBatchNorms), as the importer folds it by default.
void LowerBatchNorm(Lowering& lw, int i) { lw.No(nn::ops::BatchNormOnChip(lw.L(i))); }

}  // namespace tpu::compiler::lower
