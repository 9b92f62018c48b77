// What the fast engine needs to know about the chip it models.
#pragma once

#include "contract/tpu_contract.h"

namespace tpu::fast {

// The config's chip fields (hw::ChipParams, generated from contract/tpu_contract.toml)
// and what the config does not set: the instruction queue's depth, tpu_top's IqDepth.
struct ChipParams : hw::ChipParams {
  int iq_depth = 16;
};

}  // namespace tpu::fast
