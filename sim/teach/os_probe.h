// Reads the state of every PE of the output-stationary teaching model (rtl/tpu_os_top.sv)
// by hierarchical name through VPI, as sim/teach/mxu_probe.h does for the weight-stationary one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/teach/vpi_signal.h"

namespace tpu::sim {

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
  explicit OsProbe(int dim) : dim_(dim) {
    for (int r = 0; r < dim; ++r) {
      for (int c = 0; c < dim; ++c) {
        const std::string pe = vpi::PePath(kTop + "u_array.", r, c);
        pes_.push_back({handles_.Find(pe + "a_q"), handles_.Find(pe + "b_q"),
                        handles_.Find(pe + "a_valid_q"), handles_.Find(pe + "acc_q")});
      }
    }
    array_a_ = handles_.Find(kTop + "array_a");
    array_b_ = handles_.Find(kTop + "array_b");
    array_a_valid_ = handles_.Find(kTop + "array_a_valid");
    fire_ = handles_.Find(kTop + "fire");
    out_valid_ = handles_.Find(kTop + "out_valid_o");
    out_row_ = handles_.Find(kTop + "out_row_o");
    out_data_ = handles_.Find(kTop + "out_data_o");
  }

  OsArrayState Sample() const {
    OsArrayState s;
    s.pe.resize(pes_.size());
    for (size_t i = 0; i < pes_.size(); ++i) {
      s.pe[i].a = static_cast<int8_t>(vpi::Bits(pes_[i].a, 0, 8));
      s.pe[i].b = static_cast<int8_t>(vpi::Bits(pes_[i].b, 0, 8));
      s.pe[i].valid = vpi::Bits(pes_[i].valid, 0, 1) != 0;
      s.pe[i].acc = static_cast<int32_t>(vpi::Bits(pes_[i].acc, 0, 32));
    }
    for (int i = 0; i < dim_; ++i) {
      s.a_in.push_back(static_cast<int8_t>(vpi::Bits(array_a_, 8 * i, 8)));
      s.b_in.push_back(static_cast<int8_t>(vpi::Bits(array_b_, 8 * i, 8)));
      s.in_valid.push_back(vpi::Bits(array_a_valid_, i, 1) != 0);
      s.out.push_back(static_cast<int32_t>(vpi::Bits(out_data_, 32 * i, 32)));
    }
    s.fire = vpi::Bits(fire_, 0, 1) != 0;
    s.draining = vpi::Bits(out_valid_, 0, 1) != 0;
    s.out_row = static_cast<int>(vpi::Bits(out_row_, 0, vpi::BitsFor(dim_)));
    return s;
  }

 private:
  vpi::HandleSet handles_;  // first: released after the probe is done
  inline static const std::string kTop = "TOP.tpu_os_top.";
  struct PeHandles {
    vpiHandle a, b, valid, acc;
  };
  int dim_;
  std::vector<PeHandles> pes_;
  vpiHandle array_a_, array_b_, array_a_valid_, fire_, out_valid_, out_row_, out_data_;
};

}  // namespace tpu::sim
