// The ArrayDim x ArrayDim weight-stationary array of tpu_systolic_array, written as one
// module whose PE state lives in 2-D arrays updated in loops: the same ports, the same
// registers and the same behaviour in every cycle (tests/rtl/tpu_array_lockstep_test.cc
// drives both with the same random stimulus and compares every output in every cycle),
// but Verilator's output no longer grows with the number of PEs. The per-PE array
// (tpu_systolic_array, tpu_mxu_pe) stays the readable reference, the one the teaching
// views probe; this one is what makes a 256 x 256 chip build in minutes
// (docs/architecture.md, "The array at TPU v1's size").
//
// Form. Two observations make the array cheap to simulate. First, the activation and the
// switch bit a PE holds are what entered its row c cycles earlier (the PEs of a row pass
// them on unchanged), so each row keeps a history of the last N values of its left-edge
// registers in a ring indexed by time instead of N registers that all shift every cycle;
// PE (r, c) reads the entry c cycles back. Second, only the partial sums and the weights
// are per-PE state. They live in arrays that only this module reads, updated in place by
// one process with blocking assignments, in an order that reads every old value before it
// is overwritten: rows from the bottom up (a row reads the partial sums of the row above),
// each PE's product before its weight switches, the column buses' shadow writes last. The
// bottom row's sums, which other processes read at the same edge, are kept twice: the
// loop writes the half that psum_o does not show, and out_phase_q flips (non-blocking) to
// show it after the edge, as registers would. The loop body names no temporaries: the
// generated C++ keeps those as members of the model, a store and a load each per PE.
//
// Why not "q <= d" of whole arrays, as a person would write: the Verilator we use (5.006)
// has no non-blocking assignments to array elements inside loops, and turns "q <= d" of a
// whole array into one delayed assignment per element: for 256 x 256, some 300,000
// statements and 200 MB of C++, where this form gives a loop.
module tpu_systolic_array_compact
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4,  // 2 .. 512
  localparam int unsigned RowIdxWidth = $clog2(ArrayDim)
) (
  input  logic                                     clk_i,
  input  logic                                     rst_ni,
  input  operand_t [ArrayDim-1:0]                  act_i,
  input  logic     [ArrayDim-1:0]                  switch_i,
  output acc_t     [ArrayDim-1:0]                  psum_o,
  input  logic     [ArrayDim-1:0]                  wr_valid_i,
  input  logic     [ArrayDim-1:0][RowIdxWidth-1:0] wr_row_i,
  input  operand_t [ArrayDim-1:0]                  wr_data_i
);

  localparam int unsigned N = ArrayDim;

  // Left-edge registers (tpu_systolic_array's act_edge_q / sw_edge_q), one per row.
  operand_t [N-1:0] act_edge_q;
  logic     [N-1:0] sw_edge_q;

  // Each row's left-edge registers as they were in the last Hist cycles (Hist >= N, a power
  // of two): entry t mod Hist holds the value during cycle t. now_q counts cycles.
  localparam int unsigned HistWidth = (N > 1) ? $clog2(N) : 1;
  localparam int unsigned Hist = 1 << HistWidth;
  operand_t             act_hist[N][Hist];
  logic                 sw_hist[N][Hist];
  logic [HistWidth-1:0] now_q;

  // PE (r, c) state, [r][c] (the bottom row's sums live in psum_out).
  acc_t     psum[N][N];
  operand_t w_active[N][N];
  operand_t w_shadow[N][N];
  acc_t     psum_out[2][N];
  logic     out_phase_q;

  // Settled: the array's inputs have not changed for Quiet edges (the activations entering
  // the rows the same, no switch bit, no weight write), so every register of the loop below
  // is at the fixed point of its inputs: each row's history holds one value (Hist edges),
  // the partial sums have passed down all N rows, both halves of psum_out are written, and
  // no weight moves. An edge that finds it settled and brings no switch bit and no weight
  // write would write every register with the value it holds, so the loop is skipped: the
  // same behaviour in every cycle, and an idle 128 x 128 array costs a compare, not 16,384
  // multiply-adds (docs/architecture.md, "The array at TPU v1's size"). As a clock gate
  // would; the lockstep test holds the inputs still for long stretches to check it.
  localparam int unsigned Quiet = 2 * Hist + N + 4;
  localparam int unsigned QuietWidth = $clog2(Quiet + 1);
  logic [QuietWidth-1:0] quiet_q;
  wire still = act_i == act_edge_q && switch_i == '0 && wr_valid_i == '0;
  wire settled = quiet_q == QuietWidth'(Quiet) && switch_i == '0 && wr_valid_i == '0;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) quiet_q <= '0;
    else if (!still) quiet_q <= '0;
    else if (quiet_q != QuietWidth'(Quiet)) quiet_q <= quiet_q + 1'b1;
  end

  // Blocking assignments to arrays no other process reads (see above).
  /* verilator lint_off BLKSEQ */
  always_ff @(posedge clk_i) begin
    if (!settled) begin
      for (int r = 0; r < int'(N); r++) begin
        act_hist[r][now_q] = act_edge_q[r];
        sw_hist[r][now_q]  = sw_edge_q[r];
      end
      for (int r = int'(N) - 1; r >= 0; r--) begin
        for (int c = 0; c < int'(N); c++) begin
          // PE (r, c) multiplies what entered its row c cycles ago; the product joins the
          // partial sum from the row above (as it was before this edge: that row is updated
          // after this one).
          if (r == int'(N) - 1) begin
            psum_out[!out_phase_q][c] = Mac(Format, r == 0 ? '0 : psum[r-1][c],
                16'(act_hist[r][now_q - HistWidth'(c)]), 16'(w_active[r][c]));
          end else begin
            psum[r][c] = Mac(Format, r == 0 ? '0 : psum[r-1][c],
                16'(act_hist[r][now_q - HistWidth'(c)]), 16'(w_active[r][c]));
          end
          // The switch bit the PE receives next cycle is the one its left neighbour holds now
          // (c - 1 cycles back at the edge; the row's input itself for column 0).
          if (c == 0 ? switch_i[r] : sw_hist[r][now_q - HistWidth'(c - 1)]) begin
            w_active[r][c] = w_shadow[r][c];
          end
        end
      end
      // The column buses write the shadow weights after every PE has read its own.
      for (int c = 0; c < int'(N); c++) begin
        if (wr_valid_i[c]) w_shadow[wr_row_i[c]][c] = wr_data_i[c];
      end
    end
    now_q = now_q + 1'b1;
  end
  /* verilator lint_on BLKSEQ */

  // As in tpu_mxu_pe, the PE state has no reset (docs/mxu.md says why that is safe); the
  // left-edge switch bits do.
  always_ff @(posedge clk_i) begin
    act_edge_q  <= act_i;
    out_phase_q <= !out_phase_q;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) sw_edge_q <= '0;
    else sw_edge_q <= switch_i;
  end

  for (genvar c = 0; c < int'(N); c++) begin : gen_out
    assign psum_o[c] = psum_out[out_phase_q][c];
  end

endmodule
