// What a TransformerProgram (transformer_program.h) is built from: where each tensor lies in
// the unified buffer, where each layer's values lie in those tensors, the rows of float32
// constants, the parameter sets and the weight tiles, and the emitter that writes the
// program operation by operation (transformer_emit.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "arith/bf16.h"
#include "host/compiler/transformer_program.h"
#include "host/config/tpu_config.h"
#include "host/isa/program_builder.h"
#include "host/nn/model.h"

namespace tpu::compiler {

// A tensor in the unified buffer: p positions of c channels per image, block-major (block b
// of image i's position q at row base + (b B + i) p + q), blocks = ceil(c / N).
struct TensorArea {
  int64_t base = -1, p = 0, c = 0, blocks = 0;
  int last_reader = -1;  // the last layer that reads it (it is freed after it)
  bool output = false;   // the model's output (never freed)
  bool kept = false;     // a cached program's keys or values (never freed)
  int64_t Rows(int64_t batch) const { return blocks * batch * p; }
};

// Where a layer's per-image values lie: value e at position pos[e], channel ch[e] of tensor
// `area` (a view's values lie where its input's do).
struct Placement {
  int area = -1;
  std::vector<int32_t> pos, ch;
};

// Per head h of a heads x rows x cols value, value (r, c) at position pos0[h] + r and channel
// ch0[h] + c (with rows on channels: position pos0[h] + c, channel ch0[h] + r).
struct HeadRuns {
  std::vector<int64_t> pos0, ch0;
  bool rows_on_channels = false;
};
std::optional<HeadRuns> RunsOf(const Placement& v, int64_t heads, int64_t rows, int64_t cols,
                               bool rows_on_channels);

// Rows of the unified buffer below `limit`: first fit, or with `next_fit` from after the
// last rows taken (Take).
class BufferRows {
 public:
  explicit BufferRows(int64_t limit, bool next_fit = false) : limit_(limit), next_fit_(next_fit) {
    free_[0] = limit;
  }
  // n rows for `what`; UsageError where they do not fit. `next_fit`: from the row after the
  // last taken so, whatever the rows' mode.
  int64_t Take(int64_t n, const std::string& what) { return Take(n, what, next_fit_); }
  int64_t Take(int64_t n, const std::string& what, bool next_fit);
  void Give(int64_t at, int64_t n);
  int64_t High() const { return high_; }

 private:
  int64_t limit_, high_ = 0, cursor_ = 0;
  bool next_fit_ = false;
  std::map<int64_t, int64_t> free_;  // first row -> rows
};

// Float32 rows of constants (two buffer rows each: the lanes' high halves, then their low
// halves), from buffer row `base`, each kept once.
class ConstantRows {
 public:
  ConstantRows() = default;
  ConstantRows(int n, int64_t base) : n_(n), base_(base) {}
  int64_t Row(const std::vector<uint32_t>& lanes);
  int64_t Splat(float v) {
    return Row(std::vector<uint32_t>(static_cast<size_t>(n_), arith::BitsOfFloat(v)));
  }
  // Rows one after another (each two buffer rows), the first's buffer row; kept once.
  int64_t Run(const std::vector<std::vector<uint32_t>>& rows);
  int64_t Base() const { return base_; }
  int64_t Rows() const { return 2 * static_cast<int64_t>(rows_.size()); }
  // The rows' bytes, in buffer-row order.
  std::vector<uint8_t> Bytes() const;

