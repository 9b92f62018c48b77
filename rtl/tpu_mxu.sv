// Matrix multiply unit: the systolic array with input skew, output de-skew and
// double-buffered weight loading.
//
// Weight rows arrive on the w_* stream, row 0 of a tile first, one row per cycle, and
// are written into the shadow registers. Activation rows arrive on the a_* stream;
// the first row of a tile carries a_switch_i and may only enter once the whole next
// tile sits in the shadow registers. Every row carries a tag (accumulator address,
// accumulate/overwrite, final fold) that leaves with its result 2*ArrayDim cycles later
// on out_*.
//
// Timing (docs/mxu.md derives it): a row entering at cycle f reaches PE (r, c) in cycle
// f+1+r+c, and the PE copies shadow to active on the edge just before. The write of
// weight row r entering at cycle w lands in PE (r, c) on the edge ending cycle w+c
// (the weight bus has the same column skew). So the next tile's row r may be written
// from cycle f+r on: its write lands no earlier than the copy that retires the old
// shadow value. Hence the next tile's weights start loading in the very cycle the
// switch row enters, and tiles stream back to back with one row per cycle.
`include "tpu_assert.svh"

module tpu_mxu
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim     = 4,   // 2 .. 512
  parameter int unsigned TagWidth     = 1,   // bits of the tag that travels with a row
  // The compact array form (tpu_systolic_array_compact, ring-buffer skews and tag line):
  // the same cycles, code that does not grow with ArrayDim^2 (for large arrays).
  parameter bit          CompactArray = 1'b0,
  localparam int unsigned RowIdxWidth = $clog2(ArrayDim)
) (
  input  logic                          clk_i,
  input  logic                          rst_ni,
  // weight rows (row 0 of a tile first)
  input  logic                          w_valid_i,
  output logic                          w_ready_o,
  input  operand_t [ArrayDim-1:0]       w_data_i,
  // activation rows
  input  logic                          a_valid_i,
  output logic                          a_ready_o,
  input  operand_t [ArrayDim-1:0]       a_data_i,
  input  logic                          a_switch_i,
  input  logic     [TagWidth-1:0]       a_tag_i,
  // result rows, de-skewed
  output logic                          out_valid_o,
  output acc_t     [ArrayDim-1:0]       out_data_o,
  output logic     [TagWidth-1:0]       out_tag_o,
  // status for the performance counters
  output logic                          a_fire_o,
  output logic                          w_fire_o,
  output logic                          busy_o,
  output logic                          switch_fire_o
);

  if (ArrayDim < 2 || ArrayDim > 512) begin : gen_bad_dim
    $error("tpu_mxu: ArrayDim must be in 2..512");
  end

  localparam int unsigned Latency = 2 * ArrayDim;  // row in -> de-skewed row out

  // ---------------------------------------------------------------- shadow control
  logic                   shadow_full_q;
  logic [RowIdxWidth-1:0] wr_row_q;
  logic                   a_fire, w_fire, switch_fire, wr_last;

  assign a_ready_o   = !a_switch_i || shadow_full_q;
  assign a_fire      = a_valid_i && a_ready_o;
  assign switch_fire = a_fire && a_switch_i;
  // The shadow frees the moment the switch row enters (see the header comment).
  assign w_ready_o   = !shadow_full_q || switch_fire;
  assign w_fire      = w_valid_i && w_ready_o;
  assign wr_last     = (wr_row_q == RowIdxWidth'(ArrayDim - 1));

  logic                   shadow_full_d;
  logic [RowIdxWidth-1:0] wr_row_d;
  always_comb begin
    shadow_full_d = shadow_full_q;
    wr_row_d      = wr_row_q;
    if (switch_fire) shadow_full_d = 1'b0;
    if (w_fire) begin
      wr_row_d = wr_last ? '0 : wr_row_q + 1'b1;
      if (wr_last) shadow_full_d = 1'b1;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      shadow_full_q <= 1'b0;
      wr_row_q      <= '0;
    end else begin
      shadow_full_q <= shadow_full_d;
      wr_row_q      <= wr_row_d;
    end
  end

  // A full shadow tile is only written again from the cycle its switch row enters.
  `TPU_ASSERT(ShadowTileKept, w_fire |-> !shadow_full_q || switch_fire,
              $error("tpu_mxu: a weight row overwrote a shadow tile that was not switched in"))

  // ---------------------------------------------------------------- input skew
  localparam int unsigned ActLaneWidth = InputWidth + 1;  // {switch, activation}
  logic [ArrayDim-1:0][ActLaneWidth-1:0] act_lanes_d, act_lanes_q;
  operand_t [ArrayDim-1:0]               array_act;
  logic     [ArrayDim-1:0]               array_switch;

  for (genvar r = 0; r < int'(ArrayDim); r++) begin : gen_act_lane
    // Idle cycles feed zeros, so the array only toggles for real rows.
    assign act_lanes_d[r]  = a_fire ? {a_switch_i, a_data_i[r]} : '0;
    assign array_switch[r] = act_lanes_q[r][InputWidth];
    assign array_act[r]    = operand_t'(act_lanes_q[r][InputWidth-1:0]);
  end

  tpu_skew #(
    .Lanes  (ArrayDim),
    .Width  (ActLaneWidth),
    .Reverse(1'b0),
    .Compact(CompactArray)
  ) u_act_skew (
    .clk_i,
    .rst_ni,
    .d_i(act_lanes_d),
    .q_o(act_lanes_q)
  );

  // ---------------------------------------------------------------- weight skew
  localparam int unsigned WgtLaneWidth = 1 + RowIdxWidth + InputWidth;  // {valid, row, w}
  logic [ArrayDim-1:0][WgtLaneWidth-1:0]  wgt_lanes_d, wgt_lanes_q;
  logic     [ArrayDim-1:0]                col_wr_valid;
  logic     [ArrayDim-1:0][RowIdxWidth-1:0] col_wr_row;
  operand_t [ArrayDim-1:0]                col_wr_data;

  for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_wgt_lane
    assign wgt_lanes_d[c]  = w_fire ? {1'b1, wr_row_q, w_data_i[c]} : '0;
    assign col_wr_valid[c] = wgt_lanes_q[c][WgtLaneWidth-1];
    assign col_wr_row[c]   = wgt_lanes_q[c][InputWidth+:RowIdxWidth];
    assign col_wr_data[c]  = operand_t'(wgt_lanes_q[c][InputWidth-1:0]);
  end

  tpu_skew #(
    .Lanes  (ArrayDim),
    .Width  (WgtLaneWidth),
    .Reverse(1'b0),
    .Compact(CompactArray)
  ) u_wgt_skew (
    .clk_i,
    .rst_ni,
    .d_i(wgt_lanes_d),
    .q_o(wgt_lanes_q)
  );

  // ---------------------------------------------------------------- array
  acc_t [ArrayDim-1:0] array_psum;

  tpu_systolic_array #(
    .Format(Format),
    .ArrayDim(ArrayDim),
    .Compact (CompactArray)
  ) u_array (
    .clk_i,
    .rst_ni,
    .act_i     (array_act),
    .switch_i  (array_switch),
    .psum_o    (array_psum),
    .wr_valid_i(col_wr_valid),
    .wr_row_i  (col_wr_row),
    .wr_data_i (col_wr_data)
  );

  // ---------------------------------------------------------------- output de-skew
  tpu_skew #(
    .Lanes  (ArrayDim),
    .Width  (AccWidth),
    .Reverse(1'b1),
    .Reset  (1'b0),  // data only: validity travels in the tag delay line
    .Compact(CompactArray)
  ) u_out_deskew (
    .clk_i,
    .rst_ni,
    .d_i(array_psum),
    .q_o(out_data_o)
  );

  // ---------------------------------------------------------------- row tags
  tpu_delay #(
    .Width(TagWidth + 1),
    .Depth(Latency),
    .Ring (CompactArray)
  ) u_tag_delay (
    .clk_i,
    .rst_ni,
    .d_i({a_fire, a_tag_i}),
    .q_o({out_valid_o, out_tag_o})
  );

  // Rows in flight, so that the counters can tell draining from idling.
  localparam int unsigned InFlightWidth = $clog2(Latency + 2);
  logic [InFlightWidth-1:0] in_flight_q;

  logic [InFlightWidth-1:0] in_flight_d;
  assign in_flight_d = in_flight_q + InFlightWidth'(a_fire) - InFlightWidth'(out_valid_o);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) in_flight_q <= '0;
    else in_flight_q <= in_flight_d;
  end

  assign a_fire_o      = a_fire;
  assign w_fire_o      = w_fire;
  assign switch_fire_o = switch_fire;
  assign busy_o        = (in_flight_q != '0);

endmodule
