// One processing element of the weight-stationary systolic array: an int8 x int8
// multiply-accumulate with an active and a shadow weight register.
//
// Activations travel left to right, partial sums top to bottom, one PE per cycle.
// The shadow register is written from the column's weight bus while the active one
// computes. A switch bit travels with the first activation of a new weight tile; in
// the cycle it reaches this PE the shadow weight is used and becomes the active one,
// so consecutive tiles follow each other without a bubble.
module tpu_mxu_pe
  import tpu_pkg::*;
(
  input  logic     clk_i,
  input  logic     rst_ni,
  // activation from the left neighbour (or the input skew)
  input  operand_t act_i,
  input  logic     switch_i,
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

  // The first activation of a new tile already multiplies with the new weight.
  operand_t weight;
  assign weight = switch_i ? weight_shadow_q : weight_active_q;

  acc_t product;
  assign product = acc_t'(act_i) * acc_t'(weight);

  // Control: the switch bit must be clean after reset.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      switch_q <= 1'b0;
    end else begin
      switch_q <= switch_i;
    end
  end

  // Datapath: no reset needed (a result is only used once a switch row has passed,
  // and the tags that mark valid results are reset). Leaving it out keeps the
  // simulated array fast.
  always_ff @(posedge clk_i) begin
    act_q  <= act_i;
    psum_q <= psum_i + product;  // wraps modulo 2^32, as two's complement does
    if (switch_i) weight_active_q <= weight_shadow_q;
    if (wr_en_i) weight_shadow_q <= wr_data_i;
  end

  assign act_o    = act_q;
  assign switch_o = switch_q;
  assign psum_o   = psum_q;

endmodule
