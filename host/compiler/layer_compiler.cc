// Lowering conv / dense layers (with fused 2 x 2 pooling) to TPU jobs (see layer_compiler.h).
#include "host/compiler/layer_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/compiler/packing.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler {

std::string LayerStep::Name(const nn::Model& m) const {
  std::string s = m.layers[static_cast<size_t>(layer)].name;
  if (pool_layer >= 0) s += "+" + m.layers[static_cast<size_t>(pool_layer)].name;
  if (pass > 0) s += fmt::format(".pass{}", pass);
  if (channels > 0) s += fmt::format(".ch{}-{}", channel_first, channel_first + channels - 1);
  return s;
}

bool LayerJobsRun(const nn::Layer& l) {
  return l.type == nn::LayerType::kConv2d || l.type == nn::LayerType::kDense || l.IsPool() ||
         l.type == nn::LayerType::kFlatten;
}

std::vector<LayerStep> PlanSteps(const nn::Model& model) {
  nn::RequireQuantized(model);
  if (model.IsGraph()) {
    throw UsageError("model '" + model.name +
                     "' is a graph (residual adds or concats); layer jobs run chains of layers");
  }
  std::vector<LayerStep> steps;
  const auto& ls = model.layers;
  for (size_t i = 0; i < ls.size(); ++i) {
    const nn::Layer& l = ls[i];
    if (l.type == nn::LayerType::kFlatten) continue;
    if (!LayerJobsRun(l)) {
      throw UsageError("layer '" + l.name + "' is a " + l.TypeName() +
                       "; layer jobs run convolutions, dense layers, pooling and flatten (the "
                       "network compiler runs every operation)");
    }
    LayerStep s;
    s.layer = static_cast<int>(i);
    if (l.type == nn::LayerType::kMaxPool2d) {
      for (const LayerStep& p : MaxPoolPasses(l, static_cast<int>(i))) steps.push_back(p);
      continue;
    }
    if (l.type == nn::LayerType::kAvgPool2d) {
      s.lowered = std::make_shared<const nn::Layer>(AveragePoolAsConv(l, /*bf16=*/false));
      steps.push_back(s);
      continue;
    }
    if (i + 1 < ls.size() && l.type == nn::LayerType::kConv2d && ls[i + 1].IsPool() &&
        !ls[i + 1].global_pool && !ls[i + 1].Padded() && ls[i + 1].pool_h == 2 &&
        ls[i + 1].pool_w == 2 && ls[i + 1].pool_stride == 2) {
      s.pool_layer = static_cast<int>(i + 1);
      ++i;
    }
    steps.push_back(s);
  }
  return steps;
}

namespace {

// K, the length of the rows a conv or dense layer multiplies: kh x kw x c_in (im2col) or
// the flattened input.
int64_t RowLength(const nn::Layer& l) {
  return l.type == nn::LayerType::kConv2d ? int64_t{l.kernel_h} * l.kernel_w * l.in.c : l.in.Size();
}

}  // namespace

int64_t UsefulMacsPerImage(const nn::Layer& l, int64_t rows_per_image) {
  const int64_t k = RowLength(l);
  return rows_per_image * (l.depthwise ? k / l.in.c : k) * l.out.c;
}

std::vector<LayerStep> PlanSteps(const nn::Model& model, const config::TpuConfig& config) {
  const int64_t n = config.array_dim;
  std::vector<LayerStep> out;
  for (const LayerStep& s : PlanSteps(model)) {
    const nn::Layer& l = s.lowered ? *s.lowered : model.layers[static_cast<size_t>(s.layer)];
    const int64_t kt = (RowLength(l) + n - 1) / n, nt = (l.out.c + n - 1) / n;
    // Output tiles per job: the parameter sets, and the weight tiles weight memory holds.
    const int64_t fit =
        std::min<int64_t>(config.param_sets, config.weight_mem_bytes / (kt * n * n));
    if (nt <= fit || fit < 1) {
      out.push_back(s);
      continue;
    }
    for (int64_t first = 0; first < l.out.c; first += fit * n) {
      LayerStep g = s;
      g.channel_first = static_cast<int>(first);
      g.channels = static_cast<int>(std::min<int64_t>(fit * n, l.out.c - first));
      out.push_back(g);
    }
  }
  return out;
}

