// Small text formatting helpers shared by the reports.
#pragma once

#include <cstdint>
#include <string>

namespace tpu {

// 1234567 -> "1,234,567".
inline std::string Grouped(int64_t v) {
  std::string s = std::to_string(v);
  const int first = v < 0 ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > first; i -= 3) {
    s.insert(static_cast<size_t>(i), ",");
  }
  return s;
}

}  // namespace tpu
