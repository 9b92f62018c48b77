// One program per batch for a whole network (see network_compiler.h).
#include "host/compiler/network_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/compiler/packing.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler {
namespace {

// What the window registers and the instruction word hold (contract/tpu_contract.toml).
constexpr int64_t kWindowSize = hw::kOpdSetWindowInH.Max();  // map and output sides
constexpr int64_t kWindowSmall = hw::kOpdSetWindowKh.Max();  // kernel, stride, padding
constexpr int64_t kField16 = hw::kOpdMatmulFirst.Max();      // first pixel, K-tile, transfer rows
constexpr int64_t kRingGroups = 3;  // groups alive in a convolution's output ring

}  // namespace

NetworkCompiler::NetworkCompiler(const nn::Model& model, const config::TpuConfig& config, int batch)
    : preprocess_(model.preprocess), config_(config), n_(config.array_dim), batch_(batch) {
  const int64_t n = n_, acc_half = config.acc_depth_rows / 2;
  auto no = [&](const std::string& why) {
    if (why_not_.empty()) why_not_ = why;
  };
  const std::vector<LayerStep> steps = PlanSteps(model, config);
  int64_t sets = 0;
  bool dense_seen = false;
  for (const LayerStep& step : steps) {
    name_ += (name_.empty() ? "" : " > ") + step.Name(model);
    if (step.channels != 0) no("layer '" + step.Name(model) + "' runs in channel groups");
    if (step.gather) no("max pooling '" + step.Name(model) + "' runs as gather passes");
    if (!why_not_.empty()) break;
    Stage s;
    const nn::Layer& l =
        step.lowered ? *step.lowered : model.layers[static_cast<size_t>(step.layer)];
    s.kh = l.kernel_h;
    s.kw = l.kernel_w;
    s.stride = l.stride;
    s.pad_top = l.pad_top;
    s.pad_left = l.pad_left;
    const nn::Layer* pool =
        step.pool_layer >= 0 ? &model.layers[static_cast<size_t>(step.pool_layer)] : nullptr;
    s.conv = l.type == nn::LayerType::kConv2d;
    s.pooled = pool != nullptr;
    s.max_pool = pool != nullptr && pool->type == nn::LayerType::kMaxPool2d;
    s.relu = nn::ClampsAtZero(l.activation);
    s.in = l.in;
    s.out = pool ? nn::Shape3{pool->out.h, pool->out.w, l.out.c} : l.out;
    const int64_t k =
        s.conv ? int64_t{l.kernel_h} * l.kernel_w * l.in.c : static_cast<int64_t>(l.in.Size());
    s.kt = (k + n - 1) / n;
    s.nt = (l.out.c + n - 1) / n;
    s.param_set = static_cast<uint64_t>(sets);
    sets += s.nt;
    s.weight_addr = weights_.size();
    const std::vector<uint8_t> w = PackWeightTiles(l.q.weights.data.data(), k, l.out.c, n_);
    weights_.insert(weights_.end(), w.begin(), w.end());
    const std::vector<uint8_t> p =
        PackParamSets(l.q.bias.data.data(), l.q.multiplier.data(), l.q.shift.data(), l.out.c, n_);
    params_.insert(params_.end(), p.begin(), p.end());
    const int64_t in_pixel = stages_.empty() ? l.in.c : stages_.back().nt * n;
    if (s.conv) {
      if (dense_seen) no("a convolution after a dense layer");
      s.out_h = s.pooled ? 2 * int64_t{s.out.h} : l.out.h;
      s.out_w = s.pooled ? 2 * int64_t{s.out.w} : l.out.w;
      s.rows = s.out_h * s.out_w;
      if (l.kernel_h > kWindowSmall || l.kernel_w > kWindowSmall || l.stride > kWindowSmall ||
          l.pad_top >= l.kernel_h || l.pad_left >= l.kernel_w || l.in.h > kWindowSize ||
          l.in.w > kWindowSize || s.out_h > kWindowSize || s.out_w > kWindowSize ||
          s.rows > kField16 + 1 || s.kt > kField16 || in_pixel > kField16 || l.in.c > kField16 ||
          (s.out_h - 1) * l.stride > l.in.h - 1 + l.pad_top ||
          (s.out_w - 1) * l.stride > l.in.w - 1 + l.pad_left) {
        no("layer '" + step.Name(model) + "' does not fit the window registers");
      }
    } else {
      dense_seen = true;
      s.rows = 1;
      if (!stages_.empty() && stages_.back().conv) {
        // The batch's maps stacked vertically: one window per image covers its whole map.
        const Stage& prev = stages_.back();
        if (prev.out.h > kWindowSmall || prev.out.w > kWindowSmall ||
            int64_t{batch} * prev.out.h > kWindowSize || prev.out.Size() != l.in.Size()) {
          no("the map before '" + step.Name(model) + "' is too large for one window");
        }
      }
    }
    macs_per_image_ += UsefulMacsPerImage(l, s.rows);
    stages_.push_back(s);
  }
  if (!why_not_.empty()) return;
  if (stages_.empty()) {
    no("no layer runs on the chip");
    return;
  }
  if (sets > config.param_sets) {
    no(fmt::format("the network needs {} VPU parameter sets; the chip has {}", sets,
                   config.param_sets));
    return;
  }
  if (static_cast<int64_t>(weights_.size()) > config.weight_mem_bytes) {
    no(fmt::format("the weights need {} bytes; weight memory holds {}", weights_.size(),
                   config.weight_mem_bytes));
    return;
  }
  if (batch > acc_half || batch > kField16) {
    no(fmt::format("a batch of {} is more rows than half the accumulators ({})", batch, acc_half));
    return;
  }
  // Images per group: as many as the accumulators hold for every convolution that fits them.
  int64_t group = batch;
  for (const Stage& s : stages_)
    if (s.conv && s.rows <= acc_half) group = std::min(group, acc_half / s.rows);
  group_ = static_cast<int>(std::max<int64_t>(1, group));
  // The 2-pixel zero border of mnist32 becomes padding of the first convolution where its
  // window allows: padding smaller than the kernel, every window starting inside the map.
  const Stage& first = stages_.front();
  if (model.preprocess == "mnist32" && first.conv && first.in == nn::Shape3{32, 32, 1} &&
      first.pad_top + 2 < first.kh && first.pad_left + 2 < first.kw &&
      (first.out_h - 1) * first.stride <= 28 - 1 + first.pad_top + 2 &&
      (first.out_w - 1) * first.stride <= 28 - 1 + first.pad_left + 2) {
    border_ = 2;
  }
  sent_ = {first.in.h - 2 * border_, first.in.w - 2 * border_, first.in.c};
  in_pixel_bytes_ = sent_.c;
  in_rows_ = (sent_.Size() + n - 1) / n;
  // The unified buffer: the batch's images, each convolution's outputs (a ring of groups,
  // or the whole batch before a dense layer or at the end), each dense layer's outputs.
  int64_t ub = static_cast<int64_t>(batch) * in_rows_;
  ub_in_ = 0;
  for (size_t i = 0; i < stages_.size(); ++i) {
    Stage& s = stages_[i];
    s.ub = ub;
    if (s.conv) {
      const bool feeds_conv = i + 1 < stages_.size() && stages_[i + 1].conv;
      s.slots = feeds_conv ? std::min<int64_t>(batch, kRingGroups * group_) : batch;
      ub += s.slots * s.out.h * s.out.w * s.nt;
    } else {
      ub += s.nt * batch;
    }
  }
  if (ub > config.ub_depth_rows) {
    no(fmt::format("a batch of {} needs {} unified-buffer rows; the chip has {}", batch, ub,
                   config.ub_depth_rows));
    return;
  }
}