namespace {

// The output channels [first, first + count) of a quantized conv or dense layer.
nn::Layer ChannelGroup(const nn::Layer& l, int first, int count) {
  nn::Layer g = l;
  g.out.c = count;
  g.weights = {};
  g.bias = {};
  const int64_t k = l.q.weights.Size() / l.out.c;
  g.q.weights.shape = {k, count};
  g.q.weights.data.resize(static_cast<size_t>(k * count));
  for (int64_t r = 0; r < k; ++r) {
    std::copy_n(&l.q.weights.data[static_cast<size_t>(r * l.out.c + first)], count,
                &g.q.weights.data[static_cast<size_t>(r * count)]);
  }
  auto slice = [&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    return V(v.begin() + first, v.begin() + first + count);
  };
  g.q.bias.shape = {count};
  g.q.bias.data = slice(l.q.bias.data);
  g.q.multiplier = slice(l.q.multiplier);
  g.q.shift = slice(l.q.shift);
  if (!l.q.weight_scales.empty()) g.q.weight_scales = slice(l.q.weight_scales);
  return g;
}

}  // namespace

std::vector<LayerStep> MaxPoolPasses(const nn::Layer& pool, int layer_index) {
  const int c = pool.in.c;
  const int64_t outs = int64_t{pool.out.h} * pool.out.w;
  // The values still to be reduced for each output pixel: input pixel indices of the pass.
  std::vector<std::vector<int32_t>> sets(static_cast<size_t>(outs));
  for (int oh = 0; oh < pool.out.h; ++oh)
    for (int ow = 0; ow < pool.out.w; ++ow)
      for (int i = 0; i < pool.pool_h; ++i)
        for (int j = 0; j < pool.pool_w; ++j) {
          // Taps in the padding take no part in a maximum.
          const int64_t y = int64_t{oh} * pool.pool_stride + i - pool.pad_top;
          const int64_t x = int64_t{ow} * pool.pool_stride + j - pool.pad_left;
          if (y < 0 || y >= pool.in.h || x < 0 || x >= pool.in.w) continue;
          sets[static_cast<size_t>(int64_t{oh} * pool.out.w + ow)].push_back(
              static_cast<int32_t>(y * pool.in.w + x));
        }
  std::vector<LayerStep> passes;
  int64_t in_pixels = int64_t{pool.in.h} * pool.in.w;
  while (true) {
    auto gather = std::make_shared<std::vector<int32_t>>();
    std::vector<std::vector<int32_t>> next(sets.size());
    for (size_t o = 0; o < sets.size(); ++o) {
      const std::vector<int32_t>& taps = sets[o];
      for (size_t t = 0; t < taps.size(); t += 4) {
        next[o].push_back(static_cast<int32_t>(gather->size() / 4));
        for (size_t q = 0; q < 4; ++q) gather->push_back(taps[std::min(t + q, taps.size() - 1)]);
      }
    }
    const int64_t out_pixels = static_cast<int64_t>(gather->size() / 4);
    nn::Layer id;
    id.name = pool.name;
    id.type = nn::LayerType::kConv2d;
    id.depthwise = true;  // channel c reads only channel c (MACs counted without the zeros)
    id.in = {1, static_cast<int>(in_pixels), c};
    id.out = {1, static_cast<int>(out_pixels), c};
    id.quantized = true;
    id.q.weights.shape = {c, c};
    id.q.weights.data.assign(static_cast<size_t>(c) * c, 0);
    for (int k = 0; k < c; ++k) id.q.weights.data[static_cast<size_t>(k) * c + k] = 1;
    id.q.bias.shape = {c};
    id.q.bias.data.assign(static_cast<size_t>(c), 0);
    id.q.multiplier.assign(static_cast<size_t>(c), int32_t{1} << 30);  // x * 2^30 >> 30 = x
    id.q.shift.assign(static_cast<size_t>(c), 30);
    LayerStep s;
    s.layer = layer_index;
    s.lowered = std::make_shared<const nn::Layer>(std::move(id));
    s.gather = gather;
    s.pass = static_cast<int>(passes.size()) + 1;
    passes.push_back(s);
    if (out_pixels == outs) break;  // one value per output pixel: done
    sets = std::move(next);
    in_pixels = out_pixels;
  }
  return passes;
}

