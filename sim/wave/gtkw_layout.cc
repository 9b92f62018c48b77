// GTKWave layouts for tpusim's traces (see gtkw_layout.h).
#include "sim/wave/gtkw_layout.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sim/wave/vcd_signals.h"

namespace tpu::sim {
namespace {

constexpr int kWindowWidth = 1400;
constexpr int kWindowHeight = 900;
constexpr int kNamedMarkers = 26;    // A to Z
constexpr uint64_t kCycleTime = 10;  // ns: the clock is low from 10c, high from 10c + 5

enum class Fmt { kBin, kHex, kUDec, kSDec };

const char* Flags(Fmt f) {
  switch (f) {
    case Fmt::kBin:
      return "@28";
    case Fmt::kHex:
      return "@22";
    case Fmt::kUDec:
      return "@24";
    case Fmt::kSDec:
      return "@424";
  }
  return "@28";
}

struct Marker {
  uint64_t time;
  std::string name;
};

// Builds the body of a layout from signals of one trace; signals the trace lacks are left
// out and counted.
class Body {
 public:
  explicit Body(const VcdSignals& trace) : trace_(trace) {}

  void Group(const std::string& title) {
    out_ << "@800200\n-" << title << "\n";
    group_ = title;
    Name(title + " {");
  }
  void EndGroup() { out_ << "@1000200\n-" << group_ << "\n"; }

  // A signal by its full name without the [msb:lsb] GTKWave puts after vectors.
  void Add(const std::string& name, Fmt fmt, const std::string& alias = "") {
    if (!trace_.Has(name)) {
      ++missing_;
      return;
    }
    out_ << Flags(fmt) << "\n"
         << (alias.empty() ? "" : "+{" + alias + "} ") << Facility(name) << "\n";
    Name(alias.empty() ? name.substr(name.rfind('.') + 1) + "[63:0]=0" : alias + "=0");
  }

  // Lane l of a packed bus (bits [l*width + width-1 : l*width]) as a signed decimal named
  // label + l.
  void Lanes(const std::string& name, int width, const std::string& label, int max_lanes) {
    if (!trace_.Has(name)) {
      ++missing_;
      return;
    }
    const int total = trace_.Width(name);
    const std::string fac = Facility(name);
    for (int l = 0; l < total / width && l < max_lanes; ++l) {
      out_ << Flags(Fmt::kSDec) << "\n#{" << label << l << "}";
      Name("    " + label + std::to_string(l) + "=-128");
      // GTKWave numbers a vector's bits from the most significant: (0) is bit total-1.
      for (int bit = l * width + width - 1; bit >= l * width; --bit) {
        out_ << " (" << total - 1 - bit << ")" << fac;
      }
      out_ << "\n";
    }
  }

  std::string Text() const { return out_.str(); }
  int Missing() const { return missing_; }
  // The signal pane's width for the longest name shown (GTKWave widens the pane to fit).
  int SignalsWidth() const { return std::max(260, static_cast<int>(8.5 * longest_) + 40); }

 private:
  std::string Facility(const std::string& name) const {
    const int w = trace_.Width(name);
    return w > 1 ? name + "[" + std::to_string(w - 1) + ":0]" : name;
  }

  void Name(const std::string& shown) { longest_ = std::max(longest_, shown.size()); }

