// Which RTL models this build has (TPUSIM_RTL_ONLY is defined for this file alone, so that
// changing it recompiles only this file and the registries).
#include "sim/system/model_set.h"

#include <stdexcept>

namespace tpu::sim {

std::string RtlOnlyPresets() { return TPUSIM_RTL_ONLY; }

void RefuseIfRtlOnly(const std::string& what, const char* otherwise) {
  const std::string only = RtlOnlyPresets();
  if (only.empty()) return;
  throw std::invalid_argument("no RTL model of " + what + " in this build: it has the RTL of " +
                              only + " only (make demo's first build); `make build` builds " +
                              "every model" + (otherwise ? std::string(", or ") + otherwise : ""));
}

}  // namespace tpu::sim
