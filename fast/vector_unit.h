// The fast engine's vector unit, register for register as rtl/tpu_vector_unit.sv: a group
// of up to `sublanes` rows read a cycle, computed the next, written VectorLatency(op)
// cycles after that through a delay line (a reduction over rows writes its one row after
// the last group). Only the registers that shape timing and the counters are kept;
// ChipValues computes the rows in bulk (arith/vector.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "fast/decode.h"

namespace tpu::fast {

class VectorUnit {
 public:
  explicit VectorUnit(uint32_t sublanes) : sublanes_(sublanes) {}

  bool Busy() const { return left_ != 0 || vld_ || Pending(); }
  // Buffer rows read this cycle on the three ports (a; b; the result's old rows).
  uint64_t ReadRows() const {
    if (left_ == 0) return 0;
    const uint64_t g = Group();
    const bool uses_b = kind_ == hw::VectorKind::kBinary || kind_ == hw::VectorKind::kSelect;
    return g * wa_ + (uses_b ? (bcast_ ? wb_ : g * wb_) : 0) +
           (kind_ == hw::VectorKind::kSelect ? g * wo_ : 0);
  }
  // Buffer rows written this cycle.
  uint64_t WriteRows() const { return line_valid_[lat_ - 1] ? line_rows_[lat_ - 1] : 0; }

  // How many cycles after this one (no vector instruction starting) give the same signals:
  // all, idle; in the middle of an instruction (a whole group read each cycle, the delay
  // line full of alike groups), until its last whole group is read; else none.
  uint64_t Repeats() const {
    if (!Busy()) return ~uint64_t{0};
    if (left_ < sublanes_ || !vld_ || last_ || cnt_ != sublanes_) return 0;
    const bool valid = kind_ != hw::VectorKind::kRows;  // a reduction writes after its last
    for (uint32_t i = 0; i < lat_; ++i)
      if (line_valid_[i] != valid || (valid && line_rows_[i] != sublanes_ * wo_)) return 0;
    return left_ / sublanes_ - 1;
  }
  // The clock edges of `k` cycles whose signals repeat this one's (Repeats): a group read
  // each, alike groups into the delay line.
  void Edges(uint64_t k) {
    if (!Busy()) {
      Edge(nullptr);
      return;
    }
    const bool rows = kind_ == hw::VectorKind::kRows;
    for (size_t i = line_valid_.size(); i-- > 0;) {
      line_valid_[i] = i >= k ? line_valid_[i - k] : !rows;
      line_rows_[i] = i >= k ? line_rows_[i - k] : (rows ? 1 : cnt_) * wo_;
    }
    const uint32_t before_last = left_ - static_cast<uint32_t>(k - 1) * sublanes_;
    last_ = before_last == sublanes_;
    left_ = before_last - sublanes_;
  }

  // `start`: the vector instruction the controller issues in this cycle, or null.
  void Edge(const Decoded* start) {
    const uint32_t g = Group();
    for (size_t i = line_valid_.size() - 1; i > 0; --i) {
      line_valid_[i] = line_valid_[i - 1];
      line_rows_[i] = line_rows_[i - 1];
    }
    line_valid_[0] = vld_ && (kind_ != hw::VectorKind::kRows || last_);
    line_rows_[0] = (kind_ == hw::VectorKind::kRows ? 1 : cnt_) * wo_;
    const bool fire = left_ != 0;
    vld_ = fire;
    last_ = fire && left_ == g;
    cnt_ = g;
    if (start) {
      line_valid_.fill(false);
      const VectorOperands& v = start->vec;
      kind_ = v.kind;
      lat_ = static_cast<uint32_t>(hw::Info(v.op).latency);
      wa_ = v.wa;
      wb_ = v.wb;
      wo_ = v.wo;
      bcast_ = v.bcast;
      left_ = start->len;
    } else if (fire) {
      left_ -= g;
    }
  }

 private:
  uint32_t Group() const { return std::min(left_, sublanes_); }
  bool Pending() const {
    for (uint32_t i = 0; i < lat_; ++i)
      if (line_valid_[i]) return true;
    return false;
  }

  uint32_t sublanes_;
  hw::VectorKind kind_ = hw::VectorKind::kBinary;
  uint32_t lat_ = 1, wa_ = 1, wb_ = 1, wo_ = 1;
  bool bcast_ = false;
  uint32_t left_ = 0, cnt_ = 0;
  bool vld_ = false, last_ = false;
  std::array<bool, hw::kVectorMaxLatency> line_valid_ = {};
  std::array<uint32_t, hw::kVectorMaxLatency> line_rows_ = {};
};

}  // namespace tpu::fast