  const VcdSignals& trace_;
  std::ostringstream out_;
  std::string group_;
  int missing_ = 0;
  size_t longest_ = 0;
};

// One value per cycle of the trace, sampled at 10c (after the cycle's inputs settled,
// before its clock edge).
std::vector<uint64_t> PerCycle(const VcdSignals& t, const std::string& name, uint64_t c0,
                               uint64_t c1) {
  if (!t.Has(name)) return {};
  return t.Sample(name, c0 * kCycleTime, kCycleTime, static_cast<size_t>(c1 - c0 + 1));
}

// First row in, each weight-tile switch and the last result out of the matrix unit whose
// signals start with `mxu` (tpu_mxu's ports: a_valid_i, a_ready_o, a_switch_i,
// out_valid_o). Markers sit on the clock edge that takes the row (10c + 5).
std::vector<Marker> MxuMarkers(const VcdSignals& t, const std::string& mxu, uint64_t c0,
                               uint64_t c1) {
  const auto valid = PerCycle(t, mxu + "a_valid_i", c0, c1);
  const auto ready = PerCycle(t, mxu + "a_ready_o", c0, c1);
  const auto sw = PerCycle(t, mxu + "a_switch_i", c0, c1);
  const auto out = PerCycle(t, mxu + "out_valid_o", c0, c1);
  std::vector<Marker> m;
  if (valid.empty() || ready.empty() || sw.empty() || out.empty()) return m;
  int tiles = 0;
  bool first = true;
  for (size_t i = 0; i < valid.size(); ++i) {
    if (!(valid[i] && ready[i])) continue;
    const uint64_t time = (c0 + i) * kCycleTime + 5;
    if (sw[i]) {
      ++tiles;
      if (first || tiles > 1) {
        m.push_back({time, first ? "first row in, tile 1" : "tile " + std::to_string(tiles)});
      }
    } else if (first) {
      m.push_back({time, "first row in"});
    }
    first = false;
  }
  for (size_t i = out.size(); i-- > 0;) {
    if (out[i]) {
      m.push_back({(c0 + i) * kCycleTime + 5, "last result out"});
      break;
    }
  }
  return m;
}

// Rising edges of a one-bit signal, as markers named label + count.
std::vector<Marker> Pulses(const VcdSignals& t, const std::string& name, const std::string& label,
                           uint64_t c0, uint64_t c1) {
  const auto v = PerCycle(t, name, c0, c1);
  std::vector<Marker> m;
  int n = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] && (i == 0 || !v[i - 1])) {
      m.push_back({(c0 + i) * kCycleTime + 5, label + " " + std::to_string(++n)});
    }
  }
  return m;
}

std::string Render(const std::string& title, const std::string& command, const std::string& trace,
                   const std::string& layout, uint64_t c0, uint64_t c1, std::vector<Marker> markers,
                   const Body& body) {
  std::ostringstream s;
  s << "[*] tpusim: " << title << "\n";
  s << "[*] Trace made by: " << command << "\n";
  s << "[*] Open with: gtkwave " << trace << " " << layout << "\n";
  s << "[*] Cycles " << c0 << " to " << c1 << " (" << kCycleTime
    << " ns a cycle; the clock rises at 10c + 5 ns).\n";
  if (markers.size() > static_cast<size_t>(kNamedMarkers)) {
    // Keep the first ones and the last (the last result out).
    s << "[*] Markers: the first " << kNamedMarkers - 1 << " of " << markers.size() - 1
      << " events and the last.\n";
    Marker last = markers.back();
    markers.resize(kNamedMarkers - 1);
    markers.push_back(last);
  }
  if (body.Missing() > 0) {
    s << "[*] " << body.Missing() << " signals of this layout are not in the trace (left out).\n";
  }
  const uint64_t t0 = c0 * kCycleTime, t1 = (c1 + 1) * kCycleTime;
  // The largest zoom (GTKWave: 2^zoom scale) that still shows [t0, t1] with a little room.
  const int signals = body.SignalsWidth();
  const double fit = VisibleNanoseconds(0.0, kWindowWidth, signals) / static_cast<double>(t1 - t0);
  const double zoom = std::floor(100.0 * std::log2(0.97 * fit)) / 100.0;
  s << "[timestart] " << t0 << "\n";
  s << "[size] " << kWindowWidth << " " << kWindowHeight << "\n";
  s << "[pos] -1 -1\n";
  s << "[sst_expanded] 0\n";
  s << "[signals_width] " << signals << "\n";
  char zbuf[32];
  std::snprintf(zbuf, sizeof zbuf, "%.6f", zoom);
  s << "*" << zbuf << " -1";
  for (int i = 0; i < kNamedMarkers; ++i) {
    s << " " << (i < static_cast<int>(markers.size()) ? std::to_string(markers[i].time) : "-1");
  }
  s << "\n";
  for (size_t i = 0; i < markers.size(); ++i) {
    s << "[markername] " << static_cast<char>('A' + i) << markers[i].name << "\n";
  }
  s << body.Text();
  return s.str();
}

std::string Stem(const std::string& trace_path) {
  const std::filesystem::path p(trace_path);
  return (p.parent_path() / p.stem()).string();
}