nn::Layer AveragePoolAsConv(const nn::Layer& pool, bool bf16, bool expand) {
  nn::Layer l;
  l.name = pool.name;
  l.type = nn::LayerType::kConv2d;
  l.depthwise = true;
  l.inputs = pool.inputs;
  // Padding counts in the average (PyTorch's count_include_pad): zeros in the window.
  l.padding = "explicit";
  l.pad_top = pool.pad_top;
  l.pad_left = pool.pad_left;
  l.pad_bottom = pool.pad_bottom;
  l.pad_right = pool.pad_right;
  l.in = pool.in;
  l.out = pool.out;
  l.kernel_h = pool.pool_h;
  l.kernel_w = pool.pool_w;
  l.stride = pool.pool_stride;
  l.quantized = true;
  const std::vector<int64_t> shape = {l.kernel_h, l.kernel_w, l.in.c, 1};
  if (bf16) {  // fp32 weights 1 / (kh x kw) (docs/bf16.md, "Networks")
    Tensor<float> avg;
    avg.shape = shape;
    avg.data.assign(static_cast<size_t>(avg.Size()),
                    1.0f / static_cast<float>(pool.pool_h * pool.pool_w));
    l.weights = expand ? nn::ExpandDepthwise(avg) : std::move(avg);
    l.bias.shape = {l.out.c};
    l.bias.data.assign(static_cast<size_t>(l.out.c), 0.0f);
    return l;
  }
  Tensor<int8_t> ones;
  ones.shape = shape;
  ones.data.assign(static_cast<size_t>(ones.Size()), int8_t{1});
  l.q.weights = expand ? nn::ExpandDepthwise(ones) : std::move(ones);
  l.q.bias.shape = {l.out.c};
  l.q.bias.data.assign(static_cast<size_t>(l.out.c), 0);
  uint32_t multiplier = 0, shift = 0;
  arith::AverageMultiplier(pool.pool_h * pool.pool_w, &multiplier, &shift);
  l.q.multiplier.assign(static_cast<size_t>(l.out.c), static_cast<int32_t>(multiplier));
  l.q.shift.assign(static_cast<size_t>(l.out.c), static_cast<int32_t>(shift));
  return l;
}

LayerCompiler::LayerCompiler(const nn::Model& model, const LayerStep& step,
                             const config::TpuConfig& config)
    : layer_(step.lowered ? *step.lowered : model.layers[static_cast<size_t>(step.layer)]),
      config_(config),
      n_(config.array_dim) {
  const nn::Layer* pool =
      step.pool_layer >= 0 ? &model.layers[static_cast<size_t>(step.pool_layer)] : nullptr;
  layer_out_ = pool ? pool->out : layer_.out;
  if (step.channels > 0) {
    if (step.channel_first < 0 || step.channel_first + step.channels > layer_.out.c) {
      throw UsageError(fmt::format("layer '{}': channel group {}..{} outside its {} channels",
                                   layer_.name, step.channel_first,
                                   step.channel_first + step.channels, layer_.out.c));
    }
    layer_ = ChannelGroup(layer_, step.channel_first, step.channels);
    channel_first_ = step.channel_first;
  }
  const nn::Layer& l = layer_;
  conv_ = l.type == nn::LayerType::kConv2d;
  gather_ = step.gather;
  pooled_ = pool != nullptr || gather_ != nullptr;
  max_pool_ = gather_ != nullptr || (pooled_ && pool->type == nn::LayerType::kMaxPool2d);
  relu_ = nn::ClampsAtZero(l.activation);
  in_ = l.in;
  conv_out_ = l.out;
  out_ = pool ? nn::Shape3{pool->out.h, pool->out.w, l.out.c} : l.out;
  k_ = RowLength(l);
  kt_ = (k_ + n_ - 1) / n_;
  nt_ = (l.out.c + n_ - 1) / n_;
  rows_per_image_ = !conv_    ? 1
                    : gather_ ? static_cast<int64_t>(gather_->size())
                    : pooled_ ? int64_t{out_.h} * out_.w * 4
                              : int64_t{l.out.h} * l.out.w;
  const int64_t tile_bytes = kt_ * n_ * n_;
  if (tile_bytes > config.weight_mem_bytes) {
    throw UsageError(fmt::format(
        "layer '{}': one output tile needs {} bytes of weights ({} K-tiles of {} x {}); the "
        "config has {} (weight_mem_bytes): raise it",
        l.name, tile_bytes, kt_, n_, n_, config.weight_mem_bytes));
  }
  if (nt_ > config.param_sets) {
    throw UsageError(
        fmt::format("layer '{}': {} output channels need {} VPU parameter sets on a "
                    "{} x {} array; the config has {} (param_sets)",
                    l.name, l.out.c, nt_, n_, n_, config.param_sets));
  }
  ChunkRows(rows_per_image_);  // its K-tiles fit the unified buffer: refused before any layer runs
  const int64_t nn2 = int64_t{n_} * n_;
  if (kt_ * nt_ * nn2 > config.weight_mem_bytes) {
    throw UsageError(
        fmt::format("layer '{}': {} bytes of weight tiles do not fit weight memory "
                    "({} bytes, weight_mem_bytes)",
                    l.name, kt_ * nt_ * nn2, config.weight_mem_bytes));
  }
  weights_ = PackWeightTiles(l.q.weights.data.data(), k_, l.out.c, n_);
  params_ = PackParamSets<arith::Int8Format>(
      Int8Channels(l.q.bias.data.data(), l.q.multiplier.data(), l.q.shift.data(), l.out.c), n_);
}

