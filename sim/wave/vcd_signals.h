// Reads the value changes of a waveform (VCD text, or FST through GTKWave's fst2vcd) by
// full signal name ("TOP.tpu_mxu_top.a_valid_i"), for the signals a caller names, and lists
// every signal the trace has with its width. The layouts written beside traces
// (sim/wave/gtkw_layout.h) and the waveform tests read traces with it.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tpu::sim {

class VcdSignals {
 public:
  // Keeps the changes of the signals in `wanted` (all signals when it is empty).
  VcdSignals(std::istream& vcd, const std::set<std::string>& wanted);
  // Reads a .vcd file, or a .fst file converted by fst2vcd. Throws std::runtime_error.
  static VcdSignals FromFile(const std::string& path, const std::set<std::string>& wanted);

  // Every signal of the trace by full name, with its width in bits.
  const std::map<std::string, int>& Widths() const { return widths_; }
  bool Has(const std::string& name) const { return widths_.count(name) != 0; }
  int Width(const std::string& name) const;
  // The range the signal was declared with ("[63:0]", "[0:0]" for a vector of one bit), or
  // empty for a plain bit.
  std::string Range(const std::string& name) const {
    const auto it = ranges_.find(name);
    return it == ranges_.end() ? std::string() : it->second;
  }
  // The signal's value at `time` (its last change at or before it) as an unsigned number of
  // up to 64 bits; Signed() sign-extends from the signal's width.
  uint64_t At(const std::string& name, uint64_t time) const;
  int64_t Signed(const std::string& name, uint64_t time) const;
  // The signal's values at t0, t0 + step, ... (`count` samples), in one pass over its
  // changes (At() for each would rescan them every time).
  std::vector<uint64_t> Sample(const std::string& name, uint64_t t0, uint64_t step,
                               size_t count) const;
  // The value at `time` of a signal of any width as its bits, most significant first,
  // `Width(name)` of them ('0' before its first change; x and z read as 0).
  std::string BitsAt(const std::string& name, uint64_t time) const;
  uint64_t FirstTime() const { return first_time_; }
  uint64_t LastTime() const { return last_time_; }

 private:
  std::map<std::string, int> widths_;
  std::map<std::string, std::string> ranges_;
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> changes_;
  // Every change of the signals wider than 64 bits, as written (leading zeros dropped).
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> wide_changes_;
  uint64_t first_time_ = 0, last_time_ = 0;
};

}  // namespace tpu::sim
