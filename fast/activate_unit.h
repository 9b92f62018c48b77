// The fast engine's activation unit and VPU pipeline, register for register as in the RTL
// (rtl/tpu_activate_unit.sv reads accumulator rows; rtl/tpu_vpu.sv's stages add the bias,
// requantize, pool and add the residual, then write unified-buffer rows). Only the
// pipeline's valid bits shape timing; ChipValues computes the rows in bulk.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fast/decode.h"

namespace tpu::fast {

class ActivateUnit {
 public:
  bool Busy() const { return out_left_ != 0; }
  // Reads an accumulator row this cycle (not in the cycle an activate issues).
  bool AccRead(bool start) const { return rd_left_ != 0 && !start; }
  // Writes a unified-buffer row this cycle.
  bool Out() const { return residual_ ? s3_ : pool_ == kPoolNone ? s2_ : pool_valid_; }
  // Reads the residual row of the row in stage 1 from the unified buffer.
  bool ResidualRead() const { return s1_ && residual_; }
  bool RowIn() const { return acc_rd_valid_; }  // a row enters the VPU
  bool PipeEmpty() const { return !acc_rd_valid_ && !s1_ && !s2_ && !pool_valid_ && !s3_; }
  // Nothing to read, nothing in the pipeline: its clock edges change nothing.
  bool Idle() const { return !Busy() && rd_left_ == 0 && PipeEmpty(); }
  // How many cycles after this one (no activate starting in any) give the same signals but
  // for Out(): all, idle; while it reads an accumulator row a cycle with its pipeline full,
  // until its last row is read (a row out each cycle, or one in four with 2 x 2 pooling:
  // rows are still to come out while rows are still to be read); else none.
  uint64_t Repeats() const {
    if (Idle()) return ~uint64_t{0};
    const bool full = rd_left_ != 0 && acc_rd_valid_ && s1_ && s2_ && (!residual_ || s3_) &&
                      (pool_ != kPoolLanes || pool_valid_);
    return full ? rd_left_ - 1 : 0;
  }

  // `start`: the activate the controller issues in this cycle, or null; `acc_read`:
  // AccRead(start); `out`: Out().
  void Edge(const Decoded* start, bool acc_read, bool out) {
    if (s2_ && pool_ == kPoolLanes) {
      pool_valid_ = true;  // a row out per row in
    } else if (s2_ && pool_ != kPoolNone) {
      pool_valid_ = pool_count_ == 3;
      pool_count_ = (pool_count_ + 1) & 3;
    } else {
      pool_valid_ = false;
    }
    s3_ = s2_ && residual_;
    s2_ = s1_;
    s1_ = acc_rd_valid_;
    acc_rd_valid_ = acc_read;
    if (start) {
      rd_left_ = start->len;
      out_left_ = start->out_rows;
      pool_ = start->lanes                        ? kPoolLanes
              : !start->pooled                    ? kPoolNone
              : (start->flags & hw::kFlagPoolMax) ? kPoolMax
                                                  : kPoolAvg;
      residual_ = start->flags & hw::kFlagResidual;
    } else {
      if (rd_left_ != 0) --rd_left_;
      if (out) --out_left_;
    }
  }

 private:
  enum Pool : uint8_t { kPoolNone, kPoolAvg, kPoolMax, kPoolLanes };  // rtl's vpu_pool_e
  uint32_t rd_left_ = 0, out_left_ = 0, pool_count_ = 0;
  uint8_t pool_ = kPoolNone;
  bool residual_ = false;
  bool acc_rd_valid_ = false, s1_ = false, s2_ = false, pool_valid_ = false;
  bool s3_ = false;  // the residual stage
};

}  // namespace tpu::fast
