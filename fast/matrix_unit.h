// The fast engine's matrix side, register for register as in the RTL: the feeder that
// reads unified-buffer rows into a two-row buffer in front of the array
// (rtl/tpu_mxu_feeder.sv; only a row's switch and last bits shape timing, the values are
// computed in bulk by ChipValues) and the matrix unit's shadow-register control and rows
// in flight (rtl/tpu_mxu.sv; a row entering in cycle c reaches the accumulators in cycle
// c + 2N, where the accumulators (rtl/tpu_accumulators.sv) add it in the same cycle).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fast/decode.h"
#include "fast/memory_timing.h"

namespace tpu::fast {

class Feeder {
 public:
  bool Busy() const { return left_ || pending_ || buf_; }
  bool Valid() const { return buf_ != 0; }  // a row stands at the array's input
  bool Switch() const { return Valid() && buf_sw_[head_]; }
  bool Last() const { return Valid() && buf_last_[head_]; }
  bool Pending() const { return pending_; }
  // Reads a unified-buffer row this cycle, when the array takes one (`fire`) or has room.
  bool Read(bool fire) const { return left_ != 0 && (buf_ - fire + pending_ < 2); }
  // How many cycles after this one (in which the array takes a row, `fire`, and the feeder
  // reads one, `read`) give the same signals, no matmul starting: all, idle or waiting
  // with nothing read or on its way; while it streams a row a cycle in the middle of a
  // matmul (one row buffered, one read pending, neither the first nor the last, no
  // switch), until its last row is read (the last flag reaches the array's input two
  // cycles after); else none.
  uint64_t Repeats(bool fire, bool read) const {
    if (!Busy()) return kNever;
    // Waiting (a switch row for its tile, or nothing to read): nothing moves.
    if (!fire && !read && !pending_) return kNever;
    const bool middle = fire && read && buf_ == 1 && pending_ && !first_ && !pending_sw_ &&
                        !pending_last_ && !buf_sw_[head_] && !buf_last_[head_];
    return middle ? left_ - 1 : 0;
  }

  // The clock edges of `k` cycles whose signals repeat this one's (Repeats): waiting, one
  // edge is all of them; in the middle of a matmul, a row read and a row into the array
  // each cycle, the buffered row neither a switch nor the last, the last read's row the
  // last when it is.
  void Edges(bool read, bool fire, uint64_t k) {
    if (!fire && !read && !pending_) {
      Edge(nullptr, false, false);
      return;
    }
    pending_last_ = left_ - (k - 1) == 1;
    left_ -= static_cast<uint32_t>(k);
    head_ ^= static_cast<uint32_t>(k & 1);
    buf_sw_[0] = buf_sw_[1] = buf_last_[0] = buf_last_[1] = false;
  }

  // `start`: the matmul the controller issues in this cycle, or null; `read`: Read(fire).
  void Edge(const Decoded* start, bool read, bool fire) {
    const bool pending_sw_next = first_ && switch_;
    const bool pending_last_next = left_ == 1;
    const bool buf_push = pending_ && buf_ != 2;
    if (start) {
      left_ = start->len;
      first_ = true;
      switch_ = start->flags & hw::kFlagSwitch;
    } else if (read) {
      --left_;
      first_ = false;
    }
    if (fire) {
      head_ ^= 1;
      --buf_;
    }
    if (buf_push) {
      buf_sw_[(head_ + buf_) & 1] = pending_sw_;
      buf_last_[(head_ + buf_) & 1] = pending_last_;
      ++buf_;
    }
    pending_ = read && !start;
    pending_sw_ = pending_sw_next;
    pending_last_ = pending_last_next;
  }

 private:
  uint32_t left_ = 0, buf_ = 0, head_ = 0;
  bool first_ = false, switch_ = false, pending_ = false, pending_sw_ = false;
  bool pending_last_ = false;
  bool buf_sw_[2] = {false, false}, buf_last_[2] = {false, false};
};

class MatrixUnit {
 public:
  explicit MatrixUnit(uint64_t n) : n_(n), latency_(2 * n), flight_(2 * n + 1) {}

