// Reading SCALE-Sim topology CSV files (see topology_csv.h).
#include "host/compiler/topology_csv.h"

#include <fmt/format.h>

#include <fstream>
#include <optional>
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

namespace {

// The two lists SCALE-Sim v2 reads (scalesim/topology_utils.py): convolutions, and GEMMs
// (its "mnk" inputs, rows "name, M, N, K": C (M x N) = A (M x K) x B (K x N)).
enum class Format { kConv, kGemm };
constexpr const char* kGemmColumns[] = {"Layer name", "M", "N", "K"};
constexpr int kNumGemmColumns = 4;

std::string Header(const char* const* columns, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::string(i ? ", " : "") + columns[i];
  return s;
}

// Which list the header begins (four columns: GEMMs; eight or more: convolutions); throws
// naming what was expected.
Format ReadHeader(const std::vector<std::string>& fields, const std::string& where) {
  const bool gemm = fields.size() == kNumGemmColumns;
  if (Lower(fields[0]) != "layer name" || (!gemm && fields.size() < kNumColumns)) {
    throw UsageError(fmt::format(
        "{}: not a SCALE-Sim topology file: the first line must be the header '{},' (a list "
        "of convolutions) or '{},' (a list of GEMMs)",
        where, Header(kColumns, kNumColumns), Header(kGemmColumns, kNumGemmColumns)));
  }
  const char* const* columns = gemm ? kGemmColumns : kColumns;
  for (int i = 1; i < (gemm ? kNumGemmColumns : kNumColumns); ++i) {
    if (Lower(fields[static_cast<size_t>(i)]) != Lower(columns[i])) {
      throw UsageError(fmt::format("{}: column {} of the header is '{}', expected '{}'", where,
                                   i + 1, fields[static_cast<size_t>(i)], columns[i]));
    }
  }
  return gemm ? Format::kGemm : Format::kConv;
}

// Field `i` of a row, a positive integer; throws naming the column and the layer.
int64_t PositiveInt(const std::vector<std::string>& fields, int i, const char* column,
                    const std::string& layer, const std::string& where) {
  const std::string& v = fields[static_cast<size_t>(i)];
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || x < 1 || x > (int64_t{1} << 24)) {
    throw UsageError(fmt::format(
        "{}: '{}' in column '{}' of layer '{}' is not a positive integer (1 to 16777216)", where, v,
        column, layer));
  }
  return x;
}

TopologyLayer ConvRow(const std::vector<std::string>& fields, const std::string& where) {
  TopologyLayer l;
  l.name = fields[0];
  int64_t* dst[] = {&l.ifmap_h,  &l.ifmap_w, &l.filter_h, &l.filter_w,
                    &l.channels, &l.filters, &l.stride};
  for (int i = 1; i < kNumColumns; ++i)
    *dst[i - 1] = PositiveInt(fields, i, kColumns[i], l.name, where);
  if (l.filter_h > l.ifmap_h || l.filter_w > l.ifmap_w) {
    throw UsageError(fmt::format(
        "{}: layer '{}' has a {} x {} filter on a {} x {} IFMAP; fold padding into the IFMAP "
        "size (a 3 x 3 'same' convolution of a 56 x 56 map is a 58 x 58 IFMAP)",
        where, l.name, l.filter_h, l.filter_w, l.ifmap_h, l.ifmap_w));
  }
  return l;
}

// A GEMM is a dense layer (a 1 x 1 IFMAP of K channels, N filters) on a batch of M.
TopologyLayer GemmRow(const std::vector<std::string>& fields, const std::string& where) {
  TopologyLayer l;
  l.name = fields[0];
  l.batch = PositiveInt(fields, 1, kGemmColumns[1], l.name, where);
  l.filters = PositiveInt(fields, 2, kGemmColumns[2], l.name, where);
  l.channels = PositiveInt(fields, 3, kGemmColumns[3], l.name, where);
  l.ifmap_h = l.ifmap_w = l.filter_h = l.filter_w = 1;
  return l;
}

}  // namespace

std::vector<TopologyLayer> ReadTopologyCsv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("cannot read topology file '{}'", path));
  std::vector<TopologyLayer> layers;
  std::optional<Format> format;
  std::string line;
  for (int line_no = 1; std::getline(f, line); ++line_no) {
    const std::vector<std::string> fields = SplitCsv(line);
    if (fields.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, line_no);
    if (!format) {
      format = ReadHeader(fields, where);
      continue;
    }
    const bool gemm = *format == Format::kGemm;
    const int columns = gemm ? kNumGemmColumns : kNumColumns;
    const char* const* names = gemm ? kGemmColumns : kColumns;
    if (fields.size() < static_cast<size_t>(columns)) {
      throw UsageError(
          fmt::format("{}: the row has {} fields; column '{}' is missing (a row is: {})", where,
                      fields.size(), names[fields.size()], Header(names, columns)));
    }
    if (fields[0].empty()) throw UsageError(fmt::format("{}: the layer has no name", where));
    layers.push_back(gemm ? GemmRow(fields, where) : ConvRow(fields, where));
  }
  if (!format) throw UsageError(fmt::format("topology file '{}' is empty", path));
  if (layers.empty()) throw UsageError(fmt::format("topology file '{}' has no layers", path));
  return layers;
}

}  // namespace tpu::compiler