 private:
  int n_ = 0;
  int64_t base_ = 0;
  std::vector<std::vector<uint32_t>> rows_;
  std::map<std::vector<uint32_t>, int64_t> at_;
  std::map<std::vector<std::vector<uint32_t>>, int64_t> run_at_;
};

// What a cached program leaves for the ones after it (Positions): its constants in the
// buffer, its tiles in weight memory, the row each tensor was put at.
struct EmitterState {
  ConstantRows consts;
  std::map<std::vector<uint8_t>, uint64_t> tile_at;
  std::vector<int64_t> bases;  // per area (-1: never taken)
  // Each layer's tiles of each block of outputs (TransformerOps::TilesOf), by layer, block.
  std::map<std::pair<int, int64_t>, std::vector<std::pair<int64_t, uint64_t>>> tiles_of;
  std::map<std::vector<uint8_t>, int64_t> set_at;  // its parameter sets, in weight memory
  uint64_t params_at = 0;                          // from there
};

// The program of a transformer for one batch, emitted layer by layer.
class TransformerEmitter {
 public:
  // `constant_rows`: the buffer rows of the constants, at the top of the buffer (the
  // tensors stay below them): a first emission with 0 counts them (ConstantRows::Rows),
  // the second is the program.
  // The batch runs in `groups` groups of `batch` images, one after another, each through
  // every layer (the same rows of the buffer; the weights read again).
  TransformerEmitter(const nn::Model& m, const config::TpuConfig& config, int batch, int groups,
                     int64_t constant_rows);
  // A cached program of positions `at` (one group), after `after` (nullptr: the first).
  TransformerEmitter(const nn::Model& m, const config::TpuConfig& config, int batch,
                     int64_t constant_rows, const Positions& at, const EmitterState* after);
  // Emits every layer; the program ends with the output written to host memory.
  void Run();
  // A whole pass's rows taken next fit (BufferRows), not first fit: before Run.
  void NextFit(bool on) { next_fit_ = on; }
  // With several groups, each group's input read over the host link while the group before
  // runs, a piece after each linear layer (the inputs take turns between two runs of rows
  // at the bottom of the buffer): before Run.
  void ReadAhead(bool on) { read_ahead_ = on; }
  // An emission that only counts the constants' rows (the first): no weight tile is formed
  // (the tiles' addresses are left 0), so the program is not one to run: before Run.
  void CountOnly(bool on) { count_only_ = on; }

  isa::Program TakeProgram() { return p_.Take(); }
  const std::vector<int32_t>& OpOf() const { return op_of_; }
  const std::vector<int>& Operations() const { return ops_; }
  const std::vector<uint8_t>& Weights() const { return weights_; }
  const std::vector<uint8_t>& Params() const { return params_; }
  const ConstantRows& Constants() const { return consts_; }
  const TensorArea& InputArea() const { return areas_.front(); }
  // Where each of an image's input values lies: its position and channel (a patch
  // convolution's input is laid out in patches: docs/transformers.md, "On the chip").
  const Placement& InputPlace() const { return input_place_; }
  const TensorArea& OutputArea() const { return areas_[static_cast<size_t>(places_.back().area)]; }
  int64_t UbHigh() const { return ub_.High(); }
  EmitterState State() const { return {consts_, tile_at_, taken_, tiles_of_, set_at_, params_at_}; }
  // The rows of each block of area `a` the program computes, as runs (the first's row in
  // the block's rows, count): all of them, or each image's positions [at.first, at.end) of
  // each of its runs of T (the input's positions). Throws UsageError where a tensor is not
  // whole runs of T positions.
  std::vector<std::pair<int64_t, int64_t>> Spans(const TensorArea& a) const;
  const Positions& At() const { return at_; }
  // Host memory: the inputs from 0, then the output. Weight memory: the constants from 0,
  // the parameter sets (ReserveParams), then the tiles.
  uint64_t OutputAddr() const { return output_addr_; }
  // Weight memory for `bytes` of parameter sets after the constants, which Run fills: the
  // sets of a first emission (CountOnly), before this one's Run.
  void ReserveParams(int64_t bytes);
  int64_t RowBytes() const { return 2 * n_; }

