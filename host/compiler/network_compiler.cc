// One program per batch for a whole network (see network_compiler.h).
#include "host/compiler/network_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arith/format.h"
#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/common/text.h"
#include "host/compiler/graph_emitter.h"
#include "host/isa/program_builder.h"

namespace tpu::compiler {

NetworkCompiler::NetworkCompiler(const nn::Model& model, const config::TpuConfig& config, int batch,
                                 bool maps_on_chip, WeightPath weights)
    : config_(config),
      n_(config.array_dim),
      batch_(std::max(1, batch)),
      row_(hw::RowBytes(config)),
      weight_path_(weights),
      preprocess_(model.preprocess),
      input_(model.input),
      graph_(LowerGraph(model, config.array_dim, config.dtype)) {
  for (const GraphOp& op : graph_.ops) {
    name_ += (name_.empty() ? "" : " > ") + op.name;
    macs_per_image_ += op.macs;
    const nn::Layer& l = model.layers[static_cast<size_t>(op.layers.front())];
    const bool gemm = l.type == nn::LayerType::kConv2d || l.type == nn::LayerType::kDense;
    const int64_t k = l.type == nn::LayerType::kDense ? l.in.Size()
                      : l.depthwise                   ? int64_t{l.kernel_h} * l.kernel_w
                                                      : int64_t{l.kernel_h} * l.kernel_w * l.in.c;
    kn_.emplace_back(gemm ? k : 0, l.out.c);
  }
  if (!graph_.why_not.empty()) {
    why_not_ = graph_.why_not;
    return;
  }
  if (maps_on_chip) {  // both maps on chip, else the input, else the output, else neither
    for (MapsOnChip m :
         {MapsOnChip{true, true}, MapsOnChip{true, false}, MapsOnChip{false, true}}) {
      Plan p = PlanGraph(graph_, config_, batch_, m, weight_path_);
      if (p.why_not.empty()) {
        maps_ = m;
        plans_.emplace(batch_, std::move(p));
        break;
      }
    }
  }
  const Plan& plan = PlanFor(batch_);
  if (!plan.why_not.empty()) {
    why_not_ = plan.why_not;
    return;
  }
  for (const std::vector<uint8_t>& t : graph_.tiles)
    weights_.insert(weights_.end(), t.begin(), t.end());
}

std::vector<SpilledTensor> NetworkCompiler::Spilled(int batch) const {
  if (!Fits()) return {};
  const Plan& plan = PlanFor(batch > 0 ? batch : batch_);
  if (!plan.why_not.empty()) return {};
  std::vector<SpilledTensor> spilled;
  // The layer that computes each, and how often it is read back.
  for (size_t t = 1; t < graph_.tensors.size(); ++t) {
    if (!plan.places[t].host || static_cast<int>(t) == graph_.output) continue;
    const GraphTensor& tt = graph_.tensors[t];
    SpilledTensor s;
    s.name = graph_.ops[static_cast<size_t>(tt.producer)].name;
    s.bytes_per_image = tt.rows * row_;
    for (const auto& st : plan.staging)
      for (const Staging& x : st) s.readers += x.tensor == static_cast<int>(t);
    spilled.push_back(s);
  }
  return spilled;
}

std::pair<int64_t, int64_t> NetworkCompiler::KN(int op) const {
  return kn_.at(static_cast<size_t>(op));
}

int NetworkCompiler::LargestBatch(int most) const {
  if (!graph_.why_not.empty()) return 0;
  const auto fits = [&](int b) { return PlanFor(b).why_not.empty(); };
  if (fits(most)) return most;
  if (most <= 1 || !fits(1)) return 0;
  int lo = 1, hi = most;  // fits(lo), !fits(hi): what a plan needs grows with the batch
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

const Plan& NetworkCompiler::PlanFor(int batch) const {
  auto it = plans_.find(batch);
  if (it == plans_.end())
    it = plans_.emplace(batch, PlanGraph(graph_, config_, batch, maps_, weight_path_)).first;
  return it->second;
}

std::string NetworkCompiler::PlanText(int batch) const {
  if (!Fits()) return "";
  const Plan& plan = PlanFor(batch > 0 ? batch : batch_);
  std::string s;
  for (const PlanSegment& seg : plan.segments) {
    const std::string& a = graph_.ops[static_cast<size_t>(seg.first)].name;
    const std::string& b = graph_.ops[static_cast<size_t>(seg.end - 1)].name;
    const std::string ops = seg.end - seg.first == 1 ? a : a + " .. " + b;
    s +=
        (s.empty() ? "" : "; ") + (seg.banded ? fmt::format("{} in bands of {} rows", ops, seg.band)
                                              : fmt::format("{} in groups of {}", ops, seg.group));
  }
  s += fmt::format("; {} of {} unified-buffer rows", Grouped(plan.ub_rows),
                   Grouped(config_.ub_depth_rows));
  if (plan.weight_stage >= 0)
    s += fmt::format("; weights through vector memory (rows {} up)", Grouped(plan.weight_stage));
  if (const std::vector<SpilledTensor> spilled = Spilled(batch); !spilled.empty()) {
    int64_t bytes = 0;
    std::string names;
    for (const SpilledTensor& t : spilled) {
      bytes += t.bytes_per_image * (1 + t.readers);
      names += (names.empty() ? "" : ", ") + t.name;
    }
    s += fmt::format("; spilled to host memory: {} ({} bytes per image moved)", names,
                     Grouped(bytes));
  }
  return s;
}

template <class T>
LayerJob NetworkCompiler::Build(const std::vector<T>& act, int batch, int sharers) const {
  arith::RequireFormat<UsageError, T>(config_.dtype);
  return BuildOf(act, batch, sharers);
}

const ModelSplit& NetworkCompiler::SplitOfOne() const {
  if (split_) return *split_;
  split_ = ModelSplit{config_.cores, std::vector<bool>(graph_.ops.size(), false)};
  if (!Fits() || config_.cores < 2 || !PlanFor(1).why_not.empty()) return *split_;
  const Plan& plan = PlanFor(1);
  ModelSplit s = ChooseModelSplit(graph_, plan, config_);
  // Two areas past everything the program uses, each the largest split map's rows.
  uint64_t area = 0;
  for (size_t i = 0; i < graph_.ops.size(); ++i)
    if (s.split[i])
      area = std::max(area,
                      static_cast<uint64_t>(
                          graph_.tensors[static_cast<size_t>(graph_.ops[i].output)].rows * row_));
  const GraphTensor& out = graph_.tensors[static_cast<size_t>(graph_.output)];
  const uint64_t end = std::max<uint64_t>(
      plan.host_bytes, plan.output_addr + static_cast<uint64_t>(out.rows * row_));
  const auto align = static_cast<uint64_t>(row_);
  exchange_[0] = (end + align - 1) / align * align;
  exchange_[1] = exchange_[0] + (area + align - 1) / align * align;
  if (exchange_[1] + area <= static_cast<uint64_t>(config_.host_mem_bytes)) split_ = std::move(s);
  return *split_;
}

std::vector<Bound> NetworkCompiler::CoreBounds(int core) const {
  return BoundGraph(CoreGraph(graph_, SplitOfOne().split, core, config_.cores), PlanFor(1), config_,
                    1);
}

std::vector<CompiledNetwork> NetworkCompiler::CompileCores() const {
  const ModelSplit& s = SplitOfOne();
  if (!s.Any()) throw UsageError("the network has no operation to split over the cores");
  CoreShare share;
  share.cores = config_.cores;
  share.split = s.split;
  share.exchange[0] = exchange_[0];
  share.exchange[1] = exchange_[1];
  std::vector<CompiledNetwork> cores;
  for (int c = 0; c < config_.cores; ++c) {
    share.core = c;
    const LoweredGraph g = CoreGraph(graph_, s.split, c, config_.cores);
    CompiledNetwork compiled;
    compiled.job = ProgramOf(1, config_.cores, &share, &g);
    compiled.input_bytes = PlanFor(1).params_addr;
    compiled.bounds = CoreBounds(c);
    cores.push_back(std::move(compiled));
  }
  return cores;
}

const Plan& NetworkCompiler::CheckedPlan(int batch) const {
  if (!Fits()) throw UsageError("the network does not run as one program: " + why_not_);
  if (batch < 1 || batch > batch_) {
    throw UsageError(fmt::format("a batch of {} images; the plan is for 1 to {}", batch, batch_));
  }
  const Plan& plan = PlanFor(batch);
  if (!plan.why_not.empty()) throw UsageError(plan.why_not);
  return plan;
}

template <class T>
std::vector<uint8_t> NetworkCompiler::EncodeInputs(const std::vector<T>& act, int batch) const {
  arith::RequireFormat<UsageError, T>(config_.dtype);
  const Plan& plan = CheckedPlan(batch);
  const GraphTensor& in = graph_.tensors[0];
  std::vector<uint8_t> bytes(static_cast<size_t>(plan.params_addr), 0);
  const int b = graph_.border;  // mnist32: the zero border the first convolution pads
  for (int64_t i = 0; i < batch; ++i) {
    const T* image = &act[static_cast<size_t>(i * input_.Size())];
    uint8_t* sent = &bytes[static_cast<size_t>(i * in.rows * row_)];
    for (int64_t y = 0; y < input_.h; ++y)
      for (int64_t x = 0; x < input_.w; ++x)
        for (int64_t c = 0; c < input_.c; ++c) {
          const T v = image[(y * input_.w + x) * input_.c + c];
          const bool inner = y >= b && y < input_.h - b && x >= b && x < input_.w - b;
          if (inner) {
            std::memcpy(&sent[(((y - b) * in.w + x - b) * input_.c + c) * int64_t{sizeof(T)}], &v,
                        sizeof(T));
          } else if (v != 0 && !(sizeof(T) == 2 && v == 0x8000)) {  // (bf16 -0: a zero too)
            throw UsageError(fmt::format(
                "image {} of the batch has a pixel other than 0 in the border that preprocess "
                "{} pads with zeros ({}, {})",
                i, preprocess_, y, x));
          }
        }
  }
  return bytes;
}

LayerJob NetworkCompiler::ProgramOf(int batch, int sharers, const CoreShare* share,
                                    const LoweredGraph* graph) const {
  const Plan& plan = CheckedPlan(batch);
  if (plan.params_addr < static_cast<uint64_t>(batch * graph_.tensors[0].rows * row_))
    throw std::logic_error("the plan puts the parameters over the inputs");
  LayerJob job;
  engine::ExecJob& ex = job.exec;
  ex.name = "network";
  ex.host_image.assign(static_cast<size_t>(plan.output_addr), 0);
  std::copy(graph_.params.begin(), graph_.params.end(),
            ex.host_image.begin() + static_cast<std::ptrdiff_t>(plan.params_addr));
  ex.weight_image = weights_;
  const GraphTensor& out = graph_.tensors[static_cast<size_t>(graph_.output)];
  ex.host_out_addr = plan.output_addr;
  ex.host_out_bytes = static_cast<uint64_t>(batch * out.rows * row_);
  EmittedProgram e = EmitGraph(graph ? *graph : graph_, plan, config_, batch, sharers, share);
  ex.program = std::move(e.program);
  job.op_of = std::move(e.op_of);
  job.op_units = std::move(e.op_units);
  job.rows = batch;
  job.chunks = static_cast<int64_t>(plan.segments.size());
  job.summary = fmt::format("{}: one program for {} images ({})", name_, batch, PlanText());
  return job;
}

template <class T>
LayerJob NetworkCompiler::BuildOf(const std::vector<T>& act, int batch, int sharers,
                                  const CoreShare* share, const LoweredGraph* graph) const {
  LayerJob job = ProgramOf(batch, sharers, share, graph);
  const std::vector<uint8_t> in = EncodeInputs(act, batch);
  std::copy(in.begin(), in.end(), job.exec.host_image.begin());
  if (maps_.Any()) MoveMaps(PlanFor(batch), batch, &job);
  return job;
}

CompiledNetwork NetworkCompiler::Compile(int batch, int sharers) const {
  CompiledNetwork c;
  c.job = ProgramOf(batch, sharers, nullptr, nullptr);
  c.input_bytes = PlanFor(batch).params_addr;
  c.bounds = Bounds(batch);
  return c;
}

// The programs around a maps-on-chip job: the input rows into their unified-buffer area
// before it, the output rows out to host memory after it.
void NetworkCompiler::MoveMaps(const Plan& plan, int batch, LayerJob* job) const {
  const int64_t most = hw::kOpdMatmulFirst.Max();  // rows in one transfer
  auto program = [&](bool in) {
    engine::ExecJob ex;
    ex.name = in ? "maps in" : "maps out";
    const int t = in ? 0 : graph_.output;
    const int64_t rows = batch * graph_.tensors[static_cast<size_t>(t)].rows;
    const auto ub = static_cast<uint64_t>(plan.places[static_cast<size_t>(t)].ub);
    const uint64_t host = plan.places[static_cast<size_t>(t)].host_addr;
    isa::ProgramBuilder p;
    if (config_.dtype == hw::Dtype::kBf16) p.SetFormat(true);
    for (int64_t r0 = 0; r0 < rows; r0 += most) {
      const auto r = static_cast<uint64_t>(std::min(most, rows - r0));
      const uint64_t h = host + static_cast<uint64_t>(r0 * row_),
                     u = ub + static_cast<uint64_t>(r0);
      if (in) {
        p.ReadHost(h, u, r);
      } else {
        p.WriteHost(u, h, r);
      }
    }
    p.Halt();
    ex.program = p.Take();
    if (in) {
      ex.host_image = job->exec.host_image;
    } else {
      ex.host_out_addr = host;
      ex.host_out_bytes = static_cast<uint64_t>(rows * row_);
    }
    return ex;
  };
  if (maps_.input) job->before = {program(true)};
  if (maps_.output) {
    job->after = {program(false)};
    job->exec.host_out_bytes = 0;
  }
}

template <class T>
std::vector<T> NetworkCompiler::Decode(const std::vector<uint8_t>& bytes, int batch) const {
  const GraphTensor& out = graph_.tensors[static_cast<size_t>(graph_.output)];
  const int64_t t = out.T(n_), size = out.Pixels() * out.c;
  const bool by_tile = PlanFor(batch).output_by_tile;  // tile t of image i: row t x batch + i
  std::vector<T> y(static_cast<size_t>(batch * size));
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t p = 0; p < out.Pixels(); ++p)
      for (int64_t c = 0; c < out.c; ++c) {
        const int64_t row = by_tile ? c / n_ * batch + i : (i * out.Pixels() + p) * t + c / n_;
        std::memcpy(&y[static_cast<size_t>(i * size + p * out.c + c)],
                    &bytes[static_cast<size_t>(row * row_ + (c % n_) * int64_t{sizeof(T)})],
                    sizeof(T));
      }
  return y;
}

// The two formats' instances (arith/format.h).
template LayerJob NetworkCompiler::Build(const std::vector<int8_t>&, int, int) const;
template LayerJob NetworkCompiler::Build(const std::vector<uint16_t>&, int, int) const;
template std::vector<int8_t> NetworkCompiler::Decode(const std::vector<uint8_t>&, int) const;
template std::vector<uint16_t> NetworkCompiler::Decode(const std::vector<uint8_t>&, int) const;
template std::vector<uint8_t> NetworkCompiler::EncodeInputs(const std::vector<int8_t>&, int) const;
template std::vector<uint8_t> NetworkCompiler::EncodeInputs(const std::vector<uint16_t>&,
                                                            int) const;

}  // namespace tpu::compiler
