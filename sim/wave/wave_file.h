// Where a run's waveform goes: FST written by Verilator, or VCD converted from it with
// GTKWave's fst2vcd. Written under a temporary name and renamed when complete, so a
// failed run never leaves a half-written trace behind.
#pragma once

#include <string>

namespace tpu::sim {

enum class WaveFormat { kFst, kVcd };

// A path quoted for /bin/sh.
std::string ShellQuote(const std::string& s);

class WaveFile {
 public:
  // Throws std::invalid_argument for a path that is neither *.fst nor *.vcd.
  explicit WaveFile(std::string path);
  ~WaveFile();
  WaveFile(const WaveFile&) = delete;
  WaveFile& operator=(const WaveFile&) = delete;

  static WaveFormat FormatOf(const std::string& path);
  // The FST file the simulator should write to.
  const std::string& FstPath() const { return fst_tmp_; }
  // Converts if needed and moves the result into place. Throws std::runtime_error.
  void Commit();

 private:
  std::string path_;
  std::string fst_tmp_;
  WaveFormat format_;
  bool committed_ = false;
};

}  // namespace tpu::sim
