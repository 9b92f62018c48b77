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

namespace probe_mxu = hw::signals::probe_mxu;

// One PE during a cycle (its registers, set by the previous clock edge). Operands are int8
// values, or on a bf16 model bfloat16 bit patterns; partial sums int32 values, or float32
// bit patterns.
struct PeState {
  int32_t weight = 0;  // active (stationary) weight
  int32_t shadow = 0;  // the next tile's weight, loading
  int32_t act = 0;     // activation held, passed right next cycle
  int32_t psum = 0;    // partial sum held, passed down next cycle
  bool sw = false;     // the weight-switch bit travelling with the activation
};

// The array during a cycle, sampled before the clock edge that ends it.
struct ArrayState {
  std::vector<PeState> pe;      // dim x dim, row-major (row = k lane, column = output)
  std::vector<int32_t> act_in;  // entering each row (from the input skew) at this edge
  std::vector<bool> switch_in;
  std::vector<bool> w_write;            // a weight is written into column c's shadow at this edge
  std::vector<int> w_row;               //   ... at this row
  std::vector<int32_t> w_data;          //   ... this value
  bool out_valid = false;               // a de-skewed result row leaves the matrix unit
  std::vector<int32_t> out;             // ... its values
  bool a_fire = false, w_fire = false;  // a row / weight row enters at this edge
};

class MxuProbe {
 public:
  // `operand_bits`: 8 (int8) or 16 (bfloat16).
  MxuProbe(int dim, int operand_bits)
      : p_(dim, probe_mxu::kScope, probe_mxu::kPe,
           {probe_mxu::kPeWeight, probe_mxu::kPeShadow, probe_mxu::kPeAct, probe_mxu::kPePsum,
            probe_mxu::kPeSwitch},
           {probe_mxu::kArrayAct, probe_mxu::kArraySwitch, probe_mxu::kColWrValid,
            probe_mxu::kColWrRow, probe_mxu::kColWrData, probe_mxu::kOutValid, probe_mxu::kOutData,
            probe_mxu::kAFire, probe_mxu::kWFire}),
        row_bits_(vpi::BitsFor(dim)),
        ob_(operand_bits) {}

  ArrayState Sample() const {
    ArrayState s;
    const size_t pes = static_cast<size_t>(p_.dim()) * p_.dim();
    s.pe.resize(pes);
    for (size_t i = 0; i < pes; ++i) {
      s.pe[i].weight = Operand(p_.Pe(i, kWeight, ob_));
      s.pe[i].shadow = Operand(p_.Pe(i, kShadow, ob_));
      s.pe[i].act = Operand(p_.Pe(i, kAct, ob_));
      s.pe[i].psum = static_cast<int32_t>(p_.Pe(i, kPsum, 32));
      s.pe[i].sw = p_.Pe(i, kSwitch, 1) != 0;
    }
    for (int r = 0; r < p_.dim(); ++r) {
      s.act_in.push_back(Operand(p_.Signal(kArrayAct, ob_ * r, ob_)));
      s.switch_in.push_back(p_.Signal(kArraySwitch, r, 1) != 0);
      s.w_write.push_back(p_.Signal(kColWrValid, r, 1) != 0);
      s.w_row.push_back(static_cast<int>(p_.Signal(kColWrRow, row_bits_ * r, row_bits_)));
      s.w_data.push_back(Operand(p_.Signal(kColWrData, ob_ * r, ob_)));
      s.out.push_back(static_cast<int32_t>(p_.Signal(kOutData, 32 * r, 32)));
    }
    s.out_valid = p_.Signal(kOutValid, 0, 1) != 0;
    s.a_fire = p_.Signal(kAFire, 0, 1) != 0;
    s.w_fire = p_.Signal(kWFire, 0, 1) != 0;
    return s;
  }

 private:
  // An int8 operand's value, or a bfloat16 operand's bits.
  int32_t Operand(uint32_t bits) const {
    return ob_ == 8 ? static_cast<int8_t>(bits) : static_cast<int32_t>(bits);
  }
  // The places of the registers and signals given to the ArrayProbe above.
  enum PeReg { kWeight, kShadow, kAct, kPsum, kSwitch };
  enum Sig {
    kArrayAct,
    kArraySwitch,
    kColWrValid,
    kColWrRow,
    kColWrData,
    kOutValid,
    kOutData,
    kAFire,
    kWFire
  };
  vpi::ArrayProbe p_;
  int row_bits_;
  int ob_;  // operand bits
};

}  // namespace tpu::sim
