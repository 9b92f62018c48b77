// An output-stationary matrix multiply unit, for teaching beside the weight-stationary
// one (tpusim teach --dataflow os|both; it is not part of the chip).
//
// One tile of C (up to ArrayDim x ArrayDim) at a time: each input beat carries column k
// of the A tile (a_i[r] = A[r][k]) and row k of the B tile (b_i[c] = B[k][c]); in_last_i
// marks k = K-1. The skews delay row r of A and column c of B by r and c cycles, so
// A[r][k] and B[k][c] meet in PE (r, c) at cycle k + r + c. After the last beat the unit
// waits for the wavefront to reach the far corner (flush), then drains the accumulators
// out of the bottom row, one row per cycle, row ArrayDim-1 first (out_row_o). It takes
// no input while it flushes and drains, so a tile of depth K takes
// K + 2 (ArrayDim - 1) + ArrayDim cycles.
module tpu_os_top
  import tpu_pkg::*;
#(
  // The number format: dtype_e's number (a build sets a top's parameters as numbers).
  parameter int unsigned Dtype = DtypeInt8,
  localparam dtype_e Format = dtype_e'(Dtype),
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4
) (
  input  logic                        clk_i,
  // rst_ni also disables the assertions (tpu_assert.svh), a use Verilator counts as synchronous.
  /* verilator lint_off SYNCASYNCNET */
  input  logic                        rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // input beats
  input  logic                        in_valid_i,
  output logic                        in_ready_o,
  input  logic                        in_last_i,
  input  operand_t [ArrayDim-1:0]     a_i,
  input  operand_t [ArrayDim-1:0]     b_i,
  // results, one row of the tile per cycle while draining
  output logic                        out_valid_o,
  output logic [RowWidth-1:0]         out_row_o,
  output acc_t     [ArrayDim-1:0]     out_data_o,
  // what the unit did, cycle by cycle (see OsPhase below)
  output counter_t                    cnt_cycles_o,
  output counter_t                    cnt_beat_cycles_o,
  output counter_t                    cnt_flush_cycles_o,
  output counter_t                    cnt_drain_cycles_o,
  output logic [31:0]                 param_array_dim_o
);

  localparam int unsigned RowWidth = (ArrayDim > 1) ? $clog2(ArrayDim) : 1;
  localparam int unsigned CntWidth = $clog2(2 * ArrayDim);

  if (ArrayDim < 2) begin : gen_bad_dim
    $error("tpu_os_top: ArrayDim must be >= 2");
  end

  // ---------------------------------------------------------------- control
  typedef enum logic [1:0] {
    OsCompute = 2'd0,  // taking beats
    OsFlush   = 2'd1,  // the last beat's wavefront crosses the array
    OsDrain   = 2'd2   // accumulators leave through the bottom row
  } os_phase_e;

  os_phase_e             phase_q;
  logic [CntWidth-1:0]   count_q;
  logic                  fire;

  assign in_ready_o = (phase_q == OsCompute);
  assign fire       = in_valid_i && in_ready_o;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      phase_q <= OsCompute;
      count_q <= '0;
    end else begin
      unique case (phase_q)
        OsCompute:
        if (fire && in_last_i) begin
          phase_q <= OsFlush;
          count_q <= CntWidth'(2 * (ArrayDim - 1));
        end
        OsFlush:
        if (count_q == CntWidth'(1)) begin
          phase_q <= OsDrain;
          count_q <= CntWidth'(ArrayDim);
        end else begin
          count_q <= count_q - 1'b1;
        end
        OsDrain: begin
          if (count_q == CntWidth'(1)) phase_q <= OsCompute;
          count_q <= count_q - 1'b1;
        end
        default: phase_q <= OsCompute;
      endcase
    end
  end

  // ---------------------------------------------------------------- input skews
  localparam int unsigned LaneWidth = InputWidth + 1;  // {valid, value}
  logic [ArrayDim-1:0][LaneWidth-1:0] a_lanes_d, a_lanes_q, b_lanes_d, b_lanes_q;
  operand_t [ArrayDim-1:0] array_a, array_b;
  logic     [ArrayDim-1:0] array_a_valid, array_b_valid;

  for (genvar i = 0; i < int'(ArrayDim); i++) begin : gen_lane
    // Idle cycles feed zeros marked invalid.
    assign a_lanes_d[i]     = fire ? {1'b1, a_i[i]} : '0;
    assign b_lanes_d[i]     = fire ? {1'b1, b_i[i]} : '0;
    assign array_a[i]       = operand_t'(a_lanes_q[i][InputWidth-1:0]);
    assign array_a_valid[i] = a_lanes_q[i][InputWidth];
    assign array_b[i]       = operand_t'(b_lanes_q[i][InputWidth-1:0]);
    assign array_b_valid[i] = b_lanes_q[i][InputWidth];
  end

  tpu_skew #(
    .Lanes(ArrayDim),
    .Width(LaneWidth)
  ) u_a_skew (
    .clk_i,
    .rst_ni,
    .d_i(a_lanes_d),
    .q_o(a_lanes_q)
  );

  tpu_skew #(
    .Lanes(ArrayDim),
    .Width(LaneWidth)
  ) u_b_skew (
    .clk_i,
    .rst_ni,
    .d_i(b_lanes_d),
    .q_o(b_lanes_q)
  );

  // ---------------------------------------------------------------- array
  tpu_os_array #(
    .Format(Format),
    .ArrayDim(ArrayDim)
  ) u_array (
    .clk_i,
    .rst_ni,
    .a_i      (array_a),
    .a_valid_i(array_a_valid),
    .b_i      (array_b),
    .b_valid_i(array_b_valid),
    .shift_i  (phase_q == OsDrain),
    .c_o      (out_data_o)
  );

  assign out_valid_o = (phase_q == OsDrain);
  assign out_row_o   = RowWidth'(count_q - 1'b1);

  // ---------------------------------------------------------------- counters
  counter_t cycles_q, beats_q, flush_q, drain_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cycles_q <= '0;
      beats_q  <= '0;
      flush_q  <= '0;
      drain_q  <= '0;
    end else begin
      cycles_q <= cycles_q + 1'b1;
      beats_q  <= beats_q + counter_t'(fire);
      flush_q  <= flush_q + counter_t'(phase_q == OsFlush);
      drain_q  <= drain_q + counter_t'(phase_q == OsDrain);
    end
  end
  assign cnt_cycles_o       = cycles_q;
  assign cnt_beat_cycles_o  = beats_q;
  assign cnt_flush_cycles_o = flush_q;
  assign cnt_drain_cycles_o = drain_q;
  assign param_array_dim_o  = ArrayDim;

endmodule
