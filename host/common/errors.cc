// Field markers in error messages (see errors.h).
#include "host/common/errors.h"

namespace tpu {
namespace {
constexpr char kMark = '\x1f';  // ASCII unit separator: never in a message's own text
}  // namespace

std::string Field(std::string_view name) {
  return std::string(1, kMark) + std::string(name) + std::string(1, kMark);
}

std::string ShowFields(std::string_view marked,
                       const std::function<std::string(std::string_view)>& show) {
  std::string out;
  size_t at = 0;
  while (at < marked.size()) {
    const size_t open = marked.find(kMark, at);
    const size_t close = open == std::string_view::npos ? open : marked.find(kMark, open + 1);
    if (close == std::string_view::npos) {
      out += marked.substr(at);
      break;
    }
    out += marked.substr(at, open - at);
    out += show(marked.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  return out;
}

std::string PlainText(std::string_view marked) {
  return ShowFields(marked, [](std::string_view f) { return std::string(f); });
}

Error::Error(const std::string& marked) : std::runtime_error(PlainText(marked)), marked_(marked) {}

}  // namespace tpu
