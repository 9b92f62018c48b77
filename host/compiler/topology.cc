// Topology files and running them on the chip (see topology.h).
#include "host/compiler/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "host/common/errors.h"
#include "host/compiler/gemm_program.h"
#include "host/gemm/gemm_runner.h"

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
            "GEMM list 'Layer Name, M, N, K' is not supported by --topology)",
            where, expected));
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

TpuRunResult RunTopologyOnTpu(const std::vector<TopologyLayer>& layers, engine::ChipEngine& engine,
                              uint64_t seed, const std::function<void(double)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const config::TpuConfig& c = engine.Config();
  const int64_t n = c.array_dim;
  const bool values = engine.ComputesValues();
  TpuRunResult result;
  result.images = 1;
  result.checked = values;
  std::mt19937_64 rng(seed);
  double total_macs = 0, done_macs = 0;
  for (const auto& l : layers) {
    const gemm::GemmShape g = l.Gemm();
    total_macs += static_cast<double>(g.m) * static_cast<double>(g.k) * static_cast<double>(g.n);
  }
  for (const TopologyLayer& l : layers) {
    const gemm::GemmShape g = l.Gemm();
    const int64_t kt = (g.k + n - 1) / n, nt_all = (g.n + n - 1) / n;
    // Output columns in groups of at most param_sets tiles (one VPU parameter set each).
    const int64_t ntg = std::min<int64_t>(nt_all, c.param_sets);
    // Rows in chunks: two accumulator buffers of mc rows; A's kt blocks and the outputs'
    // ntg blocks of mc rows in the unified buffer.
    const int64_t mc = std::min({g.m, static_cast<int64_t>(c.acc_depth_rows) / 2,
                                 static_cast<int64_t>(c.ub_depth_rows) / (kt + ntg)});
    if (mc < 1) {
      throw UsageError(fmt::format(
          "layer '{}' (K = {}, {} column tiles) does not fit the chip: one row needs {} "
          "unified-buffer rows and 2 accumulator rows; raise ub_depth_rows (now {}) or "
          "acc_depth_rows (now {})",
          l.name, g.k, nt_all, kt + ntg, c.ub_depth_rows, c.acc_depth_rows));
    }
    LayerStats stats;
    stats.name = l.name;
    stats.macs = g.m * g.k * g.n;
    bool exact = true;
    const Matrix<int8_t> a = gemm::RandomInt8(g.m, g.k, rng());
    const Matrix<int8_t> b = gemm::RandomInt8(g.k, g.n, rng());
    for (int64_t col0 = 0; col0 < g.n; col0 += ntg * n) {
      const int64_t cols = std::min(ntg * n, g.n - col0);
      Matrix<int8_t> bg{g.k, cols, std::vector<int8_t>(static_cast<size_t>(g.k * cols))};
      for (int64_t p = 0; p < g.k; ++p) {
        std::copy_n(b.data.begin() + p * g.n + col0, cols, bg.data.begin() + p * cols);
      }
      for (int64_t row0 = 0; row0 < g.m; row0 += mc) {
        const int64_t rows = std::min(mc, g.m - row0);
        Matrix<int8_t> ac{
            rows, g.k,
            std::vector<int8_t>(a.data.begin() + row0 * g.k, a.data.begin() + (row0 + rows) * g.k)};
        GemmProgram prog = MakeGemmProgram(ac, bg, static_cast<int>(n), /*overlap=*/true, rng());
        prog.job.name = l.name;
        const engine::ExecResult r = engine.Run(prog.job);
        if (!r.ok) {
          throw RuntimeError(fmt::format("layer '{}' stopped on the chip: {}", l.name, r.message));
        }
        stats.counters += r.counters;
        ++stats.jobs;
        if (values &&
            prog.Unpack(r.host_out).data != prog.Expected(gemm::ReferenceGemm(ac, bg)).data) {
          exact = false;
        }
        done_macs += static_cast<double>(rows * g.k * cols);
        if (progress) progress(total_macs > 0 ? done_macs / total_macs : 1.0);
      }
    }
    result.mismatches += !exact;
    result.layers.push_back(std::move(stats));
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tpu::compiler
