// The fast engine's DMA engines and weight FIFO, register for register as in the RTL:
// rtl/tpu_host_dma.sv (with its two-row write buffer, and its weight-memory port for read_hbm
// and write_hbm),
// rtl/tpu_weight_dma.sv and rtl/tpu_fifo.sv. Each unit is its state, the signals it drives in a
// cycle (from that state and the memory port's answer) and Edge(), the clock edge that ends the
// cycle.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fast/decode.h"

namespace tpu::fast {

class HostDma {
 public:
  bool Busy() const { return req_left_ || resp_left_ || rd_left_ || rd_pending_ || obuf_; }
  // A request to the host memory: a read row, or a buffered row to write.
  bool ReqValid() const { return !hbm_ && Asks(); }
  // A request to the weight memory (read_hbm, write_hbm), on the unit's port there.
  bool HbmReqValid() const { return hbm_ && Asks(); }
  bool Writing() const { return write_; }
  bool Params() const { return params_; }
  bool RowsPending() const { return rd_pending_; }
  uint32_t ReqAddr() const { return static_cast<uint32_t>(req_addr_); }
  uint64_t HbmAddr() const { return req_addr_; }
  uint32_t WriteRow() const { return write_row_; }

  // What the unit does in a cycle in which the memory it reads (the host memory, or the
  // weight memory for read_hbm) accepted a request (`fire`) and presented a read row (`resp`).
  struct Signals {
    bool resp_take = false;  // a read row into the unified buffer (or a parameter set)
    bool obuf_pop = false;   // a buffered row to the memory
    bool ub_read = false;    // a unified-buffer row into the write buffer
  };
  Signals Cycle(bool fire, bool resp) const {
    Signals s;
    s.resp_take = !write_ && resp && resp_left_ != 0;
    s.obuf_pop = fire && write_;
    s.ub_read = write_ && rd_left_ != 0 && (obuf_ - s.obuf_pop + rd_pending_ < 2);
    return s;
  }

  // How many cycles after this one repeat its signals `s` when the memory answers each as
  // it did this one (`fire`, `resp`) and no instruction starts: rows stream a row a cycle
  // while the rows left last, the write buffer as full as it was. Unbounded: ~0.
  uint64_t Repeats(const Signals& s, bool fire, bool resp) const {
    uint64_t k = ~uint64_t{0};
    if (write_) {
      const bool push = rd_pending_ && obuf_ != 2;
      if (push != s.obuf_pop || rd_pending_ != s.ub_read) return 0;
      if (s.ub_read) k = rd_left_ - 1;
      return k;
    }
    if (resp && !s.resp_take) return 0;
    if (fire) k = req_left_ - 1;
    if (s.resp_take) k = std::min<uint64_t>(k, resp_left_ - 1);
    return k;
  }

  // The clock edges of `k` cycles whose signals repeat this one's (Repeats): the rows
  // stream, the write buffer stays as full.
  void Edges(const Signals& s, bool fire, uint64_t k, uint32_t row_bytes) {
    const auto k32 = static_cast<uint32_t>(k);
    if (fire) {
      req_addr_ += k * row_bytes;
      req_left_ -= k32;
      if (write_) write_row_ += k32;
    }
    if (s.resp_take) resp_left_ -= k32;
    if (s.ub_read) rd_left_ -= k32;
    rd_pending_ = s.ub_read;
  }

