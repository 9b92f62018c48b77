// Layer-by-layer execution of a model on the TPU (see tpu_runner.h).
#include "host/compiler/tpu_runner.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "host/common/errors.h"
#include "host/compiler/layer_compiler.h"
#include "host/compiler/network_compiler.h"
#include "host/nn/int8_net.h"
#include "host/nn/int8_ops.h"

namespace tpu::compiler {

hw::ChipCounters TpuRunResult::Total() const {
  hw::ChipCounters t;
  for (const LayerStats& l : layers) t += l.counters;
  return t;
}

int64_t TpuRunResult::TotalMacs() const {
  int64_t s = 0;
  for (const LayerStats& l : layers) s += l.macs;
  return s;
}

TpuRunResult RunModelOnTpu(const nn::Model& model, engine::ChipEngine& engine,
                           const uint8_t* pixels, const uint8_t* labels, int64_t images, int batch,
                           const std::function<void(double)>& progress, bool layer_jobs) {
  const config::TpuConfig& config = engine.Config();
  const bool values = engine.ComputesValues();
  if (batch < 1) throw UsageError("--batch must be at least 1");
  const auto start = std::chrono::steady_clock::now();
  const std::vector<LayerStep> steps = PlanSteps(model, config);
  // The whole network as one program per batch where it fits, else layer jobs.
  const NetworkCompiler network(
      model, config, static_cast<int>(std::min<int64_t>(batch, std::max<int64_t>(images, 1))));
  std::vector<LayerCompiler> compilers;
  TpuRunResult r;
  r.images = images;
  r.checked = values;
  const bool whole = !layer_jobs && network.Fits();
  r.plan = whole        ? "whole network, one program per batch: " + network.Name()
           : layer_jobs ? "layer jobs (--host-im2col)"
                        : "layer jobs (" + network.WhyNot() + ")";
  if (whole) {
    LayerStats st;
    st.name = "network";
    r.layers.push_back(st);
  } else {
    for (const LayerStep& s : steps) {
      compilers.emplace_back(model, s, config);
      LayerStats st;
      st.name = s.Name(model);
      r.layers.push_back(st);
    }
  }
  const int64_t in_size = model.input.Size();
  // The CPU int8 reference, batched (bit-exact with the scalar ReferenceInt8, tested).
  const nn::Int8Net reference(model);
  for (int64_t first = 0; first < images; first += batch) {
    const int b = static_cast<int>(std::min<int64_t>(batch, images - first));
    std::vector<int8_t> act(static_cast<size_t>(b * in_size));
    for (size_t i = 0; i < act.size(); ++i) {
      act[i] = nn::QuantizePixel(pixels[static_cast<size_t>(first * in_size) + i]);
    }
    if (whole) {
      const LayerJob job = network.Build(act, b);
      const engine::ExecResult e = engine.Run(job.exec);
      if (!e.ok) throw RuntimeError("the network failed on the chip: " + e.message);
      LayerStats& st = r.layers.front();
      st.macs += network.MacsPerImage() * b;
      ++st.jobs;
      st.counters += e.counters;
      act = values
                ? network.Decode(e.host_out, b)
                : std::vector<int8_t>(static_cast<size_t>(b * model.layers.back().out.Size()), 0);
    }
    std::vector<int8_t> next;  // a layer's output, put together from its channel groups
    for (size_t s = 0; s < compilers.size(); ++s) {
      const LayerCompiler& lc = compilers[s];
      const engine::ExecResult e = engine.Run(lc.Build(act, b).exec);
      if (!e.ok) {
        throw RuntimeError("layer '" + r.layers[s].name + "' failed on the chip: " + e.message);
      }
      LayerStats& st = r.layers[s];
      st.macs += compilers[s].MacsPerImage() * b;
      ++st.jobs;
      st.counters += e.counters;
      std::vector<int8_t> out =
          values ? lc.Decode(e.host_out, b)
                 : std::vector<int8_t>(static_cast<size_t>(b * lc.OutShape().Size()), 0);
      if (steps[s].channels == 0) {
        act = std::move(out);
        continue;
      }
      const nn::Shape3 whole = lc.LayerOutShape();
      const int64_t group = lc.OutShape().c, pixels_out = b * int64_t{whole.h} * whole.w;
      if (lc.ChannelFirst() == 0) next.assign(static_cast<size_t>(b * whole.Size()), 0);
      for (int64_t p = 0; p < pixels_out; ++p) {
        std::copy_n(&out[static_cast<size_t>(p * group)], group,
                    &next[static_cast<size_t>(p * whole.c + lc.ChannelFirst())]);
      }
      if (lc.ChannelFirst() + group == whole.c) act = std::move(next);
    }
    if (!values) {
      if (progress) progress(static_cast<double>(first + b) / static_cast<double>(images));
      continue;
    }
    const int64_t out_size = static_cast<int64_t>(act.size()) / b;
    const nn::MatrixI8 want = reference.Forward(pixels + first * in_size, b).back();
    for (int i = 0; i < b; ++i) {
      std::vector<int8_t> logits(act.begin() + i * out_size, act.begin() + (i + 1) * out_size);
      if (want.cols() != out_size ||
          !std::equal(logits.begin(), logits.end(), want.row(i).data())) {
        ++r.mismatches;
      }
      if (labels) {
        const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
        r.correct += best == labels[first + i];
      }
      r.logits.push_back(std::move(logits));
    }
    if (progress) progress(static_cast<double>(first + b) / static_cast<double>(images));
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tpu::compiler
