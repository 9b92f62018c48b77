// Waveform output files (see wave_file.h).
#include "sim/wave/wave_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace tpu::sim {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

WaveFormat WaveFile::FormatOf(const std::string& path) {
  if (EndsWith(path, ".fst")) return WaveFormat::kFst;
  if (EndsWith(path, ".vcd")) return WaveFormat::kVcd;
  throw std::invalid_argument("trace file '" + path +
                              "' must end in .fst (compact, for GTKWave) or .vcd");
}

WaveFile::WaveFile(std::string path) : path_(std::move(path)), format_(FormatOf(path_)) {
  fst_tmp_ = path_ + ".tmp" + std::to_string(::getpid()) + ".fst";
}

WaveFile::~WaveFile() {
  if (!committed_) std::remove(fst_tmp_.c_str());
}

void WaveFile::Commit() {
  std::error_code ec;
  if (format_ == WaveFormat::kFst) {
    std::filesystem::rename(fst_tmp_, path_, ec);
    if (ec) throw std::runtime_error("cannot write trace '" + path_ + "': " + ec.message());
  } else {
    const std::string vcd_tmp = path_ + ".tmp" + std::to_string(::getpid());
    const std::string cmd =
        "fst2vcd -f " + ShellQuote(fst_tmp_) + " -o " + ShellQuote(vcd_tmp) + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::remove(vcd_tmp.c_str());
      throw std::runtime_error(
          "cannot write VCD trace '" + path_ +
          "': converting with fst2vcd failed (install gtkwave, or write a .fst trace)");
    }
    std::filesystem::rename(vcd_tmp, path_, ec);
    if (ec) {
      std::remove(vcd_tmp.c_str());
      throw std::runtime_error("cannot write trace '" + path_ + "': " + ec.message());
    }
    std::remove(fst_tmp_.c_str());
  }
  committed_ = true;
}

}  // namespace tpu::sim