std::string Base(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// The array size: one int8 lane per row in the matrix unit's activation input.
int ArrayDim(const VcdSignals& t, const std::string& mxu) {
  const std::string name = mxu + "a_data_i";
  return t.Has(name) ? t.Width(name) / 8 : 0;
}

std::vector<LayoutFile> MxuLayouts(const VcdSignals& t, const std::string& trace_path,
                                   const std::string& command, uint64_t c0, uint64_t c1) {
  const std::string top = "TOP.tpu_mxu_top.", mxu = top + "u_matrix.u_mxu.";
  const int n = ArrayDim(t, mxu);
  Body b(t);
  b.Group("Handshakes (int8 lanes)");
  b.Add(top + "clk_i", Fmt::kBin, "clock");
  b.Add(top + "w_valid_i", Fmt::kBin, "weight row valid");
  b.Add(top + "w_ready_o", Fmt::kBin, "weight row ready");
  b.Lanes(top + "w_data_i", 8, "weight row col ", 16);
  b.Add(top + "a_valid_i", Fmt::kBin, "activation row valid");
  b.Add(top + "a_ready_o", Fmt::kBin, "activation row ready");
  b.Add(top + "a_switch_i", Fmt::kBin, "switch to next tile");
  b.Lanes(top + "a_data_i", 8, "activation k", 16);
  b.EndGroup();
  const std::string arr = mxu + "u_array.";
  const bool per_pe = t.Has(arr + "gen_row[0].gen_col[0].u_pe.psum_q");
  const int shown = std::min(n, 8);
  for (int r = 0; per_pe && r < shown; ++r) {
    b.Group("PE row " + std::to_string(r));
    for (int c = 0; c < shown; ++c) {
      const std::string pe =
          arr + "gen_row[" + std::to_string(r) + "].gen_col[" + std::to_string(c) + "].u_pe.";
      b.Add(pe + "switch_q", Fmt::kBin,
            "PE(" + std::to_string(r) + "," + std::to_string(c) + ") switch");
    }
    for (int c = 0; c < shown; ++c) {
      const std::string pe =
          arr + "gen_row[" + std::to_string(r) + "].gen_col[" + std::to_string(c) + "].u_pe.";
      b.Add(pe + "weight_active_q", Fmt::kSDec,
            "PE(" + std::to_string(r) + "," + std::to_string(c) + ") weight");
    }
    for (int c = 0; c < shown; ++c) {
      const std::string pe =
          arr + "gen_row[" + std::to_string(r) + "].gen_col[" + std::to_string(c) + "].u_pe.";
      b.Add(pe + "psum_q", Fmt::kSDec,
            "PE(" + std::to_string(r) + "," + std::to_string(c) + ") psum");
    }
    b.EndGroup();
  }
  b.Group("Results (int32 lanes)");
  b.Add(mxu + "out_valid_o", Fmt::kBin, "row out of array");
  b.Lanes(mxu + "out_data_o", 32, "out col ", 16);
  b.Add(top + "final_valid_o", Fmt::kBin, "final sum written");
  b.Add(top + "rd_en_i", Fmt::kBin, "accumulator read");
  b.Add(top + "rd_valid_o", Fmt::kBin, "accumulator read valid");
  b.Lanes(top + "rd_data_o", 32, "read col ", 16);
  b.EndGroup();
  b.Group("Counters");
  for (const char* c : {"cycles", "stream_cycles", "load_cycles", "stall_cycles", "drain_cycles"}) {
    b.Add(top + "cnt_" + c + "_o", Fmt::kUDec);
  }
  b.EndGroup();
  const std::string path = Stem(trace_path) + ".gtkw";
  const std::string title = "the matrix unit's wavefront on a " + std::to_string(n) + " x " +
                            std::to_string(n) + " array" +
                            (per_pe ? "" : " (compact array form: no per-PE signals)") +
                            (n > 8 && per_pe ? "; PE rows and columns 0 to 7" : "");
  return {{path, Render(title, command, Base(trace_path), Base(path), c0, c1,
                        MxuMarkers(t, mxu, c0, c1), b)}};
}

std::vector<LayoutFile> ChipLayouts(const VcdSignals& t, const std::string& trace_path,
                                    const std::string& command, uint64_t c0, uint64_t c1) {
  const std::string top = "tpu_system.tpu.tpu_top.", ctl = top + "u_controller.";
  const std::string mxu = top + "u_matrix.u_mxu.", act = top + "u_activate.";
  const int n = ArrayDim(t, mxu);
  const std::string size = std::to_string(n) + " x " + std::to_string(n);
  std::vector<LayoutFile> files;
  {
    Body b(t);
    b.Group("Controller");
    b.Add(top + "clk_i", Fmt::kBin, "clock");
    b.Add(top + "rst_ni", Fmt::kBin, "reset (low)");
    b.Add(top + "instr_valid_i", Fmt::kBin, "instruction valid");
    b.Add(top + "instr_ready_o", Fmt::kBin, "instruction ready");
    b.Add(ctl + "iq_count", Fmt::kUDec, "queue occupancy");
    b.Add(ctl + "head", Fmt::kHex, "head instruction");
    b.Add(ctl + "issue_o", Fmt::kUDec, "issue code");
    b.Add(ctl + "retired_q", Fmt::kUDec, "retired");
    b.Add(ctl + "hdma_start_o", Fmt::kBin, "start host DMA");
    b.Add(ctl + "wdma_start_o", Fmt::kBin, "start weight DMA");
    b.Add(ctl + "feed_start_o", Fmt::kBin, "start matmul feed");
    b.Add(ctl + "act_start_o", Fmt::kBin, "start activate");
    b.Add(top + "unit_busy_o", Fmt::kBin, "units busy");
    b.Add(top + "halted_o", Fmt::kBin, "halted");
    b.Add(top + "status_o", Fmt::kUDec, "status");
    b.EndGroup();
    b.Group("Host DMA");
    b.Add(top + "u_host_dma.busy_o", Fmt::kBin, "host DMA busy");
    b.Add(top + "hm_req_valid_o", Fmt::kBin, "request valid");
    b.Add(top + "hm_req_ready_i", Fmt::kBin, "request ready");
    b.Add(top + "hm_req_write_o", Fmt::kBin, "request is a write");
    b.Add(top + "hm_req_addr_o", Fmt::kHex, "request address");
    b.Add(top + "hm_resp_valid_i", Fmt::kBin, "response valid");
    b.Lanes(top + "hm_resp_data_i", 8, "response byte ", 8);
    b.EndGroup();
    b.Group("Weight DMA and FIFO");
    b.Add(top + "u_weight_dma.busy_o", Fmt::kBin, "weight DMA busy");
    b.Add(top + "wm_req_valid_o", Fmt::kBin, "request valid");
    b.Add(top + "wm_req_ready_i", Fmt::kBin, "request ready");
    b.Add(top + "wm_req_addr_o", Fmt::kHex, "request address");
    b.Add(top + "wm_resp_valid_i", Fmt::kBin, "response valid");
    b.Add(top + "u_weight_fifo.count_o", Fmt::kUDec, "weight FIFO rows");
    b.EndGroup();
    b.Group("Matrix unit");
    b.Add(top + "u_feeder.busy_o", Fmt::kBin, "feeder busy");
    b.Add(top + "u_feeder.win_mode_q", Fmt::kBin, "window stage on (matmul window)");
    b.Add(top + "u_feeder.g_en_o", Fmt::kBin, "window row gathered");
    b.Add(top + "u_feeder.oy_q", Fmt::kUDec, "window output row (raster)");
    b.Add(top + "u_feeder.ox_q", Fmt::kUDec, "window output column (raster)");
    b.Add(top + "u_feeder.q_q", Fmt::kUDec, "pixel in pooling window (pooled)");
    b.Add(ctl + "drain_left_q", Fmt::kUDec, "cycles until the last matmul's rows land");
    b.Add(mxu + "a_valid_i", Fmt::kBin, "activation row valid");
    b.Add(mxu + "a_ready_o", Fmt::kBin, "activation row ready");
    b.Add(mxu + "a_switch_i", Fmt::kBin, "switch to next tile");
    b.Add(mxu + "a_fire_o", Fmt::kBin, "row enters");
    b.Add(mxu + "busy_o", Fmt::kBin, "matrix unit busy");
    b.Add(mxu + "out_valid_o", Fmt::kBin, "row out of array");
    b.Add(top + "u_matrix.u_accumulators.wr_valid_i", Fmt::kBin, "accumulator write");
    b.Add(top + "u_matrix.u_accumulators.wr_addr_i", Fmt::kUDec, "accumulator address");
    b.EndGroup();
    b.Group("Activation unit");
    b.Add(act + "busy_o", Fmt::kBin, "activate busy");
    b.Add(act + "acc_rd_en_o", Fmt::kBin, "accumulator read");
    b.Add(act + "acc_rd_addr_o", Fmt::kUDec, "accumulator address");
    b.Add(act + "u_vpu.in_valid_i", Fmt::kBin, "VPU in");
    b.Add(act + "u_vpu.out_valid_o", Fmt::kBin, "VPU out");
    b.Add(act + "ub_wr_en_o", Fmt::kBin, "unified buffer write");
    b.Add(act + "ub_wr_addr_o", Fmt::kUDec, "unified buffer address");
    b.EndGroup();
    const std::string path = Stem(trace_path) + ".flow.gtkw";
    files.push_back({path, Render("the controller's instruction flow on the " + size +
                                      " chip: queue, issue, DMA, weight FIFO, matrix unit, "
                                      "activation unit",
                                  command, Base(trace_path), Base(path), c0, c1,
                                  MxuMarkers(t, mxu, c0, c1), b)});
  }
  {
    Body b(t);
    b.Group("Activate");
    b.Add(top + "clk_i", Fmt::kBin, "clock");
    b.Add(act + "start_i", Fmt::kBin, "start");
    b.Add(act + "busy_o", Fmt::kBin, "busy");
    b.Add(act + "relu_q", Fmt::kBin, "ReLU");
    b.Add(act + "pool_q", Fmt::kUDec, "pooling");
    b.Add(act + "acc_rd_en_o", Fmt::kBin, "accumulator read");
    b.Add(act + "acc_rd_addr_o", Fmt::kUDec, "accumulator address");
    b.Add(act + "out_left_q", Fmt::kUDec, "rows left");
    b.EndGroup();
    for (int l = 0; l < std::min(n, 8); ++l) {
      const std::string lane = act + "u_vpu.gen_lane[" + std::to_string(l) + "].";
      const std::string L = "lane " + std::to_string(l) + " ";
      b.Group("Lane " + std::to_string(l));
      b.Add(lane + "acc_in", Fmt::kSDec, L + "accumulator");
      b.Add(lane + "bias", Fmt::kSDec, L + "bias");
      b.Add(lane + "multiplier", Fmt::kSDec, L + "multiplier");
      b.Add(lane + "shift", Fmt::kUDec, L + "shift");
      b.Add(lane + "sum", Fmt::kSDec, L + "acc+bias");
      b.Add(lane + "requantized", Fmt::kSDec, L + "requantized");
      b.Add(lane + "out", Fmt::kSDec, L + "out");
      b.EndGroup();
    }
    b.Group("VPU pipeline");
    b.Add(act + "u_vpu.in_valid_i", Fmt::kBin, "in valid");
    b.Add(act + "u_vpu.s1_valid_q", Fmt::kBin, "stage 1 valid");
    b.Add(act + "u_vpu.s2_valid_q", Fmt::kBin, "stage 2 valid");
    b.Add(act + "u_vpu.pool_count_q", Fmt::kUDec, "pooling count");
    b.Add(act + "u_vpu.pool_last", Fmt::kBin, "pooling window complete");
    b.Add(act + "u_vpu.pool_valid_q", Fmt::kBin, "pooled valid");
    b.Add(act + "u_vpu.out_valid_o", Fmt::kBin, "out valid");
    b.EndGroup();
    b.Group("Write-back (int8 lanes)");
    b.Add(act + "ub_wr_en_o", Fmt::kBin, "write");
    b.Add(act + "ub_wr_addr_o", Fmt::kUDec, "address");
    b.Lanes(act + "ub_wr_data_o", 8, "written lane ", 16);
    b.EndGroup();
    const std::string path = Stem(trace_path) + ".vpu.gtkw";
    files.push_back({path, Render("the VPU of the " + size +
                                      " chip, lane by lane: bias, requantization, ReLU, pooling",
                                  command, Base(trace_path), Base(path), c0, c1,
                                  Pulses(t, act + "start_i", "activate", c0, c1), b)});
  }
  return files;
}

}  // namespace

double VisibleNanoseconds(double zoom, int window_width, int signals_width) {
  return (window_width - signals_width - 80) / (200.0 * std::pow(2.0, zoom));
}

std::vector<LayoutFile> LayoutsForTrace(const std::string& trace_path, TraceKind kind,
                                        const std::string& command) {
  const VcdSignals t = VcdSignals::FromFile(trace_path, {});
  const uint64_t c0 = t.FirstTime() / kCycleTime, c1 = t.LastTime() / kCycleTime;
  return kind == TraceKind::kMxu ? MxuLayouts(t, trace_path, command, c0, c1)
                                 : ChipLayouts(t, trace_path, command, c0, c1);
}

std::vector<std::string> WriteLayoutsForTrace(const std::string& trace_path, TraceKind kind,
                                              const std::string& command) {
  std::vector<std::string> written;
  for (const LayoutFile& f : LayoutsForTrace(trace_path, kind, command)) {
    const std::string tmp = f.path + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp);
      out << f.text;
      out.close();
      if (!out) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot write layout '" + f.path + "'");
      }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, f.path, ec);
    if (ec) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write layout '" + f.path + "': " + ec.message());
    }
    written.push_back(f.path);
  }
  return written;
}

}  // namespace tpu::sim
