// See lower_ops.h: the sigmoid and tanh tables.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "arith/format.h"
#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/lower/lowering.h"

namespace tpu::compiler::lower {
namespace {

// The input through the identity tile; its activates requantize each value to the table's
// input step (the layer's multiplier and shift) and look it up (activate fn=, docs/vpu.md);
// an int8 chip's vector unit only (a bf16 chip's has no tables).
void LowerTable(Lowering& lw, int i, isa::Fn fn) {
  LoweredGraph& g = lw.graph();
  const nn::Layer& l = lw.L(i);
  const std::string what = l.TypeName() + " '" + l.name + "'";
  if (lw.bf16()) {
    lw.No(what +
          " runs on int8 chips only: a bf16 chip's vector unit has no function tables "
          "(docs/vpu.md)");
    return;
  }
  GraphOp op = lw.NewOp(OpKind::kResidual, i);
  const int a = lw.TensorOf(l.inputs[0]);
  if (g.tensors[static_cast<size_t>(a)].packed) {
    lw.No(what +
          " reads the model's input directly; the chip looks up maps that an operation "
          "wrote");
    return;
  }
  const GraphTensor in = g.tensors[static_cast<size_t>(a)];
  op.inputs = {a};
  op.fn = fn;
  IdentityPass(lw, in, &op);
  const arith::Int8Format::Channel c{0, l.q.multiplier[0], l.q.shift[0]};
  lw.Params<arith::Int8Format>(
      op, std::vector<arith::Int8Format::Channel>(static_cast<size_t>(in.c), c));
  op.output = lw.NewTensor(in.h, in.w, in.c, fn == isa::Fn::kSigmoid);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace

void LowerSigmoid(Lowering& lw, int i) { LowerTable(lw, i, isa::Fn::kSigmoid); }

void LowerTanh(Lowering& lw, int i) { LowerTable(lw, i, isa::Fn::kTanh); }

}  // namespace tpu::compiler::lower
