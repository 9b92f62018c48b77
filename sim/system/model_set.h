// Which RTL models this build has: every one configured, or only some presets' (make demo).
#pragma once

#include <string>

namespace tpu::sim {

// The presets whose RTL alone this build has (CMake TPUSIM_RTL_ONLY, set by make demo's
// first build), as configured ("small-16"); empty in a build of every model.
std::string RtlOnlyPresets();

// In a build of some presets' RTL only, throws std::invalid_argument saying that `what` (as
// "a 16 x 16 matrix unit") has no RTL model here, and how to build every model (make build)
// (make build), or `otherwise` (null: nothing else). Does nothing in a build of every model.
void RefuseIfRtlOnly(const std::string& what,
                     const char* otherwise = "run it on the fast engine (--engine fast)");

}  // namespace tpu::sim