  // `start`: the read_host, write_host or read_hbm the controller issues in this cycle, or null;
  // a row is `row_bytes` bytes, a parameter set `param_rows` rows.
  void Edge(const Decoded* start, const Signals& s, bool fire, uint32_t row_bytes,
            uint32_t param_rows) {
    const bool obuf_push = rd_pending_ && obuf_ != 2;
    if (start) {
      const auto op = static_cast<hw::Opcode>(start->op);
      const bool write = op == hw::Opcode::kWriteHost || op == hw::Opcode::kWriteHbm;
      const bool params = !write && (start->flags & hw::kFlagParams);
      const uint32_t rows = params ? start->len * param_rows : start->len;
      write_ = write;
      params_ = params;
      hbm_ = op == hw::Opcode::kReadHbm || op == hw::Opcode::kWriteHbm;
      req_left_ = rows;
      req_addr_ = hbm_ ? start->weight_addr : write ? start->dst : start->src;
      rd_left_ = write ? rows : 0;
      resp_left_ = write ? 0 : rows;
      write_row_ = start->src;
    } else {
      if (fire) {
        req_addr_ += row_bytes;
        --req_left_;
        if (write_) ++write_row_;
      }
      if (s.resp_take) --resp_left_;
      if (s.ub_read) --rd_left_;
      rd_pending_ = s.ub_read;
    }
    obuf_ = obuf_ + obuf_push - s.obuf_pop;
  }

 private:
  // A request for the memory the instruction uses: a buffered row to write, or a row to read.
  bool Asks() const { return write_ ? obuf_ != 0 : req_left_ != 0; }

  bool write_ = false, params_ = false, hbm_ = false, rd_pending_ = false;
  uint64_t req_addr_ = 0;  // the next request's address (the host memory's: 32 bits)
  uint32_t req_left_ = 0, resp_left_ = 0, rd_left_ = 0, obuf_ = 0;
  uint32_t write_row_ = 0;  // the unified-buffer row of the next accepted write
};

// The weight FIFO: rows in from the weight DMA, out into the matrix unit's shadow registers.
class WeightFifo {
 public:
  explicit WeightFifo(uint32_t rows) : rows_(rows) {}
  uint32_t Rows() const { return rows_; }
  uint32_t Count() const { return count_; }
  bool NotEmpty() const { return count_ != 0; }
  void Edge(bool push, bool pop) {
    count_ = count_ + (push && count_ != rows_) - (pop && count_ != 0);
  }
  // `k` clock edges that push and pop as this one (neither full nor empty on the way).
  void Edges(bool push, bool pop, uint64_t k) {
    count_ = count_ + static_cast<uint32_t>(k) * push - static_cast<uint32_t>(k) * pop;
  }

 private:
  uint32_t rows_, count_ = 0;
};

// A matrix unit's weight DMA (rtl/tpu_weight_dma.sv): read_weights requests weight-memory
// rows while the FIFO has room for them and the rows still on their way; load_weights reads
// unified-buffer rows on its own port (one cycle of latency), and with `transpose` fills a
// tile buffer with a tile's N rows and then pushes its N columns.
class WeightDma {
 public:
  bool Busy() const { return req_left_ || resp_left_; }
  bool Room(const WeightFifo& fifo) const { return outstanding_ + fifo.Count() < fifo.Rows(); }
  // A weight-memory request.
  bool ReqValid(const WeightFifo& fifo) const { return !from_ub_ && req_left_ != 0 && Room(fifo); }
  // A unified-buffer row read (load_weights).
  bool UbRead(const WeightFifo& fifo, uint32_t n) const {
    return from_ub_ && req_left_ != 0 && (transpose_ ? tile_reads_ < n : Room(fifo));
  }
  // A column of the full tile buffer pushed (load_weights transpose).
  bool ColumnPush(const WeightFifo& fifo, uint32_t n) const {
    return transpose_ && tile_rows_ == n && fifo.Count() < fifo.Rows();
  }
  // Rows to push, but the FIFO (with the rows on their way) is full.
  bool FifoFull(const WeightFifo& fifo, uint32_t n) const {
    if (transpose_) return tile_rows_ == n && !ColumnPush(fifo, n);
    return req_left_ != 0 && !Room(fifo);
  }
  // A row into the FIFO: one the memory presents, one read from the buffer last cycle, or
  // a column of the tile buffer.
  bool Take(bool resp, const WeightFifo& fifo, uint32_t n) const {
    if (transpose_) return ColumnPush(fifo, n);
    if (from_ub_) return ub_pending_;
    return resp && resp_left_ != 0;
  }
  bool UbPending() const { return ub_pending_; }
  // How many cycles after this one repeat its and the FIFO's signals when the memory
  // answers each as it did this one (`fire`, `resp`), the unit reads buffer rows and takes
  // rows as it did (`ub_read`, `take`) and the shadow registers load as they did (`load`):
  // rows streaming a row a cycle (from the weight memory, from the buffer, or a tile
  // buffer's rows in and then its columns out) while the rows left, the tile buffer's rows
  // or columns and the FIFO's room and rows last. Unbounded: ~0.
  uint64_t Repeats(const WeightFifo& fifo, bool fire, bool resp, bool ub_read, bool take, bool load,
                   uint32_t n) const {
    constexpr uint64_t kAll = ~uint64_t{0};
    const uint64_t rows = fifo.Rows(), count = fifo.Count(), s = outstanding_ + count;
    if (from_ub_) {
      if (ub_pending_ != ub_read) return 0;  // a read starting or ending
      fire = ub_read;
      resp = take;
    }
    if (resp != take || (take && count == 0)) return 0;
    uint64_t k = kAll;
    if (fire) k = req_left_ - 1;
    if (take) k = std::min<uint64_t>(k, resp_left_ - 1);
    if (load && !take) k = std::min(k, count - 1);  // the FIFO empties by a row a cycle
    if (transpose_) {
      if (FifoFull(fifo, n) && load) return 0;
      if (ub_read) k = std::min<uint64_t>(k, n - 1 - tile_reads_);
      if (take) k = std::min<uint64_t>(k, n - 1 - tile_col_);
      if (take && !load) k = std::min(k, rows - 1 - count);
      return k;
    }
    // Asking while the FIFO and the rows on their way leave room; fire - load more a cycle.
    if (req_left_ != 0 && s < rows && fire && !load) k = std::min(k, rows - 1 - s);
    if (req_left_ != 0 && s >= rows && load && !fire) k = std::min(k, s - rows);
    return k;
  }

