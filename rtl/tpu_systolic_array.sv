// ArrayDim x ArrayDim grid of tpu_mxu_pe: activations enter on the left of each row
// through one register (so every PE can see the switch bit a cycle before it arrives),
// partial sums leave at the bottom of each column, and each column has a weight bus
// that writes one row's shadow register per cycle. With Compact, the same array is
// tpu_systolic_array_compact (u_array.gen_compact.u_core): identical in every cycle, for
// sizes whose per-PE form would be too large to build; the per-PE rows (gen_row) are
// then empty.
module tpu_systolic_array
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4,  // 2 .. 512
  parameter bit          Compact = 1'b0,
  localparam int unsigned RowIdxWidth = $clog2(ArrayDim),
  localparam int unsigned PerPeRows = Compact ? 0 : ArrayDim,
  localparam int unsigned NetDim = Compact ? 1 : ArrayDim  // the interconnect's size
) (
  input  logic                                   clk_i,
  input  logic                                   rst_ni,
  // left edge: one activation and switch bit per row
  input  operand_t [ArrayDim-1:0]                act_i,
  input  logic     [ArrayDim-1:0]                switch_i,
  // bottom edge: one partial sum per column
  output acc_t     [ArrayDim-1:0]                psum_o,
  // weight bus per column: write row wr_row_i[c] of column c
  input  logic     [ArrayDim-1:0]                wr_valid_i,
  input  logic     [ArrayDim-1:0][RowIdxWidth-1:0] wr_row_i,
  input  operand_t [ArrayDim-1:0]                wr_data_i
);

  // Interconnect: act[r][c] enters PE (r, c) from the left; psum[r][c] enters from above.
  // split_var turns each element into a wire of its own, which Verilator then folds
  // into the PE registers instead of copying every cycle. (With Compact the nets shrink to
  // 1 x 1 and stay unconnected: the compact core keeps its own state.)
  /* verilator lint_off UNDRIVEN */
  /* verilator lint_off UNUSEDSIGNAL */
  operand_t act[NetDim][NetDim+1]  /*verilator split_var*/;
  logic     sw[NetDim][NetDim+1]   /*verilator split_var*/;
  acc_t     psum[NetDim+1][NetDim] /*verilator split_var*/;
  /* verilator lint_on UNUSEDSIGNAL */
  /* verilator lint_on UNDRIVEN */

  for (genvar r = 0; r < int'(PerPeRows); r++) begin : gen_row
    // Left-edge register: what enters PE (r, 0) next cycle is visible now.
    operand_t act_edge_q;
    logic     sw_edge_q;
    always_ff @(posedge clk_i) act_edge_q <= act_i[r];
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) sw_edge_q <= 1'b0;
      else sw_edge_q <= switch_i[r];
    end
    assign act[r][0] = act_edge_q;
    assign sw[r][0]  = sw_edge_q;
    // The right-most activations and switch bits leave the array unused.
    logic unused_right_edge;
    assign unused_right_edge = sw[r][ArrayDim] ^ (^act[r][ArrayDim]);
    for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_col
      logic wr_en, sw_next;
      assign wr_en = wr_valid_i[c] && (wr_row_i[c] == RowIdxWidth'(r));
      if (c == 0) begin : gen_edge_next
        assign sw_next = switch_i[r];
      end else begin : gen_inner_next
        assign sw_next = sw[r][c-1];
      end
      tpu_mxu_pe #(.Format(Format)) u_pe (
        .clk_i,
        .rst_ni,
        .act_i    (act[r][c]),
        .switch_i (sw[r][c]),
        .switch_next_i(sw_next),
        .act_o    (act[r][c+1]),
        .switch_o (sw[r][c+1]),
        .psum_i   (psum[r][c]),
        .psum_o   (psum[r+1][c]),
        .wr_en_i  (wr_en),
        .wr_data_i(wr_data_i[c])
      );
    end
  end

  if (Compact) begin : gen_compact
    tpu_systolic_array_compact #(
      .Format(Format),
      .ArrayDim(ArrayDim)
    ) u_core (
      .clk_i,
      .rst_ni,
      .act_i,
      .switch_i,
      .psum_o,
      .wr_valid_i,
      .wr_row_i,
      .wr_data_i
    );
  end else begin : gen_edges
    for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_col
      assign psum[0][c] = '0;
      assign psum_o[c]  = psum[ArrayDim][c];
    end
  end

endmodule
