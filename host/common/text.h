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

// A CSV field as RFC 4180 writes it: in double quotes (each quote doubled) where it holds a
// comma, a quote or a line break, else as it is.
inline std::string CsvQuoted(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace tpu
