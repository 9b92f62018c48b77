// What the terminal frames of every dataflow share (internal to host/teach): colour, the
// cell grid, the matrices and the edges of the array.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "host/common/npy.h"

namespace tpu::teach::text {

inline constexpr int kMargin = 13;  // "k0   -12 * >" before the first column
inline constexpr int kCell = 14;    // "| w-128 s-128 " etc.

// ANSI colours, or nothing in plain text.
struct Paint {
  bool on;
  std::string operator()(const std::string& s, const char* code) const {
    return on ? fmt::format("\033[{}m{}\033[0m", code, s) : s;
  }
};
inline constexpr const char* kGreen = "1;32";
inline constexpr const char* kYellow = "1;33";
inline constexpr const char* kCyan = "36";
inline constexpr const char* kMagenta = "35";
inline constexpr const char* kBold = "1";
inline constexpr const char* kDim = "2";

// "  NAME (R x C):" and the values as written, one row per line.
std::string MatrixText(const std::string& name, int64_t rows, int64_t cols,
                       const std::function<std::string(int64_t, int64_t)>& at);
template <class T>
std::string MatrixText(const std::string& name, const Matrix<T>& m) {
  return MatrixText(name, m.rows, m.cols,
                    [&](int64_t r, int64_t c) { return fmt::format("{}", m.at(r, c)); });
}
// The line between rows of cells.
std::string Border(int dim);
// Blank as wide as the margin.
std::string Margin();
// The frame's top: "col 0 col 1 ..." and, above each column, what enters it at this edge
// (empty for nothing), painted.
std::string ColumnHeads(int dim, const std::function<std::string(int)>& entering, const Paint& p,
                        const char* code);
// The cell text padded to the cell's width, with its left border.
std::string Cell(const std::string& painted, size_t width);
// A row of PEs: its lines of cells, each closed, then the border below.
std::string LinesOfCells(const std::vector<std::string>& lines, int dim);
// The frame's first line: "cycle i of n" and the counts so far.
std::string FrameTitle(uint64_t cycle, size_t frames, const std::string& counts, const Paint& p);

}  // namespace tpu::teach::text
