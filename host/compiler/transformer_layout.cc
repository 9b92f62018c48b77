// See transformer_layout.h: where a transformer's tensors and values lie, and the rows,
// constants, parameter sets and tiles its program uses.
#include "host/compiler/transformer_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arith/fp32.h"
#include "host/common/errors.h"
#include "host/compiler/packing.h"
#include "host/nn/ops/transformer_ops.h"

namespace tpu::compiler {

using nn::LayerType;

std::optional<HeadRuns> RunsOf(const Placement& v, int64_t heads, int64_t rows, int64_t cols,
                               bool rows_on_channels) {
  HeadRuns runs;
  runs.rows_on_channels = rows_on_channels;
  for (int64_t h = 0; h < heads; ++h) {
    const auto e0 = static_cast<size_t>(h * rows * cols);
    const int64_t p0 = v.pos[e0], c0 = v.ch[e0];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t e = e0 + static_cast<size_t>(r * cols + c);
        const int64_t dp = rows_on_channels ? c : r, dc = rows_on_channels ? r : c;
        if (v.pos[e] != p0 + dp || v.ch[e] != c0 + dc) return std::nullopt;
      }
    runs.pos0.push_back(p0);
    runs.ch0.push_back(c0);
  }
  return runs;
}

int64_t BufferRows::Take(int64_t n, const std::string& what, bool next_fit) {
  // Next fit: from the row after the last taken, round to the start, so that rows just
  // given back are taken last and what comes next need not wait for what used them
  // (unit_schedule.h); first fit (cursor_ stays 0) where the programs' layouts must agree.
  const int64_t cursor = next_fit ? cursor_ : 0;
  auto start = free_.upper_bound(cursor);
  if (start != free_.begin() && std::prev(start)->first + std::prev(start)->second > cursor)
    --start;
  for (int pass = 0; pass < 2; ++pass)
    for (auto it = pass == 0 ? start : free_.begin(); it != free_.end(); ++it) {
      const int64_t at = std::max(it->first, pass == 0 ? cursor : it->first);
      const int64_t end = it->first + it->second;
      if (end - at < n) continue;
      const int64_t first = it->first;
      free_.erase(it);
      if (at > first) free_[first] = at - first;
      if (end > at + n) free_[at + n] = end - at - n;
      high_ = std::max(high_, at + n);
      if (next_fit) cursor_ = at + n;
      return at;
    }
  int64_t largest = 0;
  for (const auto& f : free_) largest = std::max(largest, f.second);
  throw UsageError(fmt::format(
      "{} needs {} unified-buffer rows and the largest free run is {} of {} (the batch's "
      "tensors are kept in the buffer: a smaller --batch needs fewer)",
      what, n, largest, limit_));
}