 private:
  friend struct TransformerOps;
  friend class HeadProducts;
  const nn::Layer& L(int i) const { return m_.layers[static_cast<size_t>(i)]; }
  const Placement& PlaceOf(int layer) const;
  const TensorArea& AreaOf(int layer) const;
  // Where every layer's values lie (views in place; a matmul whose only readers are
  // reshapes and transposes into a layer's input writes where that input's values lie).
  void Place();
  int NewArea(int64_t p, int64_t c);
  void Natural(int layer, int area);
  int SinkOf(int layer, std::vector<int>* chain) const;
  void PlaceView(int i);
  void PlaceSink(int i, int sink, const std::vector<int>& chain);
  // Where the first layer is a convolution of non-overlapping patches of the input (kernel
  // = stride, no padding, its only reader), the input lies in patches: a position a patch,
  // its kh x kw x c values the channels, in the order of the convolution's K.
  bool PatchInput();
  // The layer's instructions (transformer_emit.cc).
  void Layer(int i);
  // Group group_ through every layer: its input read, its output written.
  void Group();
  // The next piece of the next group's input read (ReadAhead), after a linear layer.
  void ReadNextInput();
  // Rows [first, end) of group g's input read from host memory into buffer rows from `at`.
  void ReadInput(int64_t g, int64_t first, int64_t end, int64_t at);
  void Free(int i);
  void Put(int area, const std::string& name);
  // Rows of area `a` the program computes, from its base, as runs (first, count).
  std::vector<std::pair<int64_t, int64_t>> Runs(const TensorArea& a) const;

  // Instruction helpers.
  // `rows` rows of a vector operation (fp32 operands flagged), split to the length field.
  void Vector(hw::VectorOp op, int64_t a, int64_t b, int64_t out, int64_t rows, int flags);
  void Zero(int64_t row, int64_t rows);
  // The parameter-set slot holding sets [first, first + count) (loaded now where needed):
  // the first slot of a run of them.
  uint64_t Sets(int64_t first, int64_t count);
  int64_t AddSets(const std::vector<arith::Bf16Channel>& channels);
  // A weight tile's address in weight memory, each distinct tile kept once.
  uint64_t Tile(const std::vector<uint8_t>& bytes);
  // The tile that moves lanes [from, from + count) to [to, to + count), zeros elsewhere.
  uint64_t ShiftTile(int64_t from, int64_t to, int64_t count);
  // Matrix unit `unit`'s next accumulator region of `rows` rows, taking turns between two
  // halves.
  int64_t AccRegion(int64_t rows, const std::string& what, int unit = 0);

  const nn::Model& m_;
  const config::TpuConfig& cfg_;
  const int n_;
  const int64_t batch_, groups_;
  int64_t group_ = 0;  // the group being emitted
  isa::ProgramBuilder p_;
  std::vector<int32_t> op_of_;
  std::vector<int> ops_;
  std::vector<TensorArea> areas_;  // 0: the model's input
  std::vector<Placement> places_;  // per layer; input_place_ for the model's input
  Placement input_place_;
  BufferRows ub_;
  bool next_fit_ = false;
  bool read_ahead_ = false;
  bool count_only_ = false;
  int64_t inputs_at_ = 0;    // with read_ahead_: the inputs' two runs of rows
  int64_t ahead_rows_ = 0;   // the rows of the next group's input read so far
  int64_t ahead_piece_ = 0;  // rows read after each linear layer
  ConstantRows consts_;
  std::vector<uint8_t> weights_, params_;
  std::map<std::vector<uint8_t>, uint64_t> tile_at_;
  std::map<std::vector<uint8_t>, int64_t> set_at_;  // parameter sets, each kept once
  std::map<int64_t, uint64_t> slot_of_;             // parameter set -> slot
  uint64_t next_slot_ = 1;                          // slot 0: the identity set (set 0)
  uint64_t output_addr_ = 0;
  uint64_t params_at_ = 0;        // the parameter sets' weight-memory address
  int64_t params_reserved_ = -1;  // and their bytes (ReserveParams)
  int64_t constants_bytes_ = 0;   // at the front of the weight image
  std::map<int, int> acc_turn_;   // per matrix unit
  int patch_conv_ = -1;           // the convolution that reads the input in patches (PatchInput)
  Positions at_;
  const EmitterState* after_ = nullptr;
  int layer_ = -1;       // the layer being emitted
  int prefetched_ = -1;  // the linear layer whose first tiles are read already (Prefetch)
  // The words of that read, and how many operations after the layer being emitted that
  // layer's is (the words are its operation's).
  std::tuple<size_t, size_t, int> prefetch_words_{0, 0, 0};
  std::vector<int64_t> taken_;  // per area, the row it was first put at (-1: none)
  std::map<std::pair<int, int64_t>, std::vector<std::pair<int64_t, uint64_t>>> tiles_of_;
};

}  // namespace tpu::compiler
