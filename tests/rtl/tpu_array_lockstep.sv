// Test top: the per-PE and the compact form side by side, fed the same inputs, for
// tests/rtl/tpu_array_lockstep_test.cc to compare every output in every cycle. Two pairs:
// the bare arrays (any stimulus on their ports), and whole matrix units (skews, the array,
// de-skew, the tag line, the double-buffer control) with handshakes and resets.
module tpu_array_lockstep
  import tpu_pkg::*;
#(
  // The number format: dtype_e's number (a build sets a top's parameters as numbers).
  parameter int unsigned Dtype = DtypeInt8,
  localparam dtype_e Format = dtype_e'(Dtype),
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4,
  localparam int unsigned RowIdxWidth = $clog2(ArrayDim),
  localparam int unsigned TagWidth = 8
) (
  input  logic                                   clk_i,
  // rst_ni also disables the assertions (rtl/tpu_assert.svh), a use Verilator counts as
  // synchronous.
  /* verilator lint_off SYNCASYNCNET */
  input  logic                                   rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // the arrays
  input  operand_t [ArrayDim-1:0]                act_i,
  input  logic     [ArrayDim-1:0]                switch_i,
  input  logic     [ArrayDim-1:0]                wr_valid_i,
  input  logic     [ArrayDim-1:0][RowIdxWidth-1:0] wr_row_i,
  input  operand_t [ArrayDim-1:0]                wr_data_i,
  output acc_t     [ArrayDim-1:0]                psum_pe_o,
  output acc_t     [ArrayDim-1:0]                psum_compact_o,
  // the matrix units
  input  logic                                   w_valid_i,
  input  operand_t [ArrayDim-1:0]                w_data_i,
  input  logic                                   a_valid_i,
  input  operand_t [ArrayDim-1:0]                a_data_i,
  input  logic                                   a_switch_i,
  input  logic     [TagWidth-1:0]                a_tag_i,
  // {w_ready, a_ready, out_valid, a_fire, w_fire, busy, switch_fire}, out_data, out_tag
  output logic     [6:0]                         mxu_pe_flags_o,
  output logic     [6:0]                         mxu_compact_flags_o,
  output acc_t     [ArrayDim-1:0]                mxu_pe_data_o,
  output acc_t     [ArrayDim-1:0]                mxu_compact_data_o,
  output logic     [TagWidth-1:0]                mxu_pe_tag_o,
  output logic     [TagWidth-1:0]                mxu_compact_tag_o
);

  tpu_systolic_array #(.Format(Format), .ArrayDim(ArrayDim), .Compact(1'b0)) u_pe (
    .clk_i, .rst_ni, .act_i, .switch_i, .psum_o(psum_pe_o), .wr_valid_i, .wr_row_i, .wr_data_i);
  tpu_systolic_array #(.Format(Format), .ArrayDim(ArrayDim), .Compact(1'b1)) u_compact (
    .clk_i, .rst_ni, .act_i, .switch_i, .psum_o(psum_compact_o), .wr_valid_i, .wr_row_i,
    .wr_data_i);

  for (genvar k = 0; k < 2; k++) begin : gen_mxu
    logic                    w_ready, a_ready, out_valid, a_fire, w_fire, busy, switch_fire;
    acc_t [ArrayDim-1:0]     out_data;
    logic [TagWidth-1:0]     out_tag;
    tpu_mxu #(
      .Format(Format),
      .ArrayDim    (ArrayDim),
      .TagWidth    (TagWidth),
      .CompactArray(k == 1)
    ) u_mxu (
      .clk_i,
      .rst_ni,
      .w_valid_i,
      .w_ready_o    (w_ready),
      .w_data_i,
      .a_valid_i,
      .a_ready_o    (a_ready),
      .a_data_i,
      .a_switch_i,
      .a_tag_i,
      .out_valid_o  (out_valid),
      .out_data_o   (out_data),
      .out_tag_o    (out_tag),
      .a_fire_o     (a_fire),
      .w_fire_o     (w_fire),
      .busy_o       (busy),
      .switch_fire_o(switch_fire)
    );
  end

  assign mxu_pe_flags_o = {gen_mxu[0].w_ready, gen_mxu[0].a_ready, gen_mxu[0].out_valid,
                           gen_mxu[0].a_fire, gen_mxu[0].w_fire, gen_mxu[0].busy,
                           gen_mxu[0].switch_fire};
  assign mxu_compact_flags_o = {gen_mxu[1].w_ready, gen_mxu[1].a_ready, gen_mxu[1].out_valid,
                                gen_mxu[1].a_fire, gen_mxu[1].w_fire, gen_mxu[1].busy,
                                gen_mxu[1].switch_fire};
  assign mxu_pe_data_o = gen_mxu[0].out_data;
  assign mxu_compact_data_o = gen_mxu[1].out_data;
  assign mxu_pe_tag_o = gen_mxu[0].out_tag;
  assign mxu_compact_tag_o = gen_mxu[1].out_tag;

endmodule
