// An int8 LSTM layer as a TPU program: `steps` steps of a batch of sequences, each step the
// gate matmuls on the array and the cell's elementwise work on the vector unit (the sigmoid
// and tanh tables, the residual product and sum, docs/quantization.md "LSTM cells"), bit-exact
// against nn::Int8LstmStep. Weights stream from weight memory every step, as TPU v1's LSTMs
// did; h and c stay in the unified buffer from step to step.
#pragma once

#include <cstdint>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/executable.h"
#include "host/nn/lstm.h"

namespace tpu::compiler {

// Compiled once: an executable whose regions are the inputs x, h0 and c0 (written by each
// run), the parameter sets and the weights (loaded with it), and the outputs h and c; a
// run of a sequence writes the inputs, runs and reads h and c.
struct LstmProgram {
  engine::Executable exe;
  int64_t batch = 0, steps = 0, inputs = 0, hidden = 0, n = 0, ht = 0, xt = 0;

  // One sequence on an engine `exe` is loaded on: x (steps x batch x X int8 inputs, scale
  // 1/127), h0 and c0 (batch x H) written, the program run, and the final h and c (batch x
  // H each) read back (not in timing-only runs). Throws UsageError where the sizes differ.
  engine::ExecResult Run(engine::ChipEngine& e, const std::vector<int8_t>& x,
                         const std::vector<int8_t>& h0, const std::vector<int8_t>& c0,
                         std::vector<int8_t>* h, std::vector<int8_t>* c) const;

 private:
  // Where value v of sequence i lies in h's region (batch i's tile v / N at row i ht + v /
  // N) or, `cell`, in c's (tile v / N, batch i at row (v / N) B + i).
  size_t At(int64_t i, int64_t v, bool cell) const;
  std::vector<uint8_t> Pack(const std::vector<int8_t>& values, bool cell) const;
  std::vector<int8_t> Unpack(const std::vector<uint8_t>& region, bool cell) const;
};

// Throws UsageError when the layer does not fit the chip (accumulator rows, unified buffer,
// parameter sets).
LstmProgram MakeLstmProgram(const nn::QuantizedLstm& q, int64_t batch, int64_t steps,
                            const config::TpuConfig& chip);

// A seeded LSTM run with everything needed to check it: a random layer (PyTorch's
// initialisation), inputs uniform in [-1, 1], h0 = c0 = 0, run in fp32 first to set the cell
// scale (max |c| / 127), quantized, as a program, with the int8 reference's final h and c
// and the fp32 cell's h.
struct LstmCase {
  LstmProgram program;
  std::vector<int8_t> x;      // steps x batch x X, int8 (h0 = c0 = 0)
  std::vector<int8_t> h, c;   // the int8 reference (nn::Int8LstmStep), batch x H
  std::vector<float> h_fp32;  // the fp32 cell, batch x H
  nn::QuantizedLstm q;        // the layer the program runs
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
