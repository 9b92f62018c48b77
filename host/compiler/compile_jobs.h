// The TPU jobs of a model for a batch of inputs, as `tpusim run` runs them: the whole
// network as one program where it fits, else (or with `host_im2col`) one job per conv or
// dense layer whose input rows the host forms (im2col). For `tpusim compile` (files) and
// tpusim.compile in Python (bytes and disassembly).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/compiler/layer_compiler.h"
#include "host/config/tpu_config.h"
#include "host/nn/model.h"

namespace tpu::compiler {

struct NamedJob {
  std::string name;  // "network", or the layer step's name
  LayerJob job;
};

struct CompiledJobs {
  std::vector<NamedJob> jobs;
  std::string layer_jobs_why;  // why the network did not fit one program ("": it did, or
                               // host_im2col asked for layer jobs)
};

// The jobs for the int8 rows `x` (batch x the model's input size, Int8Inputs) of a
// quantized model. Each layer job's input is the CPU int8 reference's activations, which
// the chip reproduces bit for bit.
CompiledJobs CompileJobs(const nn::Model& model, const config::TpuConfig& config,
                         const std::vector<int8_t>& x, int batch, bool host_im2col);

}  // namespace tpu::compiler
