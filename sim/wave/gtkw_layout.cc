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

#include "contract/tpu_signals.h"
#include "sim/wave/vcd_signals.h"

namespace tpu::sim {
namespace {

constexpr int kWindowWidth = 1400;
constexpr int kWindowHeight = 900;
constexpr int kNamedMarkers = 26;    // A to Z
constexpr uint64_t kCycleTime = 10;  // ns: the clock is low from 10c, high from 10c + 5

using hw::signals::Fmt;
constexpr int kShownMax = 8;  // PE rows and columns, VPU lanes: 0 to 7 at most

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
  void Lanes(const std::string& name, int width, Fmt fmt, const std::string& label, int max_lanes) {
    if (!trace_.Has(name)) {
      ++missing_;
      return;
    }
    const int total = trace_.Width(name);
    const std::string fac = Facility(name);
    for (int l = 0; l < total / width && l < max_lanes; ++l) {
      out_ << Flags(fmt) << "\n#{" << label << l << "}";
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
    // GTKWave names a vector with its range, a vector of one bit with its index ([0:0]: [0]).
    const int w = trace_.Width(name);
    const std::string range = trace_.Range(name);
    const size_t colon = range.find(':');
    if (w == 1 && colon != std::string::npos) return name + "[" + range.substr(colon + 1);
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

// The matrix unit's row handshake and result valid, by full name in the trace.
struct MxuPorts {
  std::string valid, ready, sw, out;
};

// First row in, each weight-tile switch and the last result out of the matrix unit.
// Markers sit on the clock edge that takes the row (10c + 5).
std::vector<Marker> MxuMarkers(const VcdSignals& t, const MxuPorts& p, uint64_t c0, uint64_t c1) {
  const auto valid = PerCycle(t, p.valid, c0, c1);
  const auto ready = PerCycle(t, p.ready, c0, c1);
  const auto sw = PerCycle(t, p.sw, c0, c1);
  const auto out = PerCycle(t, p.out, c0, c1);
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

// The array size: the 32-bit lanes (int32 or float32 sums) of the bus `dim` names.
int ArrayDim(const VcdSignals& t, const std::string& dim) {
  return t.Has(dim) ? t.Width(dim) / 32 : 0;
}

// Adds one signal of the table: each index of its `each` up to `shown`, with `var` of the
// group filled in.
void AddSignal(Body& b, const std::string& scope, const hw::signals::Signal& s, char var, int value,
               int shown) {
  const int count = s.each ? shown : 1;
  for (int i = 0; i < count; ++i) {
    std::string path = hw::signals::Fill(s.path, var, value);
    std::string label = hw::signals::Fill(s.label, var, value);
    if (s.each) {
      path = hw::signals::Fill(path, s.each, i);
      label = hw::signals::Fill(label, s.each, i);
    }
    if (s.lane_bits > 0) {
      b.Lanes(scope + path, s.lane_bits, s.fmt, label, s.max_lanes);
    } else {
      b.Add(scope + path, s.fmt, label);
    }
  }
}

std::vector<Marker> LayoutMarkers(const VcdSignals& t, const hw::signals::Layout& lay, uint64_t c0,
                                  uint64_t c1) {
  const std::string scope(lay.scope);
  const hw::signals::Markers& m = lay.markers;
  if (m.kind == hw::signals::Markers::kPulses) {
    return Pulses(t, scope + std::string(m.signal), std::string(m.label), c0, c1);
  }
  return MxuMarkers(t,
                    {scope + std::string(m.valid), scope + std::string(m.ready),
                     scope + std::string(m.sw), scope + std::string(m.out)},
                    c0, c1);
}

// One layout of contract/tpu_signals.toml for this trace. An optional group whose first
// signal the trace lacks is left out (and the title says so).
LayoutFile MakeLayout(const VcdSignals& t, const hw::signals::Layout& lay,
                      const std::string& trace_path, const std::string& command, uint64_t c0,
                      uint64_t c1) {
  const std::string scope(lay.scope);
  const int n = ArrayDim(t, scope + std::string(lay.dim));
  const int shown = std::min(n, kShownMax);
  Body b(t);
  bool skipped = false, repeated = false;
  for (const hw::signals::Group& g : lay.groups) {
    const std::string first = hw::signals::Fill(
        hw::signals::Fill(hw::signals::Fill(g.signals.front().path, 'r', 0), 'c', 0), 'l', 0);
    if (g.optional && !t.Has(scope + first)) {
      skipped = true;
      continue;
    }
    repeated = repeated || g.each;
    for (int i = 0; i < (g.each ? shown : 1); ++i) {
      b.Group(hw::signals::Fill(g.title, g.each, i));
      for (const hw::signals::Signal& s : g.signals) AddSignal(b, scope, s, g.each, i, shown);
      b.EndGroup();
    }
  }
  std::string title = hw::signals::Fill(lay.title, 'n', n);
  if (skipped) title += lay.title_if_missing;
  if (n > kShownMax && repeated) title += lay.title_if_cut;
  const std::string path = Stem(trace_path) + std::string(lay.file) + ".gtkw";
  return {path, Render(title, command, Base(trace_path), Base(path), c0, c1,
                       LayoutMarkers(t, lay, c0, c1), b)};
}

}  // namespace

double VisibleNanoseconds(double zoom, int window_width, int signals_width) {
  return (window_width - signals_width - 80) / (200.0 * std::pow(2.0, zoom));
}

std::vector<LayoutFile> LayoutsForTrace(const std::string& trace_path, TraceKind kind,
                                        const std::string& command) {
  const VcdSignals t = VcdSignals::FromFile(trace_path, {});
  const uint64_t c0 = t.FirstTime() / kCycleTime, c1 = t.LastTime() / kCycleTime;
  const std::string_view trace = kind == TraceKind::kMxu ? "mxu" : "chip";
  std::vector<LayoutFile> files;
  for (const hw::signals::Layout& lay : hw::signals::Layouts()) {
    if (lay.trace != trace) continue;
    if (!lay.needs.empty() && !t.Has(std::string(lay.scope) + std::string(lay.needs))) continue;
    files.push_back(MakeLayout(t, lay, trace_path, command, c0, c1));
  }
  return files;
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