void LayerCompiler::RowPixel(int64_t r, int* oh, int* ow) const {
  if (pooled_) {
    const int64_t window = r / 4, q = r % 4;
    *oh = static_cast<int>(2 * (window / out_.w) + q / 2);
    *ow = static_cast<int>(2 * (window % out_.w) + q % 2);
  } else {
    *oh = static_cast<int>(r / conv_out_.w);
    *ow = static_cast<int>(r % conv_out_.w);
  }
}

void LayerCompiler::FillRow(const int8_t* image, int64_t r, int8_t* row) const {
  if (gather_) {  // a max pooling pass: the row is one input pixel's channels
    const int64_t pixel = (*gather_)[static_cast<size_t>(r)];
    std::memcpy(row, image + pixel * in_.c, static_cast<size_t>(in_.c));
    return;
  }
  if (!conv_) {
    std::memcpy(row, image, static_cast<size_t>(k_));
    return;
  }
  const nn::Layer& l = layer_;
  int oh = 0, ow = 0;
  RowPixel(r, &oh, &ow);
  int8_t* o = row;
  const int ih0 = oh * l.stride - l.pad_top, iw0 = ow * l.stride - l.pad_left;
  if (ih0 >= 0 && iw0 >= 0 && ih0 + l.kernel_h <= in_.h && iw0 + l.kernel_w <= in_.w) {
    // The window lies inside the image: each kernel row is kernel_w * c contiguous bytes.
    const size_t span = static_cast<size_t>(l.kernel_w) * in_.c;
    for (int kh = 0; kh < l.kernel_h; ++kh, o += span) {
      std::memcpy(o, image + (static_cast<size_t>(ih0 + kh) * in_.w + iw0) * in_.c, span);
    }
    return;
  }
  for (int kh = 0; kh < l.kernel_h; ++kh)
    for (int kw = 0; kw < l.kernel_w; ++kw) {
      const int ih = oh * l.stride + kh - l.pad_top;
      const int iw = ow * l.stride + kw - l.pad_left;
      const bool inside = ih >= 0 && ih < in_.h && iw >= 0 && iw < in_.w;
      for (int ic = 0; ic < in_.c; ++ic) {
        *o++ = inside ? image[(static_cast<size_t>(ih) * in_.w + iw) * in_.c + ic] : int8_t{0};
      }
    }
}