  bool InFlight() const { return count_ != 0; }
  bool ShadowFull() const { return shadow_full_; }
  // The oldest row in flight reaches the accumulators this cycle.
  bool Out(uint64_t cycle) const { return count_ != 0 && flight_[head_] + latency_ == cycle; }
  // The cycle the oldest row in flight reaches the accumulators (kNever: none in flight).
  uint64_t NextOut() const { return count_ != 0 ? flight_[head_] + latency_ : kNever; }
  // How many cycles after `cycle` (in which a row leaves the array or not, `out`, and one
  // enters or not, `fire`, as in each of those cycles) a row keeps leaving or not leaving
  // in each. Rows leave in the cycles their entries plus the latency; a run of rows that
  // entered in consecutive cycles leaves in consecutive cycles.
  uint64_t Repeats(uint64_t cycle, bool out, bool fire) const {
    if (count_ == 0) return fire ? latency_ - 1 : kNever;
    size_t tail = head_ + count_ - 1;
    if (tail >= flight_.size()) tail -= flight_.size();
    const uint64_t first = flight_[head_], last = flight_[tail];
    if (!out) return std::min(first + latency_, fire ? cycle + latency_ : kNever) - cycle - 1;
    if (last - first + 1 != count_) return Run() - 1;  // a gap: up to it
    return fire && last + 1 == cycle ? kNever : count_ - 1;
  }
  // How many of the rows in flight, from the oldest, entered in consecutive cycles (at
  // least one is in flight): the entries rise, so those are a prefix, found by halving.
  uint64_t Run() const {
    auto at = [this](size_t i) {
      const size_t j = head_ + i;
      return flight_[j >= flight_.size() ? j - flight_.size() : j];
    };
    const uint64_t first = flight_[head_];
    size_t lo = 1, hi = count_;  // at(lo - 1) in the run; at(hi) beyond it (or the end)
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (at(mid) - first == mid) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  // The shadow registers take a weight row: they have room, or the tile in them is being
  // switched into the array this cycle.
  bool WeightReady(bool switch_fire) const { return !shadow_full_ || switch_fire; }

  // How many cycles after this one keep loading a weight row a cycle (`load`) or not, no
  // tile switching: until the shadow registers hold the tile.
  uint64_t LoadRepeats(bool load, bool switch_fire) const {
    if (switch_fire) return 0;
    return load ? n_ - 1 - wr_row_ : kNever;
  }

  // The clock edges of cycles first .. first + k - 1, whose signals repeat one another's
  // (Repeats, LoadRepeats; no tile switching): the shadow registers take a row a cycle
  // (full after the tile's last), rows leave and enter a row a cycle (a row entering in
  // each of more cycles than rows in flight leaves only the last of them in flight).
  void Edges(uint64_t first, uint64_t k, bool load, bool out, bool fire) {
    if (load && wr_row_ + k == n_) {
      wr_row_ = 0;
      shadow_full_ = true;
    } else if (load) {
      wr_row_ += k;
    }
    if (out && fire && k >= count_) {  // every row now in flight entered in these cycles
      head_ = 0;
      for (size_t i = 0; i < count_; ++i) flight_[i] = first + k - count_ + i;
      return;
    }
    if (out) {
      head_ = (head_ + k) % flight_.size();
      count_ -= k;
    }
    for (uint64_t i = 0; fire && i < k; ++i) {
      size_t tail = head_ + count_;
      if (tail >= flight_.size()) tail -= flight_.size();
      flight_[tail] = first + i;
      ++count_;
    }
  }

  // `load`: a weight row from the FIFO into the shadow registers; `switch_fire`: the
  // shadow tile becomes the array's; `out`: Out(cycle); `fire`: a row enters the array.
  void Edge(uint64_t cycle, bool load, bool switch_fire, bool out, bool fire) {
    if (switch_fire) shadow_full_ = false;
    if (load) {
      if (wr_row_ == n_ - 1) {
        wr_row_ = 0;
        shadow_full_ = true;
      } else {
        ++wr_row_;
      }
    }
    if (out) {
      head_ = head_ + 1 == flight_.size() ? 0 : head_ + 1;
      --count_;
    }
    if (fire) {
      size_t tail = head_ + count_;
      if (tail >= flight_.size()) tail -= flight_.size();
      flight_[tail] = cycle;
      ++count_;
    }
  }

 private:
  uint64_t n_, latency_;
  bool shadow_full_ = false;
  uint64_t wr_row_ = 0;
  std::vector<uint64_t> flight_;  // the cycles in which the rows in flight entered
  size_t head_ = 0, count_ = 0;
};

}  // namespace tpu::fast
