// See lowering.h.
#include "host/compiler/lower/lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arith/bf16.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/lower/lower_ops.h"
#include "host/compiler/packing.h"

namespace tpu::compiler::lower {

LoweredGraph Lowering::Run() {
  GraphTensor in;
  in.h = m_.input.h;
  in.w = m_.input.w;
  in.c = m_.input.c;
  in.packed = in.Pixels() > 1;  // one pixel: c bytes from a row boundary are its T rows
  in.pixel_bytes = in.packed ? in.c : in.T(n_) * n_;
  in.rows = (in.Pixels() * in.c + n_ - 1) / n_;
  in.nonnegative = m_.preprocess == "mnist32";
  g_.tensors.push_back(in);
  tensor_of_.assign(m_.layers.size(), -1);
  for (size_t i = 0; i < m_.layers.size() && g_.why_not.empty(); ++i) Layer(static_cast<int>(i));
  if (!g_.why_not.empty()) return std::move(g_);
  g_.output = TensorOf(static_cast<int>(m_.layers.size()) - 1);
  if (g_.output == 0) No("the model computes nothing on the chip");
  Border();
  return std::move(g_);
}

void Lowering::No(const std::string& why) {
  if (g_.why_not.empty()) g_.why_not = why;
}

const nn::Layer& Lowering::L(int i) const { return m_.layers[static_cast<size_t>(i)]; }

int Lowering::TensorOf(int layer) const {
  return layer == nn::kModelInput ? 0 : tensor_of_[static_cast<size_t>(layer)];
}

const std::vector<int>& Lowering::Readers(int layer) const {
  return consumers_[layer == nn::kModelInput ? m_.layers.size() : static_cast<size_t>(layer)];
}

int Lowering::OnlyReader(int layer) const {
  const std::vector<int>& r = Readers(layer);
  return r.size() == 1 ? r[0] : -1;
}

int Lowering::NewTensor(int64_t h, int64_t w, int64_t c, bool nonnegative) {
  GraphTensor t;
  t.h = h;
  t.w = w;
  t.c = c;
  t.pixel_bytes = (c + n_ - 1) / n_ * n_;
  t.rows = t.Pixels() * t.T(n_);
  t.producer = static_cast<int>(g_.ops.size());
  t.nonnegative = nonnegative;
  g_.tensors.push_back(t);
  return static_cast<int>(g_.tensors.size()) - 1;
}

int Lowering::Tile(const std::vector<uint8_t>& t) {
  const auto it = tile_index_.find(t);
  if (it != tile_index_.end()) return it->second;
  g_.tiles.push_back(t);
  return tile_index_[t] = static_cast<int>(g_.tiles.size()) - 1;
}

bool Lowering::Zero(const std::vector<uint8_t>& t) {
  return std::all_of(t.begin(), t.end(), [](uint8_t v) { return v == 0; });
}

void Lowering::Layer(int i) {
  using Lower = void (*)(Lowering&, int);
  static constexpr Lower kLower[] = {
#define TPUSIM_OP(N) Lower##N,
#include "host/nn/ops/ops.def"
#undef TPUSIM_OP
  };
  kLower[static_cast<size_t>(L(i).type)](*this, i);
}

void LowerFlatten(Lowering& lw, int i) { lw.SameRows(i, lw.L(i).inputs[0]); }

int Lowering::FusablePool(int i) const {
  const int r = OnlyReader(i);
  return r >= 0 && nn::FusedPool(m_, consumers_, static_cast<size_t>(r)) ? r : -1;
}

int Lowering::FusableAdd(int i) const {
  const int r = OnlyReader(i);
  if (r < 0 || L(r).type != nn::LayerType::kAdd || L(r).inputs[0] == L(r).inputs[1]) return -1;
  const int other = L(r).inputs[0] == i ? L(r).inputs[1] : L(r).inputs[0];
  if (other > i) return -1;  // computed later: the add fuses into that one instead
  const int t = TensorOf(other);
  return t > 0 && !g_.tensors[static_cast<size_t>(t)].packed ? r : -1;
}

void Lowering::SetWindow(GraphOp* op, const GraphTensor& in, int64_t kh, int64_t kw, int64_t stride,
                         int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w,
                         int64_t channels) {
  isa::WindowGeometry& g = op->window;
  g.channels = static_cast<uint64_t>(channels);
  g.pixel_bytes = static_cast<uint64_t>(in.pixel_bytes);
  g.kh = static_cast<uint64_t>(kh);
  g.kw = static_cast<uint64_t>(kw);
  g.stride_y = g.stride_x = static_cast<uint64_t>(stride);
  g.pad_top = static_cast<uint64_t>(pad_top);
  g.pad_left = static_cast<uint64_t>(pad_left);
  g.out_h = static_cast<uint64_t>(out_h);
  g.out_w = static_cast<uint64_t>(out_w);
  const bool fits =
      kh <= kWindowSmall && kw <= kWindowSmall && stride <= kWindowSmall && pad_top < kh &&
      pad_left < kw && in.h <= kWindowSize && in.w <= kWindowSize && out_h <= kWindowSize &&
      out_w <= kWindowSize && channels <= kField16 && in.pixel_bytes <= kField16 &&
      (kh * kw * channels + n_ - 1) / n_ <= kField16 + 1 && op->rows <= kField16 + 1 &&
      (out_h - 1) * stride <= in.h - 1 + pad_top && (out_w - 1) * stride <= in.w - 1 + pad_left;
  if (!fits && !ImageRows(op, in)) {
    No(fmt::format(
        "layer '{}' does not fit the window registers (kernels and strides up to {}, maps up "
        "to {} pixels a side, {} pixels per image){}",
        op->name, kWindowSmall, kWindowSize, kField16 + 1,
        op->stacked ? fmt::format("; a window over a whole map reads the image's rows instead "
                                  "only off the model's input and, on a bf16 chip, where the "
                                  "channels ({}) are a multiple of {}",
                                  in.c, n_)
                    : ""));
  }
}

bool Lowering::ImageRows(GraphOp* op, const GraphTensor& in) const {
  if (!op->stacked || in.packed || (bf16_ && in.c % n_ != 0) ||
      in.rows > static_cast<int64_t>(hw::kOpdMatmulStride.Max()))
    return false;
  op->image_rows = true;
  return true;
}

isa::Residual Lowering::ResidualOf(const nn::Layer& a, int k) const {
  isa::Residual r;
  r.relu = nn::ClampsAtZero(a.activation);
  if (bf16_) {
    r.mul_a = r.mul_b = r.shift = 1;
    return r;
  }
  r.mul_a = static_cast<uint64_t>(a.q.multiplier[static_cast<size_t>(k)]);
  r.mul_b = static_cast<uint64_t>(a.q.multiplier[static_cast<size_t>(1 - k)]);
  r.shift = static_cast<uint64_t>(a.q.shift[0]);
  return r;
}

void Lowering::Finish(GraphOp op, int i, int pool, int add) {
  const int out = op.output;
  for (int t : op.inputs)
    g_.tensors[static_cast<size_t>(t)].readers.push_back(static_cast<int>(g_.ops.size()));
  if (op.residual >= 0)
    g_.tensors[static_cast<size_t>(op.residual)].readers.push_back(static_cast<int>(g_.ops.size()));
  g_.ops.push_back(std::move(op));
  tensor_of_[static_cast<size_t>(i)] = out;
  if (pool >= 0) tensor_of_[static_cast<size_t>(pool)] = out;
  if (add >= 0) tensor_of_[static_cast<size_t>(add)] = out;
}

void Lowering::AddParams(GraphOp& op, const std::vector<uint8_t>& packed) {
  op.first_param = static_cast<int>(static_cast<int64_t>(g_.params.size()) / set_bytes_);
  g_.params.insert(g_.params.end(), packed.begin(), packed.end());
}

void Lowering::LayerParams(GraphOp& op, const nn::Layer& l) {
  if (!bf16_) {
    return Params<arith::Int8Format>(
        op, Int8Channels(l.q.bias.data.data(), l.q.multiplier.data(), l.q.shift.data(), l.out.c));
  }
  const uint32_t hi =
      l.activation == nn::Activation::kRelu6 ? arith::BitsOfFloat(6.0f) : arith::kFp32Inf;
  std::vector<arith::Bf16Format::Channel> c;
  for (float v : l.bias.data) c.push_back({arith::Fp32Canonical(arith::BitsOfFloat(v)), hi});
  Params<arith::Bf16Format>(op, c);
}

void Lowering::IdentityParams(GraphOp& op, int64_t channels) {
  const auto c = static_cast<size_t>(channels);
  if (bf16_) return Params<arith::Bf16Format>(op, {c, arith::Bf16Format::Identity()});
  Params<arith::Int8Format>(op, {c, arith::Int8Format::Identity()});
}

int Lowering::ShiftTile(int64_t lo, int64_t hi, int64_t shift) {
  const size_t eb = bf16_ ? 2 : 1;
  const uint16_t one = bf16_ ? arith::Bf16OfFp32(arith::BitsOfFloat(1.0f)) : 1;
  std::vector<uint8_t> t(static_cast<size_t>(n_) * n_ * eb, 0);
  for (int64_t r = lo; r < hi; ++r)
    std::memcpy(&t[static_cast<size_t>(r * n_ + r - shift) * eb], &one, eb);
  return Tile(t);
}

void Lowering::Border() {
  GraphTensor& in = g_.tensors[0];
  if (m_.preprocess != "mnist32" || in.readers.size() != 1 || in.h != 32 || in.w != 32) return;
  GraphOp& op = g_.ops[static_cast<size_t>(in.readers[0])];
  isa::WindowGeometry& w = op.window;
  if (op.kind != OpKind::kConv || op.stacked) return;
  if (w.pad_top + 2 < w.kh && w.pad_left + 2 < w.kw &&
      (w.out_h - 1) * w.stride_y <= 28 - 1 + w.pad_top + 2 &&
      (w.out_w - 1) * w.stride_x <= 28 - 1 + w.pad_left + 2) {
    g_.border = 2;
    in.h = in.w = 28;
    in.rows = (in.Pixels() * in.c + n_ - 1) / n_;
    w.pad_top += 2;
    w.pad_left += 2;
  }
}

void IdentityPass(Lowering& lw, const GraphTensor& in, GraphOp* op) {
  op->rows = in.Pixels();
  op->nt = in.T(lw.n());
  const int id = lw.ShiftTile(0, lw.n(), 0);
  op->terms.resize(static_cast<size_t>(op->nt));
  for (int64_t j = 0; j < op->nt; ++j)
    op->terms[static_cast<size_t>(j)].push_back({0, false, j, id});
  op->macs = in.Pixels() * in.c;
}

bool JoinReadsTheInput(Lowering& lw, int i, const char* kind, const char* verbs) {
  const LoweredGraph& g = lw.graph();
  const nn::Layer& l = lw.L(i);
  for (int input : l.inputs) {
    if (!g.tensors[static_cast<size_t>(lw.TensorOf(input))].packed) continue;
    lw.No(std::string(kind) + " '" + l.name + "' reads the model's input directly; the chip " +
          verbs + " maps that an operation wrote");
    return true;
  }
  return false;
}

void LowerResidualJoin(Lowering& lw, int i, bool product, const char* kind, const char* verbs) {
  LoweredGraph& g = lw.graph();
  const nn::Layer& l = lw.L(i);
  GraphOp op = lw.NewOp(OpKind::kResidual, i);
  const int a = lw.TensorOf(l.inputs[0]), b = lw.TensorOf(l.inputs[1]);
  if (JoinReadsTheInput(lw, i, kind, verbs)) return;
  const GraphTensor in = g.tensors[static_cast<size_t>(a)];
  op.inputs = {a};
  op.residual = b;
  op.residual_mul = lw.ResidualOf(l, 0);
  op.residual_mul.product = product;
  IdentityPass(lw, in, &op);
  lw.IdentityParams(op, in.c);
  op.output = lw.NewTensor(in.h, in.w, in.c, op.residual_mul.relu);
  lw.Finish(std::move(op), i, -1, -1);
}

}  // namespace tpu::compiler::lower
