// GTKWave layouts (.gtkw save files) written beside every trace tpusim makes, so a
// waveform opens readable at first sight: every PE signal named by its coordinates
// (aliases such as "PE(1,2) psum"), packed buses split into signed decimal lanes, the view
// zoomed to the whole trace, and named markers at the first row into the array, each
// weight-tile switch and the last result out (read from the trace's own handshakes).
// traces/*.gtkw are copies of what these functions write for the commands in their
// headers; tests/traces/gtkw_layout_test.cc keeps them equal.
#pragma once

#include <string>
#include <vector>

namespace tpu::sim {

enum class TraceKind {
  kMxu,   // the matrix subsystem (tpusim gemm): hierarchy TOP.tpu_mxu_top
  kChip,  // the whole chip (tpusim exec / run): hierarchy tpu_system.tpu.tpu_top
};

struct LayoutFile {
  std::string path;  // beside the trace: mxu.fst -> mxu.gtkw; chip.fst -> chip.flow.gtkw, ...
  std::string text;
};

// The layouts for a finished trace file (.fst or .vcd). `command` is the command line
// that made it, shown in each layout's header. Throws std::runtime_error when the trace
// cannot be read.
std::vector<LayoutFile> LayoutsForTrace(const std::string& trace_path, TraceKind kind,
                                        const std::string& command);
// Writes them (each under a temporary name, then renamed); returns their paths.
std::vector<std::string> WriteLayoutsForTrace(const std::string& trace_path, TraceKind kind,
                                              const std::string& command);

// The window GTKWave shows for a layout's zoom and window width: the wave area of a
// [size] W window with [signals_width] S and the signal tree collapsed is about W - S - 80
// pixels, and GTKWave draws 200 x 2^zoom pixels per nanosecond (measured on GTKWave
// 3.3.118, docs in traces/README.md). Used to choose the zoom and by the tests.
double VisibleNanoseconds(double zoom, int window_width, int signals_width);

}  // namespace tpu::sim
