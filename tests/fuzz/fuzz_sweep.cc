// Sweep specs (tpusim sweep SPEC): host/sweep/sweep_spec.h. Small grids are expanded too
// (every point resolved and validated).
#include "host/sweep/sweep_spec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "sweep.json");
  fuzz::ExpectNormalErrors([&] {
    const sweep::SweepSpec s = sweep::LoadSweepSpec(path);
    if (s.NumPoints() <= 64) {
      const auto points = sweep::ExpandPoints(s);
      fuzz::Check(static_cast<int64_t>(points.size()) == s.NumPoints(), "grid size mismatch");
    }
  });
  return 0;
}