int64_t LayerCompiler::ChunkRows(int64_t m) const {
  // Rows per chunk: half the accumulators (two chunks' tiles alternate), a multiple of 4
  // with pooling, and two chunks of inputs and outputs must fit the unified buffer.
  int64_t mc = std::min<int64_t>(m, config_.acc_depth_rows / 2);
  auto ub_need = [&](int64_t rows) {
    return 2 * kt_ * rows + 2 * nt_ * (pooled_ ? rows / 4 : rows);
  };
  while (mc > 4 && ub_need(mc) > config_.ub_depth_rows) mc /= 2;
  if (pooled_) mc -= mc % 4;
  if (mc < 1 || ub_need(mc) > config_.ub_depth_rows) {
    throw UsageError(fmt::format("layer '{}': {} K-tiles do not fit the unified buffer ({} rows)",
                                 layer_.name, kt_, config_.ub_depth_rows));
  }
  return mc;
}

LayerJob LayerCompiler::Build(const std::vector<int8_t>& act, int batch) const {
  const int64_t n = n_, m = batch * rows_per_image_;
  Chunking c;
  c.m = m;
  c.mc = ChunkRows(m);
  c.chunks = (m + c.mc - 1) / c.mc;
  c.mco = pooled_ ? c.mc / 4 : c.mc;
  const uint64_t x_bytes = static_cast<uint64_t>(m * kt_ * n);
  c.p_addr = (x_bytes + 63) / 64 * 64;
  c.y_addr = (c.p_addr + params_.size() + 63) / 64 * 64;

  LayerJob job;
  job.rows = m;
  job.chunks = c.chunks;
  engine::ExecJob& ex = job.exec;
  ex.name = layer_.name;
  // Host memory: the row blocks chunk by chunk, the parameter sets, then the outputs.
  const int64_t out_rows = pooled_ ? m / 4 : m;
  ex.host_out_addr = c.y_addr;
  ex.host_out_bytes = static_cast<uint64_t>(out_rows * nt_ * n);
  if (c.y_addr + ex.host_out_bytes > static_cast<uint64_t>(config_.host_mem_bytes)) {
    throw UsageError(fmt::format(
        "layer '{}': a batch of {} needs {} bytes of host memory; the "
        "config has {} (host_mem_bytes): use a smaller {}",
        layer_.name, batch, c.y_addr + ex.host_out_bytes, config_.host_mem_bytes, Field("batch")));
  }
  ex.host_image = HostImage(act, c);
  ex.weight_image = weights_;
  job.summary = fmt::format(
      "{}: {} rows of K = {} ({} K-tile(s)) x {} output channels ({} "
      "N-tile(s)), {} chunk(s) of up to {} rows",
      layer_.name, m, k_, kt_, layer_.out.c, nt_, c.chunks, c.mc);
  ex.program = Emit(c);
  return job;
}

std::vector<uint8_t> LayerCompiler::HostImage(const std::vector<int8_t>& act,
                                              const Chunking& c) const {
  const int64_t n = n_;
  std::vector<uint8_t> host(static_cast<size_t>(c.y_addr), 0);
  std::vector<int8_t> row(static_cast<size_t>(k_));
  for (int64_t ch = 0; ch < c.chunks; ++ch) {
    const int64_t r0 = ch * c.mc, rows = std::min(c.mc, c.m - r0);
    const uint64_t base = static_cast<uint64_t>(r0 * kt_ * n);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t g = r0 + i, b = g / rows_per_image_;
      FillRow(&act[static_cast<size_t>(b * in_.Size())], g % rows_per_image_, row.data());
      for (int64_t kb = 0; kb < kt_; ++kb) {
        uint8_t* dst = &host[static_cast<size_t>(base + (kb * rows + i) * n)];
        const int64_t cols = std::min<int64_t>(n, k_ - kb * n);
        std::memcpy(dst, &row[static_cast<size_t>(kb * n)], static_cast<size_t>(cols));
      }
    }
  }
  std::copy(params_.begin(), params_.end(), host.begin() + static_cast<std::ptrdiff_t>(c.p_addr));
  return host;
}

