// The table of operations (op.h): one line per operation.
#include <algorithm>
#include <stdexcept>

#include "host/nn/ops/op.h"

namespace tpu::nn::ops {

const std::vector<const OpDef*>& AllOps() {
  static const std::vector<const OpDef*> ops = [] {
    std::vector<const OpDef*> v = {&Conv2dOp(), &AvgPoolOp(), &MaxPoolOp(), &FlattenOp(),
                                   &DenseOp(),  &AddOp(),     &ConcatOp()};
    for (size_t i = 0; i < v.size(); ++i)  // in LayerType's order, so Op() is an index
      if (static_cast<size_t>(v[i]->type) != i) throw std::logic_error("ops: table out of order");
    return v;
  }();
  return ops;
}

const OpDef& Op(LayerType t) { return *AllOps().at(static_cast<size_t>(t)); }

float KeepScale(Layer* /*l*/, const std::vector<float>& in_scales, float /*range*/) {
  return in_scales[0];
}

void CopyInt8(const Layer& l, const std::vector<const int8_t*>& xs,
              const std::vector<int>& /*channels*/, int8_t* y) {
  std::copy_n(xs[0], l.out.Size(), y);
}

}  // namespace tpu::nn::ops
