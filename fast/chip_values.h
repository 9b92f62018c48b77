// The data side of the fast engine: the chip's memories and what each instruction does to
// them, applied in bulk when the instruction issues rather than row by row. Each matrix unit
// has its own accumulators, active tile and tile order.
//
// Why that is exact: the controller issues in program order and delays an instruction
// while another unit still uses rows it reads or writes (docs/architecture.md), so every
// program behaves as if each instruction ran to completion before the next. The two
// places where the moment matters are handled as the hardware does: a `matmul ... switch`
// multiplies with the next tile in the order `read_weights` brought them, even when that
// read_weights issues after the matmul (the matmul then waits here until it does), and
// `write_host` and `write_hbm` rows land in host or weight memory one by one as the memory
// accepts them, so a run that stops early leaves exactly the rows the RTL would have
// written. A tile that read_weights brought is read from weight memory only when a matmul
// switches to it, so a write_hbm (which issues once every weight DMA of its core is idle,
// and on another core only after a barrier) first copies the tiles brought and not yet used,
// on every core: they keep the values the weight DMAs read.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "arith/bf16.h"
#include "fast/decode.h"
#include "host/common/zeroed_memory.h"

namespace tpu::fast {

class ChipValues;

// The memories outside the chip: host memory and weight memory, shared by its cores (each
// of which registers itself in `cores`).
struct ExternalMemories {
  explicit ExternalMemories(const ChipParams& p)
      : host(static_cast<uint64_t>(p.host_mem_bytes)),
        weight(static_cast<uint64_t>(p.weight_mem_bytes)) {}
  ZeroedMemory<uint8_t> host, weight;
  std::vector<ChipValues*> cores;
};

// One core's memories and what its instructions do to them and to the external ones.
class ChipValues {
 public:
  ChipValues(const ChipParams& p, ExternalMemories& external);
  ChipValues(const ChipValues&) = delete;
  ChipValues& operator=(const ChipValues&) = delete;

  // A new run: the weight FIFO and the matrix unit's shadow registers start empty (the
  // chip is reset); the memories and the active weights keep what they hold, as in the RTL.
  void BeginRun();
  // The instruction issues (its checks passed).
  void Issue(const Decoded& d);
  // A write_host row was accepted by host memory: unified-buffer row `ub_row` lands at
  // `host_addr`.
  void HostWrite(uint64_t host_addr, uint32_t ub_row);
  // A write_hbm row was accepted by weight memory.
  void HbmWrite(uint64_t weight_addr, uint32_t ub_row);

 private:
  void Matmul(const Decoded& d);
  void MatmulMax(const Decoded& d);

  // The vector unit's activate in format F (arith/format.h).
  template <class F>
  void Activate(const Decoded& d);
  // activate residual, in the order the hardware moves the rows: `row(k, res, out)` writes
  // output row k from residual row `res` (T: int8_t, or uint16_t in bf16).
  template <class T>
  void InResidualOrder(const Decoded& d, const std::function<void(uint32_t, const T*, T*)>& row);

  // A tile in the weight FIFO: where read_weights read it in weight memory (which holds
  // still during a run), or the operands load_weights took from the unified buffer.
  struct Tile {
    uint64_t addr = 0;
    std::vector<uint8_t> operands;  // N x N operands, or empty: at addr in weight memory
  };

  // A matrix unit's values: its accumulators, its active tile and the tiles read_weights
  // and load_weights brought for it.
  struct Mxu {
    Mxu(uint64_t acc_values, size_t tile_bytes, size_t tile_values)
        : acc(acc_values), active(tile_bytes, 0), active_f(tile_values, 0.0f) {}
    ZeroedMemory<int32_t> acc;  // int32, or float32 bit patterns
    // The active tile (row r multiplies activation lane r), as int8 and widened to float for
    // the product, and the bounding box of its non-zero weights.
    std::vector<uint8_t> active;  // N x N operands: int8, or bfloat16
    std::vector<float> active_f;
    int64_t row_lo = 0, row_hi = 0, col_lo = 0, col_hi = 0;  // int8's box of non-zero weights
    arith::TileNonZeros nonzeros;                            // bf16's
    // The tiles brought this run, in FIFO order.
    std::vector<Tile> tiles;
    size_t next_tile = 0;
    // Matmuls waiting for a tile that no read_weights has brought yet (and those after them).
    std::deque<Decoded> waiting;
  };

  // The tiles read_weights brought and no matmul has used yet: copied out of weight memory.
  void KeepPendingTiles();
  // Loads the next tile from the FIFO's order into unit m's active weights.
  void SwitchTile(Mxu& m);
  // read_weights and load_weights: tiles into unit d.mxu's FIFO order, then the matmuls that
  // waited for them.
  void BringTiles(const Decoded& d);

  // The bfloat16 chip's matmul and its matmul max (docs/bf16.md).
  void MatmulBf16(const Decoded& d);
  // The operands of unified-buffer row `row` (int8_t or uint16_t), and the accumulators.
  template <class T>
  T* Ub(uint64_t row) {
    return reinterpret_cast<T*>(&ub_[row * static_cast<uint64_t>(row_bytes_)]);
  }
  template <class T>
  const T* MatmulRows(const Decoded& d);
  template <class T>
  void FormWindowRows(const Decoded& d, T pad_min);
  const uint8_t* ParamSet(uint32_t set) const { return &params_[size_t{set} * set_bytes_]; }

  ChipParams p_;
  int64_t n_;
  bool bf16_;
  int64_t row_bytes_, set_bytes_;  // a unified-buffer row, a VPU parameter set
  ZeroedMemory<uint8_t>& host_;
  ZeroedMemory<uint8_t>& weight_;
  const std::vector<ChipValues*>* cores_;  // every core's values (ExternalMemories::cores)
  ZeroedMemory<uint8_t> ub_;
  std::vector<uint8_t> params_;
  std::vector<std::unique_ptr<Mxu>> mxus_;  // one per matrix unit
  // Rows formed by the window stage or gathered with a stride, for the product (operands).
  std::vector<uint8_t> formed_;
  std::vector<int32_t> product_;  // matmul max: the product before the comparison
  // Tiles' operand buffers that have been switched into an array, for the next tiles (a run
  // brings thousands: allocating each anew costs the allocator's page faults).
  std::vector<std::vector<uint8_t>> spare_;
  std::vector<uint8_t> TileBuffer();  // N x N operands' bytes, from spare_ where it has one
};

}  // namespace tpu::fast
