// An int8 LSTM layer as a TPU program: `steps` steps of a batch of sequences, each step the
// gate matmuls on the array and the cell's elementwise work on the vector unit (the sigmoid
// and tanh tables, the residual product and sum, docs/quantization.md "LSTM cells"), bit-exact
// against nn::Int8LstmStep. Weights stream from weight memory every step, as TPU v1's LSTMs
// did; h and c stay in the unified buffer from step to step.
#pragma once

#include <cstdint>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/exec_job.h"
#include "host/nn/lstm.h"

namespace tpu::compiler {

struct LstmProgram {
  engine::ExecJob job;  // program, memory images, the output range (h, then c)
  int64_t batch = 0, steps = 0, hidden = 0, n = 0, ht = 0;
  // The final h and c (batch x H each, int8) read back from host memory.
  void Unpack(const std::vector<uint8_t>& out, std::vector<int8_t>* h,
              std::vector<int8_t>* c) const;
};

// x: steps x batch x X int8 inputs (scale 1/127); h0, c0: batch x H. Throws UsageError when
// the layer does not fit the chip (accumulator rows, unified buffer, parameter sets).
LstmProgram MakeLstmProgram(const nn::QuantizedLstm& q, const std::vector<int8_t>& x,
                            const std::vector<int8_t>& h0, const std::vector<int8_t>& c0,
                            int64_t batch, int64_t steps, const config::TpuConfig& chip);

// A seeded LSTM run with everything needed to check it: a random layer (PyTorch's
// initialisation), inputs uniform in [-1, 1], h0 = c0 = 0, run in fp32 first to set the cell
// scale (max |c| / 127), quantized, as a program, with the int8 reference's final h and c
// and the fp32 cell's h.
struct LstmCase {
  LstmProgram program;
  std::vector<int8_t> h, c;   // the int8 reference (nn::Int8LstmStep), batch x H
  std::vector<float> h_fp32;  // the fp32 cell, batch x H
  float cell_scale = 0;
  int64_t inputs = 0;
  // Multiply-accumulates of the gate matmuls: (X + H) x 4H per sequence and step.
  int64_t Macs() const;
  // The largest |h / 127 - h_fp32| of the int8 h.
  float WorstHError(const std::vector<int8_t>& h_int8) const;
};
LstmCase MakeLstmCase(int64_t inputs, int64_t hidden, int64_t batch, int64_t steps, uint64_t seed,
                      const config::TpuConfig& chip);

}  // namespace tpu::compiler
