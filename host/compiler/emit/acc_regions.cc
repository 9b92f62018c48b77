// See acc_regions.h.
#include "host/compiler/emit/acc_regions.h"

namespace tpu::compiler::emit {

int64_t AccRegions::Region(int regions, int64_t rows, bool short_pass) {
  const int64_t size = 2 * s_.half / regions;
  std::vector<Range>& recent = recent_[static_cast<size_t>(s_.unit)];
  int64_t& seq = seq_[static_cast<size_t>(s_.unit)];
  auto clear = [&](int64_t at, int passes) {  // of the last `passes` passes' rows
    const Range r{at, at + rows};
    for (int b = 0; b < passes && b < static_cast<int>(recent.size()); ++b)
      if (r.Overlaps(recent[recent.size() - 1 - static_cast<size_t>(b)])) return false;
    return true;
  };
  if (short_pass && !recent.empty()) {
    const int64_t after = recent.back().hi, at = after + rows <= 2 * s_.half ? after : 0;
    if (clear(at, 2)) return Take({at, at + rows});
  }
  int64_t k = seq % regions;
  bool found = false;
  for (int passes = regions - 1; passes >= 1 && !found; --passes)
    for (int t = 0; t < regions && !found; ++t)
      if (clear((seq + t) % regions * size, passes)) {
        k = (seq + t) % regions;
        found = true;
      }
  seq = k + 1;
  return Take({k * size, k * size + rows});
}

int64_t AccRegions::Take(const Range& r) {
  std::vector<Range>& recent = recent_[static_cast<size_t>(s_.unit)];
  recent.push_back(r);
  if (recent.size() > 2) recent.erase(recent.begin());
  return r.lo;
}

}  // namespace tpu::compiler::emit
