// Weight-tile and parameter-set layouts (see packing.h).
#include "host/compiler/packing.h"

namespace tpu::compiler {

std::vector<arith::Int8Format::Channel> Int8Channels(const int32_t* bias, const int32_t* multiplier,
                                                     const int32_t* shift, int64_t channels) {
  std::vector<arith::Int8Format::Channel> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    out[static_cast<size_t>(c)] = {bias[c], multiplier[c], shift[c]};
  return out;
}

}  // namespace tpu::compiler