void BufferRows::Give(int64_t at, int64_t n) {
  auto it = free_.emplace(at, n).first;
  if (auto next = std::next(it); next != free_.end() && at + n == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

int64_t ConstantRows::Row(const std::vector<uint32_t>& lanes) {
  const auto [it, added] = at_.emplace(lanes, base_ + Rows());
  if (added) rows_.push_back(lanes);
  return it->second;
}

int64_t ConstantRows::Run(const std::vector<std::vector<uint32_t>>& rows) {
  const auto [it, added] = run_at_.emplace(rows, base_ + Rows());
  if (added) rows_.insert(rows_.end(), rows.begin(), rows.end());
  return it->second;
}

std::vector<uint8_t> ConstantRows::Bytes() const {
  std::vector<uint8_t> out;
  for (const auto& lanes : rows_)
    for (const int shift : {16, 0})
      for (const uint32_t v : lanes) {
        const auto half = static_cast<uint16_t>(v >> shift);
        out.push_back(static_cast<uint8_t>(half & 0xff));
        out.push_back(static_cast<uint8_t>(half >> 8));
      }
  return out;
}

namespace {

bool IsView(const nn::Layer& l) {
  return l.type == LayerType::kReshape || l.type == LayerType::kTranspose ||
         l.type == LayerType::kSlice;
}

int64_t LaneBlocks(int64_t c, int n) { return (c + n - 1) / n; }

}  // namespace

TransformerEmitter::TransformerEmitter(const nn::Model& m, const config::TpuConfig& config,
                                       int batch, int groups, int64_t constant_rows)
    : m_(m),
      cfg_(config),
      n_(config.array_dim),
      batch_(batch),
      groups_(groups),
      ub_(config.ub_depth_rows - constant_rows),
      consts_(config.array_dim, config.ub_depth_rows - constant_rows) {
  Place();
  output_addr_ = static_cast<uint64_t>(InputArea().Rows(batch_) * groups_ * RowBytes());
  constants_bytes_ = constant_rows * RowBytes();
  weights_.assign(static_cast<size_t>(constants_bytes_), 0);  // the constants, after Run
  AddSets(std::vector<arith::Bf16Channel>(static_cast<size_t>(n_), arith::Bf16Format::Identity()));
  taken_.assign(areas_.size(), -1);
}

TransformerEmitter::TransformerEmitter(const nn::Model& m, const config::TpuConfig& config,
                                       int batch, int64_t constant_rows, const Positions& at,
                                       const EmitterState* after)
    : TransformerEmitter(m, config, batch, 1, constant_rows) {
  at_ = at;
  after_ = after;
  if (patch_conv_ >= 0)
    throw UsageError(
        "a model that reads its input in patches (a ViT) has no positions to decode one at a "
        "time: decoding takes a decoder of token ids (docs/transformers.md)");
  for (const nn::Layer& l : m_.layers)
    if (l.type == LayerType::kMatMul)
      areas_[static_cast<size_t>(PlaceOf(l.inputs[1]).area)].kept = true;
  if (after_) {  // its constants in the buffer, its tiles and sets in weight memory
    consts_ = after_->consts;
    params_at_ = after_->params_at;
    weights_.clear();
  }
}

std::vector<std::pair<int64_t, int64_t>> TransformerEmitter::Spans(const TensorArea& a) const {
  if (!at_.Cached()) return {{0, batch_ * a.p}};
  const int64_t t = InputArea().p;
  if (a.p % t != 0)
    throw UsageError(fmt::format(
        "a tensor of {} positions is not whole runs of the model's {}: the chip decodes a "
        "decoder whose tensors are each position's (or each head's and position's) values "
        "(docs/transformers.md, \"Decoding on the chip\")",
        a.p, t));
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (int64_t img = 0; img < batch_; ++img)
    for (int64_t j = 0; j < a.p / t; ++j)
      spans.push_back({img * a.p + j * t + at_.first, at_.end - at_.first});
  return spans;
}

const Placement& TransformerEmitter::PlaceOf(int layer) const {
  return layer == nn::kModelInput ? input_place_ : places_[static_cast<size_t>(layer)];
}

const TensorArea& TransformerEmitter::AreaOf(int layer) const {
  return areas_[static_cast<size_t>(PlaceOf(layer).area)];
}

int TransformerEmitter::NewArea(int64_t p, int64_t c) {
  TensorArea a;
  a.p = p;
  a.c = c;
  a.blocks = LaneBlocks(c, n_);
  areas_.push_back(a);
  return static_cast<int>(areas_.size()) - 1;
}

void TransformerEmitter::Natural(int layer, int area) {
  Placement& v = layer == nn::kModelInput ? input_place_ : places_[static_cast<size_t>(layer)];
  const TensorArea& a = areas_[static_cast<size_t>(area)];
  v.area = area;
  v.pos.resize(static_cast<size_t>(a.p * a.c));
  v.ch.resize(v.pos.size());
  for (size_t e = 0; e < v.pos.size(); ++e) {
    v.pos[e] = static_cast<int32_t>(static_cast<int64_t>(e) / a.c);
    v.ch[e] = static_cast<int32_t>(static_cast<int64_t>(e) % a.c);
  }
}

// The view that a matmul's output ends in where its only readers, one after another, are
// reshapes and transposes and the last is read by a layer that computes (-1: none), and
// that chain.
int TransformerEmitter::SinkOf(int layer, std::vector<int>* chain) const {
  const std::vector<std::vector<int>> readers = m_.Consumers();
  int at = layer;
  for (;;) {
    const auto& r = readers[static_cast<size_t>(at)];
    if (r.size() != 1) break;
    const nn::Layer& v = L(r[0]);
    if (v.type != LayerType::kReshape && v.type != LayerType::kTranspose) break;
    chain->push_back(r[0]);
    at = r[0];
  }
  return chain->empty() ? -1 : chain->back();
}

bool TransformerEmitter::PatchInput() {
  const nn::Layer& l = m_.layers.front();
  const std::vector<std::vector<int>> readers = m_.Consumers();
  if (l.type != LayerType::kConv2d || l.inputs != std::vector<int>{nn::kModelInput} ||
      readers.back().size() != 1 || l.kernel_h != l.stride || l.kernel_w != l.stride ||
      l.kernel_h == 1 || l.Padded() || l.in.h % l.stride || l.in.w % l.stride)
    return false;
  const int k = l.stride;
  const int area = NewArea(int64_t{l.out.h} * l.out.w, int64_t{k} * k * l.in.c);
  input_place_.area = area;
  for (int y = 0; y < l.in.h; ++y)
    for (int x = 0; x < l.in.w; ++x)
      for (int c = 0; c < l.in.c; ++c) {
        input_place_.pos.push_back((y / k) * l.out.w + x / k);
        input_place_.ch.push_back(((y % k) * k + x % k) * l.in.c + c);
      }
  patch_conv_ = 0;
  return true;
}

// View layer i: each of its values where its input's value lies.
void TransformerEmitter::PlaceView(int i) {
  const nn::Layer& l = L(i);
  const Placement& from = PlaceOf(l.inputs[0]);
  Placement& v = places_[static_cast<size_t>(i)];
  v.area = from.area;
  for (const int64_t e : nn::ops::ViewIndexMap(l)) {
    v.pos.push_back(from.pos[static_cast<size_t>(e)]);
    v.ch.push_back(from.ch[static_cast<size_t>(e)]);
  }
}

// Matmul i writes where `chain`'s last view (`sink`) puts each value: that view's layout.
void TransformerEmitter::PlaceSink(int i, int sink, const std::vector<int>& chain) {
  const nn::Layer& v = L(sink);
  const int area = NewArea(int64_t{v.out.h} * v.out.w, v.out.c);
  Natural(sink, area);
  std::vector<int64_t> index(static_cast<size_t>(v.out.Size()));
  for (size_t e = 0; e < index.size(); ++e) index[e] = static_cast<int64_t>(e);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const std::vector<int64_t> map = nn::ops::ViewIndexMap(L(*it));
    for (int64_t& e : index) e = map[static_cast<size_t>(e)];
  }
  Placement& mp = places_[static_cast<size_t>(i)];
  mp.area = area;
  mp.pos.assign(index.size(), 0);
  mp.ch.assign(index.size(), 0);
  for (size_t e = 0; e < index.size(); ++e) {
    mp.pos[static_cast<size_t>(index[e])] = places_[static_cast<size_t>(sink)].pos[e];
    mp.ch[static_cast<size_t>(index[e])] = places_[static_cast<size_t>(sink)].ch[e];
  }
}

void TransformerEmitter::Place() {
  places_.resize(m_.layers.size());
  if (!PatchInput())
    Natural(nn::kModelInput, NewArea(int64_t{m_.input.h} * m_.input.w, m_.input.c));
  std::vector<bool> placed(m_.layers.size(), false);  // sinks, placed by their matmul
  for (size_t i = 0; i < m_.layers.size(); ++i) {
    const nn::Layer& l = m_.layers[i];
    for (const int in : l.inputs) {
      TensorArea& a = areas_[static_cast<size_t>(PlaceOf(in).area)];
      a.last_reader = std::max(a.last_reader, static_cast<int>(i));
    }
    if (placed[i]) continue;
    if (IsView(l)) {
      PlaceView(static_cast<int>(i));
      continue;
    }
    std::vector<int> chain;
    const int sink = l.type == LayerType::kMatMul ? SinkOf(static_cast<int>(i), &chain) : -1;
    if (sink < 0) {
      Natural(static_cast<int>(i), NewArea(int64_t{l.out.h} * l.out.w, l.out.c));
    } else {
      PlaceSink(static_cast<int>(i), sink, chain);
      placed[static_cast<size_t>(sink)] = true;
    }
  }
  areas_[static_cast<size_t>(places_.back().area)].output = true;
}

void TransformerEmitter::Vector(hw::VectorOp op, int64_t a, int64_t b, int64_t out, int64_t rows,
                                int flags) {
  isa::EmitVector(p_, op, a, b, out, rows, flags);
}

// `vector op=less` of rows with themselves: +0 whatever they held.
void TransformerEmitter::Zero(int64_t row, int64_t rows) {
  Vector(hw::VectorOp::kLess, row, row, row, rows, 0);
}

int64_t TransformerEmitter::AddSets(const std::vector<arith::Bf16Channel>& channels) {
  const std::vector<uint8_t> bytes = PackParamSets<arith::Bf16Format>(channels, n_);
  if (after_) {  // a program after a cached one: that one's sets, in weight memory already
    const auto it = after_->set_at.find(bytes);
    if (it == after_->set_at.end())
      throw std::logic_error("TransformerEmitter: parameter sets the first cached program has not");
    return it->second;
  }
  const auto [it, added] = set_at_.emplace(
      bytes, static_cast<int64_t>(params_.size()) / arith::ParamSetBytes<arith::Bf16Format>(n_));
  if (added) params_.insert(params_.end(), bytes.begin(), bytes.end());
  return it->second;
}

uint64_t TransformerEmitter::Sets(int64_t first, int64_t count) {
  if (first == 0) return 0;
  const auto slots = static_cast<uint64_t>(cfg_.param_sets);
  if (slots < 2 || static_cast<uint64_t>(count) > slots - 1)
    throw UsageError(
        fmt::format("layer '{}' needs {} parameter sets at once; config '{}' has param_sets = {}",
                    ops_.empty() ? std::string("?") : L(ops_.back()).name, count + 1, cfg_.name,
                    cfg_.param_sets));
  auto it = slot_of_.find(first);
  if (it != slot_of_.end()) {
    bool all = true;
    for (int64_t s = 1; s < count && all; ++s) {
      auto o = slot_of_.find(first + s);
      all = o != slot_of_.end() && o->second == it->second + static_cast<uint64_t>(s);
    }
    if (all) return it->second;
  }
  if (next_slot_ + static_cast<uint64_t>(count) > slots) next_slot_ = 1;
  const uint64_t slot = next_slot_;
  for (auto s = slot_of_.begin(); s != slot_of_.end();) {
    const bool over = s->second >= slot && s->second < slot + static_cast<uint64_t>(count);
    s = over ? slot_of_.erase(s) : std::next(s);
  }
  const int64_t set_bytes = arith::ParamSetBytes<arith::Bf16Format>(n_);
  p_.ReadHbmParams(params_at_ + static_cast<uint64_t>(first * set_bytes), slot,
                   static_cast<uint64_t>(count));
  for (int64_t s = 0; s < count; ++s) slot_of_[first + s] = slot + static_cast<uint64_t>(s);
  next_slot_ = slot + static_cast<uint64_t>(count);
  return slot;
}

void TransformerEmitter::ReserveParams(int64_t bytes) {
  if (!tile_at_.empty() || after_)
    throw std::logic_error("TransformerEmitter::ReserveParams: after the tiles, or cached");
  params_at_ = weights_.size();
  params_reserved_ = bytes;
  weights_.resize(weights_.size() + static_cast<size_t>(bytes), 0);
}

uint64_t TransformerEmitter::Tile(const std::vector<uint8_t>& bytes) {
  if (after_) {  // a program after a cached one: that one's tiles, in weight memory already
    const auto it = after_->tile_at.find(bytes);
    if (it == after_->tile_at.end())
      throw std::logic_error("TransformerEmitter: a tile the first cached program has not");
    return it->second;
  }
  const auto [it, added] = tile_at_.emplace(bytes, weights_.size());
  if (added) weights_.insert(weights_.end(), bytes.begin(), bytes.end());
  return it->second;
}

uint64_t TransformerEmitter::ShiftTile(int64_t from, int64_t to, int64_t count) {
  std::vector<uint16_t> w(static_cast<size_t>(n_) * static_cast<size_t>(n_), 0);
  for (int64_t r = 0; r < count; ++r)
    w[static_cast<size_t>((from + r) * n_ + to + r)] = arith::Bf16OfFp32(arith::kFp32One);
  return Tile(WeightTile(w.data(), n_, n_, n_, 0, 0, [](uint16_t v) { return v; }));
}

int64_t TransformerEmitter::AccRegion(int64_t rows, const std::string& what, int unit) {
  const int64_t half = cfg_.acc_depth_rows / 2;
  if (rows > half)
    throw UsageError(
        fmt::format("{} needs {} accumulator rows at once; config '{}' has {} (half "
                    "of acc_depth_rows = {})",
                    what, rows, cfg_.name, half, cfg_.acc_depth_rows));
  return (acc_turn_[unit] ^= 1) * half;
}

}  // namespace tpu::compiler
