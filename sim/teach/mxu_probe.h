// Reads the state of every PE of a Verilated matrix-subsystem model by hierarchical name,
// through Verilator's VPI (the model must be built with --vpi --public-flat-rw: the
// teaching models, cmake/TpusimRtl.cmake). This is how `tpusim teach` shows the RTL's own
// signals rather than a separate model of the array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/teach/vpi_signal.h"

namespace tpu::sim {

// One PE during a cycle (its registers, set by the previous clock edge).
struct PeState {
  int8_t weight = 0;  // active (stationary) weight
  int8_t shadow = 0;  // the next tile's weight, loading
  int8_t act = 0;     // activation held, passed right next cycle
  int32_t psum = 0;   // partial sum held, passed down next cycle
  bool sw = false;    // the weight-switch bit travelling with the activation
};

// The array during a cycle, sampled before the clock edge that ends it.
struct ArrayState {
  std::vector<PeState> pe;     // dim x dim, row-major (row = k lane, column = output)
  std::vector<int8_t> act_in;  // entering each row (from the input skew) at this edge
  std::vector<bool> switch_in;
  std::vector<bool> w_write;            // a weight is written into column c's shadow at this edge
  std::vector<int> w_row;               //   ... at this row
  std::vector<int8_t> w_data;           //   ... this value
  bool out_valid = false;               // a de-skewed result row leaves the matrix unit
  std::vector<int32_t> out;             // ... its values
  bool a_fire = false, w_fire = false;  // a row / weight row enters at this edge
};

class MxuProbe {
 public:
  explicit MxuProbe(int dim) : dim_(dim) {
    const std::string arr = kTop + "u_matrix.u_mxu.u_array.";
    for (int r = 0; r < dim; ++r) {
      for (int c = 0; c < dim; ++c) {
        const std::string pe = vpi::PePath(arr, r, c);
        pes_.push_back({handles_.Find(pe + "weight_active_q"),
                        handles_.Find(pe + "weight_shadow_q"), handles_.Find(pe + "act_q"),
                        handles_.Find(pe + "psum_q"), handles_.Find(pe + "switch_q")});
      }
    }
    array_act_ = handles_.Find(kTop + "u_matrix.u_mxu.array_act");
    array_switch_ = handles_.Find(kTop + "u_matrix.u_mxu.array_switch");
    col_wr_valid_ = handles_.Find(kTop + "u_matrix.u_mxu.col_wr_valid");
    col_wr_row_ = handles_.Find(kTop + "u_matrix.u_mxu.col_wr_row");
    col_wr_data_ = handles_.Find(kTop + "u_matrix.u_mxu.col_wr_data");
    out_valid_ = handles_.Find(kTop + "u_matrix.u_mxu.out_valid_o");
    out_data_ = handles_.Find(kTop + "u_matrix.u_mxu.out_data_o");
    a_fire_ = handles_.Find(kTop + "u_matrix.u_mxu.a_fire");
    w_fire_ = handles_.Find(kTop + "u_matrix.u_mxu.w_fire");
    row_bits_ = vpi::BitsFor(dim);
  }

  ArrayState Sample() const {
    ArrayState s;
    s.pe.resize(pes_.size());
    for (size_t i = 0; i < pes_.size(); ++i) {
      s.pe[i].weight = static_cast<int8_t>(vpi::Bits(pes_[i].weight, 0, 8));
      s.pe[i].shadow = static_cast<int8_t>(vpi::Bits(pes_[i].shadow, 0, 8));
      s.pe[i].act = static_cast<int8_t>(vpi::Bits(pes_[i].act, 0, 8));
      s.pe[i].psum = static_cast<int32_t>(vpi::Bits(pes_[i].psum, 0, 32));
      s.pe[i].sw = vpi::Bits(pes_[i].sw, 0, 1) != 0;
    }
    for (int r = 0; r < dim_; ++r) {
      s.act_in.push_back(static_cast<int8_t>(vpi::Bits(array_act_, 8 * r, 8)));
      s.switch_in.push_back(vpi::Bits(array_switch_, r, 1) != 0);
      s.w_write.push_back(vpi::Bits(col_wr_valid_, r, 1) != 0);
      s.w_row.push_back(static_cast<int>(vpi::Bits(col_wr_row_, row_bits_ * r, row_bits_)));
      s.w_data.push_back(static_cast<int8_t>(vpi::Bits(col_wr_data_, 8 * r, 8)));
      s.out.push_back(static_cast<int32_t>(vpi::Bits(out_data_, 32 * r, 32)));
    }
    s.out_valid = vpi::Bits(out_valid_, 0, 1) != 0;
    s.a_fire = vpi::Bits(a_fire_, 0, 1) != 0;
    s.w_fire = vpi::Bits(w_fire_, 0, 1) != 0;
    return s;
  }

 private:
  vpi::HandleSet handles_;  // first: released after the probe is done
  inline static const std::string kTop = "TOP.tpu_mxu_top.";

  struct PeHandles {
    vpiHandle weight, shadow, act, psum, sw;
  };

  int dim_;
  int row_bits_ = 1;
  std::vector<PeHandles> pes_;
  vpiHandle array_act_, array_switch_, col_wr_valid_, col_wr_row_, col_wr_data_, out_valid_,
      out_data_, a_fire_, w_fire_;
};

}  // namespace tpu::sim
