// Reading SCALE-Sim topology CSV files (see topology_csv.h).
#include "host/compiler/topology_csv.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "host/common/errors.h"

namespace tpu::compiler {
namespace {

constexpr const char* kColumns[] = {"Layer name",   "IFMAP Height", "IFMAP Width", "Filter Height",
                                    "Filter Width", "Channels",     "Num Filter",  "Strides"};
constexpr int kNumColumns = 8;

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(Trim(f));
  while (!fields.empty() && fields.back().empty()) fields.pop_back();  // trailing commas
  return fields;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<TopologyLayer> ReadTopologyCsv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("cannot read topology file '{}'", path));
  const std::string expected =
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num "
      "Filter, Strides";
  std::vector<TopologyLayer> layers;
  std::string line;
  int line_no = 0;
  bool header = false;
  while (std::getline(f, line)) {
    ++line_no;
    const std::vector<std::string> fields = SplitCsv(line);
    if (fields.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, line_no);
    if (!header) {
      if (fields.size() < kNumColumns || Lower(fields[0]) != "layer name") {
        throw UsageError(fmt::format(
            "{}: not a SCALE-Sim topology file: the first line must be the header '{},' (a "
            "GEMM list 'Layer Name, M, N, K' is not supported by {})",
            where, expected, Field("topology")));
      }
      for (int i = 0; i < kNumColumns; ++i) {
        if (Lower(fields[static_cast<size_t>(i)]) != Lower(kColumns[i])) {
          throw UsageError(fmt::format("{}: column {} of the header is '{}', expected '{}'", where,
                                       i + 1, fields[static_cast<size_t>(i)], kColumns[i]));
        }
      }
      header = true;
      continue;
    }
    if (fields.size() < kNumColumns) {
      throw UsageError(
          fmt::format("{}: the row has {} fields; column '{}' is missing (a row is: {})", where,
                      fields.size(), kColumns[fields.size()], expected));
    }
    TopologyLayer l;
    l.name = fields[0];
    if (l.name.empty()) throw UsageError(fmt::format("{}: the layer has no name", where));
    int64_t* dst[] = {&l.ifmap_h,  &l.ifmap_w, &l.filter_h, &l.filter_w,
                      &l.channels, &l.filters, &l.stride};
    for (int i = 1; i < kNumColumns; ++i) {
      const std::string& v = fields[static_cast<size_t>(i)];
      size_t used = 0;
      int64_t x = 0;
      try {
        x = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || v.empty() || x < 1 || x > (int64_t{1} << 24)) {
        throw UsageError(
            fmt::format("{}: '{}' in column '{}' of layer '{}' is not a positive "
                        "integer (1 to 16777216)",
                        where, v, kColumns[i], l.name));
      }
      *dst[i - 1] = x;
    }
    if (l.filter_h > l.ifmap_h || l.filter_w > l.ifmap_w) {
      throw UsageError(fmt::format(
          "{}: layer '{}' has a {} x {} filter on a {} x {} IFMAP; fold padding into the IFMAP "
          "size (a 3 x 3 'same' convolution of a 56 x 56 map is a 58 x 58 IFMAP)",
          where, l.name, l.filter_h, l.filter_w, l.ifmap_h, l.ifmap_w));
    }
    layers.push_back(l);
  }
  if (!header) throw UsageError(fmt::format("topology file '{}' is empty", path));
  if (layers.empty()) throw UsageError(fmt::format("topology file '{}' has no layers", path));
  return layers;
}

}  // namespace tpu::compiler
