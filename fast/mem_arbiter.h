// The fast engine's model of rtl/tpu_mem_arbiter.sv: round-robin arbitration of the cores'
// requests for one external-memory port. In every cycle the first core with a valid
// request, counting from the core after the one last served, is granted; the pointer moves
// on only when the memory takes the request. tests/rtl/tpu_mem_arbiter_test.cc holds it
// equal to the RTL cycle by cycle.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace tpu::fast {

class MemArbiter {
 public:
  static constexpr int kMaxCores = 16;

  explicit MemArbiter(int cores) : cores_(cores) {
    if (cores < 1 || cores > kMaxCores) throw std::invalid_argument("cores must be 1 .. 16");
  }

  void Reset() { first_ = 0; }
  // The core granted this cycle among those asking (bit c of `valid`: core c), or -1.
  int Grant(uint32_t valid) const {
    for (int k = 0, c = first_; k < cores_; ++k, c = c + 1 == cores_ ? 0 : c + 1) {
      if (valid >> c & 1u) return c;
    }
    return -1;
  }
  // The clock edge: the memory took the granted core's request (`granted` >= 0 and ready).
  void Edge(int granted, bool taken) {
    if (granted >= 0 && taken) first_ = granted + 1 == cores_ ? 0 : granted + 1;
  }

 private:
  int cores_;
  int first_ = 0;  // the core first in line
};

}  // namespace tpu::fast
