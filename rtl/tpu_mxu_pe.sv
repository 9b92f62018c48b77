// One processing element of the weight-stationary systolic array: a multiply-accumulate
// (int8 x int8 into int32, or bfloat16 x bfloat16 into float32: tpu_pkg's Mac) with an
// active and a shadow weight register.
//
// Activations travel left to right, partial sums top to bottom, one PE per cycle.
// The shadow register is written from the column's weight bus while the active one
// computes. A switch bit travels with the first activation of a new weight tile. The
// PE sees it one cycle early (switch_next_i: the bit its left neighbour receives) and
// copies shadow to active on that edge, so the first row of the new tile multiplies
// with the new weight and consecutive tiles follow each other without a bubble.
module tpu_mxu_pe
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0]
) (
  input  logic     clk_i,
  input  logic     rst_ni,
  // activation from the left neighbour (or the input skew)
  input  operand_t act_i,
  input  logic     switch_i,
  input  logic     switch_next_i,  // switch_i of the next cycle
  output operand_t act_o,
  output logic     switch_o,
  // partial sum from the PE above (zero at the top row)
  input  acc_t     psum_i,
  output acc_t     psum_o,
  // shadow-weight write from the column bus
  input  logic     wr_en_i,
  input  operand_t wr_data_i
);

  operand_t act_q, weight_active_q, weight_shadow_q;
  logic     switch_q;
  acc_t     psum_q;

  // No reset in the PE. The array's left-edge registers are reset, so after reset only
  // zeros enter; whatever the PE registers held at power-up moves right and leaves the
  // array within ArrayDim cycles, before the first tile's switch row (which waits
  // ArrayDim cycles for its weights) arrives. Results are only taken for rows whose
  // tag says valid. Leaving the reset out keeps the simulated array fast.
  //
  // Every register is written every cycle through a mux rather than under an `if`:
  // the same hardware, but branch-free in the simulator.
  always_ff @(posedge clk_i) begin
    act_q           <= act_i;
    switch_q        <= switch_i;
    psum_q          <= Mac(Format, psum_i, 16'(act_i), 16'(weight_active_q));
    weight_active_q <= switch_next_i ? weight_shadow_q : weight_active_q;
    weight_shadow_q <= wr_en_i ? wr_data_i : weight_shadow_q;
  end

  logic unused_rst;
  assign unused_rst = rst_ni;

  assign act_o    = act_q;
  assign switch_o = switch_q;
  assign psum_o   = psum_q;

endmodule