LayerJob NetworkCompiler::Build(const std::vector<int8_t>& act, int batch) const {
  if (!Fits()) throw UsageError("the network does not run as one program: " + why_not_);
  if (batch < 1 || batch > batch_) {
    throw UsageError(fmt::format("a batch of {} images; the plan is for 1 to {}", batch, batch_));
  }
  const int64_t n = n_, b = batch, acc_half = config_.acc_depth_rows / 2;
  const nn::Shape3& in = stages_.front().in;
  const Stage& last = stages_.back();
  LayerJob job;
  engine::ExecJob& ex = job.exec;
  ex.name = "network";
  // Host memory: the images (packed, each from a row boundary), the parameter sets, the
  // last layer's outputs.
  const uint64_t img_bytes = static_cast<uint64_t>(b * in_rows_ * n);
  const uint64_t p_addr = (img_bytes + 63) / 64 * 64;
  const uint64_t y_addr = (p_addr + params_.size() + 63) / 64 * 64;
  const int64_t out_rows = last.conv ? b * last.out.h * last.out.w * last.nt : last.nt * b;
  ex.host_out_addr = y_addr;
  ex.host_out_bytes = static_cast<uint64_t>(out_rows * n);
  if (y_addr + ex.host_out_bytes > static_cast<uint64_t>(config_.host_mem_bytes)) {
    throw UsageError(fmt::format(
        "a batch of {} needs {} bytes of host memory; the config has {} (host_mem_bytes): use a "
        "smaller --batch",
        batch, y_addr + ex.host_out_bytes, config_.host_mem_bytes));
  }
  ex.host_image.assign(static_cast<size_t>(y_addr), 0);
  for (int64_t i = 0; i < b; ++i) {
    const int8_t* image = &act[static_cast<size_t>(i * in.Size())];
    uint8_t* sent = &ex.host_image[static_cast<size_t>(i * in_rows_ * n)];
    const int64_t row = int64_t{sent_.w} * sent_.c;
    for (int64_t y = 0; y < in.h; ++y) {
      for (int64_t x = 0; x < int64_t{in.w} * in.c; ++x) {
        const int8_t v = image[y * in.w * in.c + x];
        const bool inner = y >= border_ && y < in.h - border_ && x >= border_ * in.c &&
                           x < (in.w - border_) * in.c;
        if (inner) {
          sent[(y - border_) * row + x - border_ * in.c] = static_cast<uint8_t>(v);
        } else if (v != 0) {
          throw UsageError(fmt::format(
              "image {} of the batch has a pixel other than 0 in the border that preprocess "
              "{} pads with zeros ({}, {})",
              i, preprocess_, y, x / in.c));
        }
      }
    }
  }
  std::copy(params_.begin(), params_.end(),
            ex.host_image.begin() + static_cast<std::ptrdiff_t>(p_addr));
  ex.weight_image = weights_;

  isa::ProgramBuilder p;
  p.ReadParams(p_addr, 0, params_.size() / (static_cast<size_t>(hw::kParamRows) * n_));
  // Activations wait one pass: each pass accumulates in one half of the accumulators while
  // the previous pass is activated from the other (instructions issue in order).
  // A pass must not read what a waiting activate writes (the controller orders only
  // instructions already issued): a pass of stage l first lets stage l - 1's activates out.
  struct Act {
    uint64_t acc, ub, rows, set, stride;
    bool relu;
    isa::Pool pool;
    size_t stage;
    int64_t group;  // -1: the whole batch
  };
  std::vector<Act> pending, current;
  int64_t seq = 0;
  auto flush = [&]() {
    for (const Act& a : pending) p.Activate(a.acc, a.ub, a.rows, a.set, a.relu, a.pool, a.stride);
    pending.clear();
  };
  auto begin_pass = [&](size_t stage, int64_t group) {
    for (const Act& a : pending)
      if (stage > 0 && a.stage == stage - 1 && (group < 0 || a.group < 0 || a.group == group)) {
        flush();
        return;
      }
  };
  // The previous pass's activates go right after this pass's first matmul: the VPU then
  // drains one half of the accumulators while the matrix unit streams into the other.
  bool first_matmul = true;
  auto matmul_emitted = [&]() {
    if (first_matmul) flush();
    first_matmul = false;
  };
  auto end_pass = [&]() {
    flush();
    pending = std::move(current);
    current.clear();
    first_matmul = true;
    ++seq;
  };
  auto acc_of = [&]() { return static_cast<uint64_t>((seq % 2) * acc_half); };
  isa::WindowGeometry shown{};                       // the window set last (in_h 0: none)
  auto window = [&](const isa::WindowGeometry& g) {  // set only when it changes
    if (g == shown) return;
    p.SetWindow(g);
    shown = g;
  };

  const uint64_t tile_bytes = static_cast<uint64_t>(n * n);
  const int64_t groups = (b + group_ - 1) / group_;
  auto image_rows = [&](const Stage& s) { return int64_t{s.out.h} * s.out.w * s.nt; };
  // Where image i's output of conv stage l lies.
  auto out_row = [&](size_t l, int64_t i) {
    const Stage& s = stages_[l];
    const int64_t slot = s.slots >= batch_ ? i : i % s.slots;
    return s.ub + slot * image_rows(s);
  };
  auto read_images = [&](int64_t k) {  // the group's images: contiguous rows, in pieces
    const int64_t i0 = k * group_, count = std::min<int64_t>(group_, b - i0);
    const int64_t first = i0 * in_rows_, rows = count * in_rows_;
    for (int64_t r0 = 0; r0 < rows; r0 += kField16) {
      p.ReadHost(static_cast<uint64_t>((first + r0) * n),
                 static_cast<uint64_t>(ub_in_ + first + r0),
                 static_cast<uint64_t>(std::min(kField16, rows - r0)));
    }
  };
  // One convolution for the images of group k.
  auto conv_pass = [&](size_t l, int64_t k) {
    const Stage& s = stages_[l];
    const int64_t i0 = k * group_, count = std::min<int64_t>(group_, b - i0);
    isa::WindowGeometry g;
    const int64_t border = l == 0 ? border_ : 0;
    g.in_h = static_cast<uint64_t>(s.in.h - 2 * border);
    g.in_w = static_cast<uint64_t>(s.in.w - 2 * border);
    g.channels = static_cast<uint64_t>(s.in.c);
    g.pixel_bytes = static_cast<uint64_t>(l == 0 ? in_pixel_bytes_ : stages_[l - 1].nt * n);
    g.kh = static_cast<uint64_t>(s.kh);
    g.kw = static_cast<uint64_t>(s.kw);
    g.stride_y = g.stride_x = static_cast<uint64_t>(s.stride);
    g.pad_top = static_cast<uint64_t>(s.pad_top + border);
    g.pad_left = static_cast<uint64_t>(s.pad_left + border);
    g.out_h = static_cast<uint64_t>(s.out_h);
    g.out_w = static_cast<uint64_t>(s.out_w);
    g.pooled = s.pooled;
    window(g);
    auto src = [&](int64_t i) {
      return static_cast<uint64_t>(l == 0 ? ub_in_ + i * in_rows_ : out_row(l - 1, i));
    };
    const isa::Pool pool = !s.pooled    ? isa::Pool::kNone
                           : s.max_pool ? isa::Pool::kMax
                                        : isa::Pool::kAvg;
    const uint64_t stride = static_cast<uint64_t>(s.nt);
    if (s.rows <= acc_half) {
      // The group's rows of a tile fit the accumulators: each tile is switched in once.
      for (int64_t j = 0; j < s.nt; ++j) {
        begin_pass(l, k);
        p.ReadWeights(s.weight_addr + static_cast<uint64_t>(j * s.kt) * tile_bytes,
                      static_cast<uint64_t>(s.kt));
        const uint64_t acc = acc_of();
        for (int64_t kb = 0; kb < s.kt; ++kb)
          for (int64_t i = 0; i < count; ++i) {
            p.MatmulWindow(src(i0 + i), acc + static_cast<uint64_t>(i * s.rows),
                           static_cast<uint64_t>(s.rows), 0, static_cast<uint64_t>(kb), i == 0,
                           kb > 0);
            matmul_emitted();
          }
        for (int64_t i = 0; i < count; ++i)
          current.push_back({acc + static_cast<uint64_t>(i * s.rows),
                             static_cast<uint64_t>(out_row(l, i0 + i) + j),
                             static_cast<uint64_t>(s.rows), s.param_set + static_cast<uint64_t>(j),
                             stride, s.relu, pool, l, k});
        end_pass();
      }
      return;
    }
    // An image's rows are more than the accumulators hold: chunks; a layer of one tile
    // keeps it in the array for the whole group.
    // Chunks of equal size: an activate then ends about when the next chunk's rows do.
    const int64_t most = s.pooled ? acc_half - acc_half % 4 : acc_half;
    const int64_t pieces = (s.rows + most - 1) / most;
    int64_t mc = (s.rows + pieces - 1) / pieces;
    if (s.pooled) mc = (mc + 3) / 4 * 4;
    const bool one_tile = s.kt * s.nt == 1;
    bool loaded = false;
    for (int64_t i = i0; i < i0 + count; ++i) {
      for (int64_t j = 0; j < s.nt; ++j) {
        for (int64_t c0 = 0; c0 < s.rows; c0 += mc) {
          const int64_t rows = std::min(mc, s.rows - c0);
          begin_pass(l, k);
          const bool read = !one_tile || !loaded;
          if (read)
            p.ReadWeights(s.weight_addr + static_cast<uint64_t>(j * s.kt) * tile_bytes,
                          static_cast<uint64_t>(s.kt));
          loaded = true;
          const uint64_t acc = acc_of();
          for (int64_t kb = 0; kb < s.kt; ++kb) {
            p.MatmulWindow(src(i), acc, static_cast<uint64_t>(rows), static_cast<uint64_t>(c0),
                           static_cast<uint64_t>(kb), read, kb > 0);
            matmul_emitted();
          }
          const int64_t o0 = s.pooled ? c0 / 4 : c0;
          current.push_back({acc, static_cast<uint64_t>(out_row(l, i) + o0 * s.nt + j),
                             static_cast<uint64_t>(rows), s.param_set + static_cast<uint64_t>(j),
                             stride, s.relu, pool, l, k});
          end_pass();
        }
      }
    }
  };

  // The convolutions, group by group, in a wavefront: convolution l of group k follows
  // convolution l - 1 of group k + 1, so its input was activated while that one streamed.
  size_t convs = 0;
  while (convs < stages_.size() && stages_[convs].conv) ++convs;
  read_images(0);
  const int64_t waves = convs == 0 ? groups : groups + static_cast<int64_t>(convs) - 1;
  for (int64_t d = 0; d < waves; ++d) {
    if (d + 1 < groups) read_images(d + 1);
    for (size_t l = 0; l < convs; ++l) {
      const int64_t k = d - static_cast<int64_t>(l);
      if (k >= 0 && k < groups) conv_pass(l, k);
    }
  }
  // The dense layers, once per batch: every weight tile streams the whole batch.
  for (size_t l = convs; l < stages_.size(); ++l) {
    const Stage& s = stages_[l];
    if (l > 0 && stages_[l - 1].conv) {
      const Stage& prev = stages_[l - 1];
      isa::WindowGeometry g;
      g.in_h = static_cast<uint64_t>(b * prev.out.h);
      g.in_w = static_cast<uint64_t>(prev.out.w);
      g.channels = static_cast<uint64_t>(prev.out.c);
      g.pixel_bytes = static_cast<uint64_t>(prev.nt * n);
      g.kh = g.stride_y = static_cast<uint64_t>(prev.out.h);
      g.kw = static_cast<uint64_t>(prev.out.w);
      g.stride_x = 1;
      g.out_h = static_cast<uint64_t>(b);
      g.out_w = 1;
      window(g);
    }
    p.ReadWeights(s.weight_addr, static_cast<uint64_t>(s.kt * s.nt));
    for (int64_t j = 0; j < s.nt; ++j) {
      begin_pass(l, -1);
      const uint64_t acc = acc_of();
      for (int64_t kb = 0; kb < s.kt; ++kb) {
        const auto rows = static_cast<uint64_t>(b);
        if (l == 0) {
          p.Matmul(static_cast<uint64_t>(ub_in_ + kb), acc, rows, true, kb > 0,
                   static_cast<uint64_t>(in_rows_));
        } else if (stages_[l - 1].conv) {
          p.MatmulWindow(static_cast<uint64_t>(stages_[l - 1].ub), acc, rows, 0,
                         static_cast<uint64_t>(kb), true, kb > 0);
        } else {
          p.Matmul(static_cast<uint64_t>(stages_[l - 1].ub + kb * b), acc, rows, true, kb > 0);
        }
        matmul_emitted();
      }
      current.push_back({acc, static_cast<uint64_t>(s.ub + j * b), static_cast<uint64_t>(b),
                         s.param_set + static_cast<uint64_t>(j), 1, s.relu, isa::Pool::kNone, l,
                         -1});
      end_pass();
    }
  }
  end_pass();
  for (int64_t r0 = 0; r0 < out_rows; r0 += kField16) {
    p.WriteHost(static_cast<uint64_t>(last.ub + r0), y_addr + static_cast<uint64_t>(r0 * n),
                static_cast<uint64_t>(std::min(kField16, out_rows - r0)));
  }
  p.Halt();
  ex.program = p.Take();
  job.rows = b;
  job.chunks = groups;
  job.summary =
      fmt::format("{}: one program for {} images, convolutions in groups of {}", name_, b, group_);
  return job;
}

std::vector<int8_t> NetworkCompiler::Decode(const std::vector<uint8_t>& out, int batch) const {
  const Stage& s = stages_.back();
  const int64_t n = n_, b = batch, size = s.out.Size();
  std::vector<int8_t> y(static_cast<size_t>(b * size));
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t px = 0; px < int64_t{s.out.h} * s.out.w; ++px) {
      for (int64_t c = 0; c < s.out.c; ++c) {
        const int64_t j = c / n, lane = c % n;
        const int64_t row = s.conv ? (i * s.out.h * s.out.w + px) * s.nt + j : j * b + i;
        y[static_cast<size_t>(i * size + px * s.out.c + c)] =
            static_cast<int8_t>(out[static_cast<size_t>(row * n + lane)]);
      }
    }
  }
  return y;
}

}  // namespace tpu::compiler
