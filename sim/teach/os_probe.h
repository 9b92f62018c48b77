// Reads the state of every PE of the output-stationary teaching model (rtl/tpu_os_top.sv)
// by hierarchical name through VPI, as sim/teach/mxu_probe.h does for the weight-stationary one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/teach/vpi_signal.h"

namespace tpu::sim {

namespace probe_os = hw::signals::probe_os;

// One PE during a cycle (its registers, set by the previous clock edge).
struct OsPeState {
  int8_t a = 0, b = 0;  // the A and B values it holds, passed right and down next cycle
  bool valid = false;   // they are real operands (not the zeros of an idle cycle)
  int32_t acc = 0;      // its element of C
};

// The array during a cycle, sampled before the clock edge that ends it.
struct OsArrayState {
  std::vector<OsPeState> pe;   // dim x dim, row-major (PE (r, c) holds C[r][c] of the tile)
  std::vector<int8_t> a_in;    // entering row r from the left (after the skew) at this edge
  std::vector<int8_t> b_in;    // entering column c from the top
  std::vector<bool> in_valid;  // ... real operands (row r's A and column r's B)
  bool fire = false;           // an input beat enters the skews at this edge
  bool draining = false;       // the bottom row leaves (out_row, out) at this edge
  int out_row = 0;
  std::vector<int32_t> out;
};

class OsProbe {
 public:
  explicit OsProbe(int dim)
      : p_(dim, probe_os::kScope, probe_os::kPe,
           {probe_os::kPeA, probe_os::kPeB, probe_os::kPeValid, probe_os::kPeAcc},
           {probe_os::kArrayA, probe_os::kArrayB, probe_os::kArrayAValid, probe_os::kFire,
            probe_os::kOutValid, probe_os::kOutRow, probe_os::kOutData}) {}

  OsArrayState Sample() const {
    OsArrayState s;
    const int dim = p_.dim();
    s.pe.resize(static_cast<size_t>(dim) * dim);
    for (size_t i = 0; i < s.pe.size(); ++i) {
      s.pe[i].a = static_cast<int8_t>(p_.Pe(i, kA, 8));
      s.pe[i].b = static_cast<int8_t>(p_.Pe(i, kB, 8));
      s.pe[i].valid = p_.Pe(i, kValid, 1) != 0;
      s.pe[i].acc = static_cast<int32_t>(p_.Pe(i, kAcc, 32));
    }
    for (int i = 0; i < dim; ++i) {
      s.a_in.push_back(static_cast<int8_t>(p_.Signal(kArrayA, 8 * i, 8)));
      s.b_in.push_back(static_cast<int8_t>(p_.Signal(kArrayB, 8 * i, 8)));
      s.in_valid.push_back(p_.Signal(kArrayAValid, i, 1) != 0);
      s.out.push_back(static_cast<int32_t>(p_.Signal(kOutData, 32 * i, 32)));
    }
    s.fire = p_.Signal(kFire, 0, 1) != 0;
    s.draining = p_.Signal(kOutValid, 0, 1) != 0;
    s.out_row = static_cast<int>(p_.Signal(kOutRow, 0, vpi::BitsFor(dim)));
    return s;
  }

 private:
  // The places of the registers and signals given to the ArrayProbe above.
  enum PeReg { kA, kB, kValid, kAcc };
  enum Sig { kArrayA, kArrayB, kArrayAValid, kFire, kOutValid, kOutRow, kOutData };
  vpi::ArrayProbe p_;
};

}  // namespace tpu::sim
