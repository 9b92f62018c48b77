// A model's TPU jobs for one batch (see compile_jobs.h).
#include "host/compiler/compile_jobs.h"

#include <algorithm>
#include <map>

#include "host/compiler/network_compiler.h"
#include "host/nn/int8_reference.h"

namespace tpu::compiler {
namespace {

// What a 2 x 2 max pooling pass (its gather list) makes of `act`, the batch's maps.
std::vector<int8_t> PoolPass(const LayerStep& s, const LayerCompiler& lc,
                             const std::vector<int8_t>& act, int batch) {
  const int64_t c = lc.InShape().c, in_px = lc.InShape().Size() / c;
  const int64_t out_px = static_cast<int64_t>(s.gather->size() / 4);
  std::vector<int8_t> o(static_cast<size_t>(batch * out_px * c), 0);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < out_px; ++j)
      for (int64_t ch = 0; ch < c; ++ch) {
        int8_t m = -128;
        for (int q = 0; q < 4; ++q) {
          const int64_t px = (*s.gather)[static_cast<size_t>(4 * j + q)];
          m = std::max(m, act[static_cast<size_t>((i * in_px + px) * c + ch)]);
        }
        o[static_cast<size_t>((i * out_px + j) * c + ch)] = m;
      }
  return o;
}

std::vector<NamedJob> LayerJobs(const nn::Model& model, const config::TpuConfig& config,
                                const std::vector<int8_t>& x, int batch) {
  const int64_t size = model.input.Size();
  // Each layer's input for the batch: the CPU int8 reference's activations.
  std::vector<std::vector<std::vector<int8_t>>> outs;  // image -> layer -> activations
  for (int i = 0; i < batch; ++i) outs.push_back(nn::ReferenceInt8(model, x.data() + i * size));
  std::map<int, std::vector<int8_t>> pass_out;  // max pooling passes' outputs, by pass
  std::vector<NamedJob> jobs;
  for (const LayerStep& s : PlanSteps(model, config)) {
    const LayerCompiler lc(model, s, config);
    std::vector<int8_t> act;
    if (s.pass > 1) act = pass_out[s.pass - 1];
    for (int i = 0; i < batch && s.pass <= 1; ++i) {
      if (s.layer == 0) {
        act.insert(act.end(), x.begin() + i * size, x.begin() + (i + 1) * size);
      } else {
        const auto& in = outs[static_cast<size_t>(i)][static_cast<size_t>(s.layer - 1)];
        act.insert(act.end(), in.begin(), in.end());
      }
    }
    if (s.gather && !pass_out.count(s.pass)) pass_out[s.pass] = PoolPass(s, lc, act, batch);
    jobs.push_back({s.Name(model), lc.Build(act, batch)});
  }
  return jobs;
}

}  // namespace

CompiledJobs CompileJobs(const nn::Model& model, const config::TpuConfig& config,
                         const std::vector<int8_t>& x, int batch, bool host_im2col) {
  CompiledJobs out;
  const NetworkCompiler network(model, config, batch);
  if (!host_im2col && network.Fits()) {
    out.jobs.push_back({"network", network.Build(x, batch)});
    return out;
  }
  if (!host_im2col) out.layer_jobs_why = network.WhyNot();
  out.jobs = LayerJobs(model, config, x, batch);
  return out;
}

}  // namespace tpu::compiler
