// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.cc): each reads one kind of file
// that users give tpusim. The contract they check: an input is either accepted or rejected
// with tpusim's normal errors (UsageError or RuntimeError, one line for the user); any other
// exception, a crash, a hang or an allocation beyond libFuzzer's limit is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "host/common/errors.h"

namespace tpu::fuzz {

// A scratch folder of this process, removed at exit.
inline const std::filesystem::path& ScratchDir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("tpusim-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(
          std::filesystem::temp_directory_path() / ("tpusim-fuzz-" + std::to_string(::getpid())),
          ec);
    });
    return d;
  }();
  return dir;
}

// Writes the input to ScratchDir()/name and returns the path.
inline std::string WriteInput(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = (ScratchDir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// Runs `f`; the normal errors are fine, anything else aborts with what it was.
template <class F>
void ExpectNormalErrors(F&& f) {
  try {
    f();
  } catch (const UsageError&) {
  } catch (const RuntimeError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: an input escaped with %s\n", e.what());
    std::abort();
  }
}

// A property that must hold for accepted inputs.
inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "finding: %s\n", what);
    std::abort();
  }
}

}  // namespace tpu::fuzz
