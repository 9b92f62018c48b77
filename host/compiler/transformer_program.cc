// See transformer_program.h.
#include "host/compiler/transformer_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "host/common/errors.h"
#include "host/compiler/transformer_layout.h"
#include "host/compiler/unit_schedule.h"
#include "host/isa/isa.h"

namespace tpu::compiler {

using nn::LayerType;

bool IsTransformer(const nn::Model& m) {
  static const LayerType kTypes[] = {
      LayerType::kReshape, LayerType::kTranspose, LayerType::kSlice, LayerType::kMatMul,
      LayerType::kSoftmax, LayerType::kLayerNorm, LayerType::kGelu,  LayerType::kAddConstant,
      LayerType::kPrepend, LayerType::kEmbedding};
  return std::any_of(m.layers.begin(), m.layers.end(), [](const nn::Layer& l) {
    return std::find(std::begin(kTypes), std::end(kTypes), l.type) != std::end(kTypes);
  });
}

struct TransformerLayout {
  isa::Program program;
  std::vector<int32_t> op_of;
  std::vector<int> ops;
  std::vector<uint8_t> weights;  // weight memory
  TensorArea in, out;
  Placement in_place;  // each input value's position and channel
  uint64_t out_addr = 0;
  int64_t row_bytes = 0, ub_rows = 0;
  int64_t group = 1;  // images per group (the batch runs group after group)
  int n = 0;
  EmitterState state;  // a cached program's, for the programs after it
};

TransformerProgram::TransformerProgram(const nn::Model& m, const config::TpuConfig& config,
                                       int batch, int link_cores)
    : batch_(batch), link_cores_(link_cores), t_(std::make_unique<TransformerLayout>()) {
  CheckBf16(config);
  // The largest group of images (a divisor of the batch) whose tensors fit the buffer.
  // Each group's rows taken next fit, else (where that leaves no run large enough) first fit;
  // each group's input read while the group before runs, else (where the second input's
  // rows do not fit) at its start.
  for (int g = batch; g >= 1; --g) {
    if (batch % g != 0) continue;
    for (const bool next_fit : {true, false})
      for (const bool ahead : {true, false}) {
        if (ahead && g == batch) continue;  // one group: nothing to read ahead
        try {
          Emit(m, config, g, batch / g, {}, nullptr, next_fit, ahead);
          return;
        } catch (const UsageError&) {
          if (g == 1 && !next_fit && !ahead) throw;
        }
      }
  }
}

TransformerProgram::TransformerProgram(const nn::Model& m, const config::TpuConfig& config,
                                       int batch, const Positions& at,
                                       const TransformerProgram* after)
    : batch_(batch), t_(std::make_unique<TransformerLayout>()) {
  CheckBf16(config);
  if (!at.Cached() || at.first < 0 || at.end <= at.first)
    throw std::logic_error("TransformerProgram: positions to decode are [first, end)");
  Emit(m, config, batch, 1, at, after);
}

void TransformerProgram::CheckBf16(const config::TpuConfig& config) {
  if (config.dtype != hw::Dtype::kBf16)
    throw UsageError(fmt::format(
        "config '{}' is an int8 chip, which has no float32 vector unit for a transformer's "
        "softmax, LayerNorm and GELU; run it on a bf16 chip (tpu-v2, tpu-v3, tpu-v4, or "
        "--set dtype=bf16; docs/transformers.md)",
        config.name));
}

void TransformerProgram::Emit(const nn::Model& m, const config::TpuConfig& config, int group,
                              int groups, const Positions& at, const TransformerProgram* after,
                              bool next_fit, bool read_ahead) {
  const EmitterState* before = after ? &after->t_->state : nullptr;
  const auto emitter = [&](int64_t constant_rows) {
    TransformerEmitter e = at.Cached()
                               ? TransformerEmitter(m, config, group, constant_rows, at, before)
                               : TransformerEmitter(m, config, group, groups, constant_rows);
    e.NextFit(next_fit);
    e.ReadAhead(read_ahead);
    return e;
  };
  // The first emission counts the constants' rows, which the second keeps at the top (after
  // a cached program: its constants, where it put them).
  // Its parameter sets too, which the second keeps after them in weight memory.
  int64_t rows = before ? before->consts.Rows() : 0, set_bytes = 0;
  if (!before) {
    TransformerEmitter first = emitter(0);
    first.CountOnly(true);
    first.Run();
    rows = first.Constants().Rows();
    set_bytes = static_cast<int64_t>(first.Params().size());
  }
  TransformerEmitter e = emitter(rows);
  if (!before) e.ReserveParams(set_bytes);
  e.Run();
  TransformerLayout& t = *t_;
  if (at.Cached() && !before) t.state = e.State();
  t.group = group;
  t.op_of = e.OpOf();
  t.ops = e.Operations();
  t.program = ScheduleUnits(e.TakeProgram(), &t.op_of, config, link_cores_);
  t.weights = e.Weights();
  t.in = e.InputArea();
  t.in_place = e.InputPlace();
  t.out = e.OutputArea();
  t.out_addr = e.OutputAddr();
  t.row_bytes = e.RowBytes();
  t.ub_rows = e.UbHigh() + e.Constants().Rows();
  t.n = config.array_dim;
}

TransformerProgram::~TransformerProgram() = default;
TransformerProgram::TransformerProgram(TransformerProgram&&) noexcept = default;

namespace {

// Host row of image i's block `block` at position `pos` of area a: group after group, each
// group's rows block-major as the buffer's.
int64_t Row(const TransformerLayout& t, const TensorArea& a, int64_t i, int64_t block,
            int64_t pos) {
  return i / t.group * a.Rows(t.group) + (block * t.group + i % t.group) * a.p + pos;
}

}  // namespace

LayerJob TransformerProgram::Build(const std::vector<uint16_t>& act) const {
  const TransformerLayout& t = *t_;
  const auto per = static_cast<int64_t>(t.in_place.pos.size());
  if (static_cast<int64_t>(act.size()) != per * batch_)
    throw std::logic_error("TransformerProgram::Build: the batch's inputs have another size");
  LayerJob job;
  std::vector<uint8_t>& host = job.exec.host_image;
  host.assign(t.out_addr, 0);
  for (int64_t i = 0; i < batch_; ++i)
    for (int64_t v = 0; v < per; ++v) {
      const int64_t pos = t.in_place.pos[static_cast<size_t>(v)];
      const int64_t ch = t.in_place.ch[static_cast<size_t>(v)];
      const int64_t row = Row(t, t.in, i, ch / t.n, pos);
      const auto at = static_cast<size_t>(row * t.row_bytes + 2 * (ch % t.n));
      const uint16_t x = act[static_cast<size_t>(i * per + v)];
      host[at] = static_cast<uint8_t>(x & 0xff);
      host[at + 1] = static_cast<uint8_t>(x >> 8);
    }
  job.exec.name = "transformer";
  job.exec.program = t.program;
  job.exec.weight_image = t.weights;
  job.exec.host_out_addr = t.out_addr;
  job.exec.host_out_bytes = static_cast<uint64_t>(t.out.Rows(batch_) * t.row_bytes);
  job.op_of = t.op_of;
  job.summary = fmt::format("{} operations, {} instructions", t.ops.size(), t.program.words.size());
  return job;
}

std::vector<uint16_t> TransformerProgram::Decode(const std::vector<uint8_t>& out) const {
  const TransformerLayout& t = *t_;
  const int64_t per = t.out.p * t.out.c;
  std::vector<uint16_t> y(static_cast<size_t>(per * batch_));
  for (int64_t i = 0; i < batch_; ++i)
    for (int64_t v = 0; v < per; ++v) {
      const int64_t pos = v / t.out.c, ch = v % t.out.c;
      const int64_t row = Row(t, t.out, i, ch / t.n, pos);
      const auto at = static_cast<size_t>(row * t.row_bytes + 2 * (ch % t.n));
      y[static_cast<size_t>(i * per + v)] =
          static_cast<uint16_t>(out.at(at) | (out.at(at + 1) << 8));
    }
  return y;
}

const std::vector<int>& TransformerProgram::Operations() const { return t_->ops; }
int64_t TransformerProgram::UbRows() const { return t_->ub_rows; }
int TransformerProgram::Group() const { return static_cast<int>(t_->group); }

}  // namespace tpu::compiler
