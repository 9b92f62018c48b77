// Reads the state of every PE of a Verilated matrix-subsystem model by hierarchical name,
// through Verilator's VPI (the model must be built with --vpi --public-flat-rw: the
// teaching models, cmake/TpusimRtl.cmake). This is how `tpusim teach` shows the RTL's own
// signals rather than a separate model of the array.
#pragma once

#include <verilated_vpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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
        const std::string pe = arr + "gen_row__BRA__" + std::to_string(r) +
                               "__KET__.gen_col__BRA__" + std::to_string(c) + "__KET__.u_pe.";
        pes_.push_back({Find(pe + "weight_active_q"), Find(pe + "weight_shadow_q"),
                        Find(pe + "act_q"), Find(pe + "psum_q"), Find(pe + "switch_q")});
      }
    }
    array_act_ = Find(kTop + "u_matrix.u_mxu.array_act");
    array_switch_ = Find(kTop + "u_matrix.u_mxu.array_switch");
    col_wr_valid_ = Find(kTop + "u_matrix.u_mxu.col_wr_valid");
    col_wr_row_ = Find(kTop + "u_matrix.u_mxu.col_wr_row");
    col_wr_data_ = Find(kTop + "u_matrix.u_mxu.col_wr_data");
    out_valid_ = Find(kTop + "u_matrix.u_mxu.out_valid_o");
    out_data_ = Find(kTop + "u_matrix.u_mxu.out_data_o");
    a_fire_ = Find(kTop + "u_matrix.u_mxu.a_fire");
    w_fire_ = Find(kTop + "u_matrix.u_mxu.w_fire");
    row_bits_ = dim > 1 ? BitsFor(dim) : 1;
  }

  ArrayState Sample() const {
    ArrayState s;
    s.pe.resize(pes_.size());
    for (size_t i = 0; i < pes_.size(); ++i) {
      s.pe[i].weight = static_cast<int8_t>(Bits(pes_[i].weight, 0, 8));
      s.pe[i].shadow = static_cast<int8_t>(Bits(pes_[i].shadow, 0, 8));
      s.pe[i].act = static_cast<int8_t>(Bits(pes_[i].act, 0, 8));
      s.pe[i].psum = static_cast<int32_t>(Bits(pes_[i].psum, 0, 32));
      s.pe[i].sw = Bits(pes_[i].sw, 0, 1) != 0;
    }
    for (int r = 0; r < dim_; ++r) {
      s.act_in.push_back(static_cast<int8_t>(Bits(array_act_, 8 * r, 8)));
      s.switch_in.push_back(Bits(array_switch_, r, 1) != 0);
      s.w_write.push_back(Bits(col_wr_valid_, r, 1) != 0);
      s.w_row.push_back(static_cast<int>(Bits(col_wr_row_, row_bits_ * r, row_bits_)));
      s.w_data.push_back(static_cast<int8_t>(Bits(col_wr_data_, 8 * r, 8)));
      s.out.push_back(static_cast<int32_t>(Bits(out_data_, 32 * r, 32)));
    }
    s.out_valid = Bits(out_valid_, 0, 1) != 0;
    s.a_fire = Bits(a_fire_, 0, 1) != 0;
    s.w_fire = Bits(w_fire_, 0, 1) != 0;
    return s;
  }

 private:
  // Verilator's VPI names scopes as its generated code does: generate-loop indices are
  // spelled gen_row__BRA__0__KET__ for gen_row[0].
  inline static const std::string kTop = "TOP.tpu_mxu_top.";

  struct PeHandles {
    vpiHandle weight, shadow, act, psum, sw;
  };

  static int BitsFor(int n) {
    int b = 0;
    while ((1 << b) < n) ++b;
    return b;
  }

  static vpiHandle Find(const std::string& name) {
    vpiHandle h = vpi_handle_by_name(const_cast<PLI_BYTE8*>(name.c_str()), nullptr);
    if (!h) {
      throw std::runtime_error("the teaching model has no signal " + name +
                               " (it must be built with --vpi --public-flat-rw)");
    }
    return h;
  }

  // `width` bits from bit `lsb` of a signal, as an unsigned number (width <= 32).
  static uint32_t Bits(vpiHandle h, int lsb, int width) {
    s_vpi_value v;
    v.format = vpiVectorVal;
    vpi_get_value(h, &v);
    const int words = (vpi_get(vpiSize, h) + 31) / 32;
    const int w = lsb / 32;
    const uint64_t lo = static_cast<uint32_t>(v.value.vector[w].aval);
    const uint64_t hi = w + 1 < words ? static_cast<uint32_t>(v.value.vector[w + 1].aval) : 0;
    const uint64_t bits = ((hi << 32) | lo) >> (lsb % 32);
    return static_cast<uint32_t>(bits & ((uint64_t{1} << width) - 1));
  }

  int dim_;
  int row_bits_ = 1;
  std::vector<PeHandles> pes_;
  vpiHandle array_act_, array_switch_, col_wr_valid_, col_wr_row_, col_wr_data_, out_valid_,
      out_data_, a_fire_, w_fire_;
};

}  // namespace tpu::sim
