// Test top: tpu_pkg's bfloat16 and float32 functions (the arithmetic of a bf16 chip's
// processing elements, accumulators and vector unit, docs/bf16.md) on ports, combinationally, for
// tests/rtl/tpu_fp_test.cc to compare with arith/bf16.h on many operands.
module tpu_fp_unit
  import tpu_pkg::*;
(
  input  logic [31:0] a_i,
  input  logic [31:0] b_i,
  input  logic [15:0] x_i,
  input  logic [15:0] y_i,
  input  logic        relu_i,
  output logic [31:0] add_o,      // a + b
  output logic [31:0] max_o,      // max(a, b)
  output logic [31:0] min_o,      // min(a, b)
  output logic [31:0] quarter_o,  // a / 4
  output logic [15:0] round_o,    // a rounded to bfloat16
  output logic [15:0] act_o,      // the vector unit's value step: sum a, bound b
  output logic [31:0] mul_o,      // x * y
  output logic [31:0] mac_o       // a + x * y
);

  assign min_o     = Fp32Min(a_i, b_i);
  assign quarter_o = Fp32Quarter(a_i);
  assign round_o   = Bf16Round(a_i);
  assign act_o     = Bf16Activate(a_i, relu_i, b_i);

  assign add_o = Fp32Add(a_i, b_i);
  assign max_o = Fp32Max(a_i, b_i);
  assign mul_o = Bf16Mul(x_i, y_i);
  assign mac_o = Fp32Add(a_i, Bf16Mul(x_i, y_i));

endmodule