isa::Program LayerCompiler::Emit(const Chunking& c) const {
  const int64_t n = n_, m = c.m, mc = c.mc, chunks = c.chunks, mco = c.mco;
  const uint64_t p_addr = c.p_addr, y_addr = c.y_addr;
  const isa::Pool pool = !pooled_    ? isa::Pool::kNone
                         : max_pool_ ? isa::Pool::kMax
                                     : isa::Pool::kAvg;
  isa::ProgramBuilder p;
  // Software pipeline: chunk ch's rows go to unified-buffer half ch % 2 and are fetched
  // while chunk ch - 1 computes; each group of tiles (chunk, output tile j) accumulates in
  // one half of the accumulators while the previous group is activated from the other;
  // a chunk's outputs are written back while the next chunk computes. Instructions issue
  // in order, so this order is what lets the host DMA, the matrix unit and the activation
  // unit work at the same time (the controller's interlocks keep them apart).
  auto rows_of = [&](int64_t ch) { return std::min(mc, m - ch * mc); };
  auto fetch = [&](int64_t ch) {
    p.ReadHost(static_cast<uint64_t>(ch * mc * kt_ * n), static_cast<uint64_t>((ch % 2) * kt_ * mc),
               static_cast<uint64_t>(kt_ * rows_of(ch)));
  };
  auto y_ub = [&](int64_t ch) { return 2 * kt_ * mc + (ch % 2) * nt_ * mco; };
  auto out_rows_of = [&](int64_t ch) { return pooled_ ? rows_of(ch) / 4 : rows_of(ch); };
  auto acc_of = [&](int64_t seq) { return (seq % 2) * (config_.acc_depth_rows / 2); };
  auto activate = [&](int64_t ch, int64_t j, int64_t seq) {
    p.Activate(static_cast<uint64_t>(acc_of(seq)),
               static_cast<uint64_t>(y_ub(ch) + j * out_rows_of(ch)),
               static_cast<uint64_t>(rows_of(ch)), static_cast<uint64_t>(j), relu_, pool);
  };
  auto write_back = [&](int64_t ch) {
    p.WriteHost(static_cast<uint64_t>(y_ub(ch)), y_addr + static_cast<uint64_t>(ch * mco * nt_ * n),
                static_cast<uint64_t>(nt_ * out_rows_of(ch)));
  };
  p.ReadParams(p_addr, 0, static_cast<uint64_t>(nt_));
  fetch(0);
  int64_t seq = 0, prev_ch = -1, prev_j = -1;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t rows = rows_of(ch), xb = (ch % 2) * kt_ * mc;
    p.ReadWeights(0, static_cast<uint64_t>(kt_ * nt_));
    if (ch + 1 < chunks) fetch(ch + 1);
    for (int64_t j = 0; j < nt_; ++j, ++seq) {
      for (int64_t kb = 0; kb < kt_; ++kb) {
        p.Matmul(static_cast<uint64_t>(xb + kb * rows), static_cast<uint64_t>(acc_of(seq)),
                 static_cast<uint64_t>(rows), /*switch_tile=*/true, isa::AddIf(kb > 0));
      }
      if (prev_ch >= 0) activate(prev_ch, prev_j, seq - 1);
      if (j == 0 && ch > 0) write_back(ch - 1);  // its last group was just activated
      prev_ch = ch;
      prev_j = j;
    }
  }
  activate(prev_ch, prev_j, seq - 1);
  write_back(chunks - 1);
  p.Halt();
  return p.Take();
}

std::vector<int8_t> LayerCompiler::Decode(const std::vector<uint8_t>& out, int batch) const {
  const int64_t n = n_;
  const int64_t m = batch * rows_per_image_;
  const int64_t opi = OutRowsPerImage();
  const int64_t mc = ChunkRows(m);
  const int64_t mco = pooled_ ? mc / 4 : mc, out_rows = pooled_ ? m / 4 : m;
  std::vector<int8_t> y(static_cast<size_t>(batch * out_.Size()));
  for (int64_t g = 0; g < out_rows; ++g) {
    const int64_t ch = g / mco, i = g % mco;
    const int64_t rows = std::min(mco, out_rows - ch * mco);
    const int64_t b = g / opi, p = g % opi;
    for (int64_t j = 0; j < nt_; ++j) {
      const uint8_t* src = &out[static_cast<size_t>((ch * mco * nt_ + j * rows + i) * n)];
      for (int64_t c = 0; c < n && j * n + c < out_.c; ++c) {
        y[static_cast<size_t>(b * out_.Size() + p * out_.c + j * n + c)] =
            static_cast<int8_t>(src[c]);
      }
    }
  }
  return y;
}

}  // namespace tpu::compiler
