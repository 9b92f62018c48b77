// One processing element of the output-stationary systolic array (teaching,
// rtl/tpu_os_top.sv): it keeps one element C[i][j] of the result in its accumulator.
//
// A values travel left to right and B values top to bottom, one PE per cycle, each with
// a valid bit. When a valid pair meets here the PE adds their product to its
// accumulator. When the tile is done the accumulators drain downwards, one row per
// cycle (shift_i): each PE takes the value of the PE above (zero at the top row), so the
// bottom row leaves the array and, after ArrayDim shifts, every accumulator is zero again.
`include "tpu_assert.svh"

module tpu_os_pe
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0]
) (
  input  logic     clk_i,
  input  logic     rst_ni,
  // A from the left neighbour (or the input skew)
  input  operand_t a_i,
  input  logic     a_valid_i,
  output operand_t a_o,
  output logic     a_valid_o,
  // B from the PE above (or the input skew)
  input  operand_t b_i,
  input  logic     b_valid_i,
  output operand_t b_o,
  output logic     b_valid_o,
  // drain: take the accumulator of the PE above
  input  logic     shift_i,
  input  acc_t     c_i,
  output acc_t     c_o
);

  operand_t a_q, b_q;
  logic     a_valid_q, b_valid_q;
  acc_t     acc_q;

  acc_t product;
  assign product = acc_t'(a_i) * acc_t'(b_i);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      a_q       <= '0;
      b_q       <= '0;
      a_valid_q <= 1'b0;
      b_valid_q <= 1'b0;
      acc_q     <= '0;
    end else begin
      a_q       <= a_i;
      b_q       <= b_i;
      a_valid_q <= a_valid_i;
      b_valid_q <= b_valid_i;
      if (shift_i) acc_q <= c_i;
      else if (a_valid_i) acc_q <= acc_q + product;  // wraps modulo 2^32
    end
  end

  // The skews line A and B up: a valid A value always meets a valid B value; and
  // draining never overlaps a product.
  `TPU_ASSERT(OperandsInStep, a_valid_i == b_valid_i,
              $error("tpu_os_pe: A and B arrive out of step"))
  `TPU_ASSERT(NoProductWhileDraining, !(shift_i && a_valid_i),
              $error("tpu_os_pe: a product arrives while the accumulators drain"))

  assign a_o       = a_q;
  assign a_valid_o = a_valid_q;
  assign b_o       = b_q;
  assign b_valid_o = b_valid_q;
  assign c_o       = acc_q;

endmodule
