// Reading waveforms by signal name (see vcd_signals.h).
#include "sim/wave/vcd_signals.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "sim/wave/wave_file.h"

namespace tpu::sim {
namespace {

uint64_t FromBits(const std::string& bits) {
  uint64_t u = 0;
  for (char ch : bits) u = (u << 1) | (ch == '1');
  return u;
}

}  // namespace

VcdSignals::VcdSignals(std::istream& in, const std::set<std::string>& wanted) {
  std::vector<std::string> scope;
  std::map<std::string, std::vector<std::string>> names;  // id -> kept names
  bool first = true;
  uint64_t time = 0;
  for (std::string tok; in >> tok;) {
    if (tok == "$scope") {
      std::string kind, name;
      in >> kind >> name;
      scope.push_back(name);
    } else if (tok == "$upscope") {
      if (!scope.empty()) scope.pop_back();
    } else if (tok == "$var") {
      std::string type, width, id, name;
      in >> type >> width >> id >> name;
      std::string full;
      for (const auto& s : scope) full += s + ".";
      full += name;
      widths_[full] = std::stoi(width);
      for (std::string rest; in >> rest && rest != "$end";)  // a declared range, as [0:0]
        if (rest[0] == '[') ranges_[full] = rest;
      if (wanted.empty() || wanted.count(full)) names[id].push_back(full);
    } else if (tok[0] == '#') {
      time = std::stoull(tok.substr(1));
      if (first) first_time_ = time;
      first = false;
      last_time_ = time;
    } else if (tok[0] == 'b' || tok[0] == 'B') {
      std::string id;
      in >> id;
      const auto it = names.find(id);
      if (it == names.end()) continue;
      const uint64_t v = FromBits(tok.substr(1));
      for (const auto& n : it->second) {
        changes_[n].emplace_back(time, v);
        if (widths_[n] > 64) wide_changes_[n].emplace_back(time, tok.substr(1));
      }
    } else if ((tok[0] == '0' || tok[0] == '1' || tok[0] == 'x' || tok[0] == 'z') &&
               tok.size() > 1) {
      const auto it = names.find(tok.substr(1));
      if (it == names.end()) continue;
      for (const auto& n : it->second) changes_[n].emplace_back(time, tok[0] == '1' ? 1u : 0u);
    }
  }
}

VcdSignals VcdSignals::FromFile(const std::string& path, const std::set<std::string>& wanted) {
  if (WaveFile::FormatOf(path) == WaveFormat::kVcd) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read trace '" + path + "'");
    return VcdSignals(f, wanted);
  }
  const std::string cmd = "fst2vcd -f " + ShellQuote(path) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("cannot run fst2vcd on '" + path + "'");
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) text.append(buf, n);
  if (::pclose(pipe.release()) != 0 || text.empty()) {
    throw std::runtime_error("cannot read trace '" + path +
                             "': fst2vcd failed (install gtkwave: scripts/install-deps)");
  }
  std::istringstream in(text);
  return VcdSignals(in, wanted);
}

int VcdSignals::Width(const std::string& name) const {
  const auto it = widths_.find(name);
  if (it == widths_.end()) throw std::runtime_error("the trace has no signal " + name);
  return it->second;
}

uint64_t VcdSignals::At(const std::string& name, uint64_t time) const {
  Width(name);
  const auto it = changes_.find(name);
  if (it == changes_.end()) return 0;
  uint64_t v = 0;
  for (const auto& [t, value] : it->second) {
    if (t > time) break;
    v = value;
  }
  return v;
}

std::vector<uint64_t> VcdSignals::Sample(const std::string& name, uint64_t t0, uint64_t step,
                                         size_t count) const {
  Width(name);
  std::vector<uint64_t> out(count, 0);
  const auto it = changes_.find(name);
  if (it == changes_.end()) return out;
  const auto& changes = it->second;
  size_t next = 0;
  uint64_t v = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t time = t0 + i * step;
    while (next < changes.size() && changes[next].first <= time) v = changes[next++].second;
    out[i] = v;
  }
  return out;
}

std::string VcdSignals::BitsAt(const std::string& name, uint64_t time) const {
  const auto w = static_cast<size_t>(Width(name));
  if (w <= 64) {
    const uint64_t u = At(name, time);
    std::string bits(w, '0');
    for (size_t i = 0; i < w; ++i) bits[w - 1 - i] = (u >> i & 1) ? '1' : '0';
    return bits;
  }
  std::string v;
  const auto it = wide_changes_.find(name);
  if (it != wide_changes_.end()) {
    for (const auto& [t, value] : it->second) {
      if (t > time) break;
      v = value;
    }
  }
  for (char& ch : v) ch = ch == '1' ? '1' : '0';
  return std::string(w - std::min(w, v.size()), '0') + v.substr(v.size() - std::min(w, v.size()));
}

int64_t VcdSignals::Signed(const std::string& name, uint64_t time) const {
  const int w = Width(name);
  const uint64_t u = At(name, time);
  if (w < 64 && ((u >> (w - 1)) & 1)) return static_cast<int64_t>(u) - (int64_t{1} << w);
  return static_cast<int64_t>(u);
}

}  // namespace tpu::sim