  // The clock edges of `k` cycles whose signals repeat this one's (Repeats), `fire` a memory
  // request taken or a buffer row read: the rows stream; a tile buffer's last column pushed
  // in the last of them empties it.
  void Edges(bool fire, bool ub_read, bool take, uint64_t k, uint32_t n) {
    const auto k32 = static_cast<uint32_t>(k);
    if (fire) req_left_ -= k32;
    if (take) resp_left_ -= k32;
    if (!transpose_) {
      outstanding_ = outstanding_ + k32 * fire - k32 * take;
    } else {
      tile_reads_ += k32 * ub_read;
      tile_rows_ += k32 * ub_pending_;
      if (take && tile_col_ + k32 == n) {
        tile_col_ = tile_rows_ = tile_reads_ = 0;
      } else if (take) {
        tile_col_ += k32;
      }
    }
    ub_pending_ = ub_read;
  }

  // `start`: the read_weights or load_weights the controller issues in this cycle, or null;
  // `fire`: a memory request taken or a buffer row read.
  void Edge(const Decoded* start, bool fire, bool ub_read, bool take, uint32_t n) {
    if (start) {
      from_ub_ = start->op == static_cast<uint8_t>(hw::Opcode::kLoadWeights);
      transpose_ = from_ub_ && (start->flags & hw::kFlagTranspose);
      req_left_ = resp_left_ = start->len * n;
      return;
    }
    if (fire) --req_left_;
    if (take) --resp_left_;
    if (!transpose_) {
      outstanding_ = outstanding_ + fire - take;
    } else {
      tile_reads_ += ub_read;
      tile_rows_ += ub_pending_;
      if (take) {
        if (tile_col_ == n - 1) {
          tile_col_ = tile_rows_ = tile_reads_ = 0;
        } else {
          ++tile_col_;
        }
      }
    }
    ub_pending_ = ub_read;
  }

 private:
  bool from_ub_ = false, transpose_ = false, ub_pending_ = false;
  uint32_t req_left_ = 0, resp_left_ = 0, outstanding_ = 0;
  uint32_t tile_reads_ = 0, tile_rows_ = 0, tile_col_ = 0;  // the tile buffer (transpose)
};

}  // namespace tpu::fast
