// ArrayDim x ArrayDim grid of tpu_mxu_pe: activations enter on the left of each row
// through one register (so every PE can see the switch bit a cycle before it arrives),
// partial sums leave at the bottom of each column, and each column has a weight bus
// that writes one row's shadow register per cycle.
module tpu_systolic_array
  import tpu_pkg::*;
#(
  parameter int unsigned ArrayDim = 4,  // 2 .. 256
  localparam int unsigned RowIdxWidth = $clog2(ArrayDim)
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
  // into the PE registers instead of copying every cycle.
  operand_t act[ArrayDim][ArrayDim+1]  /*verilator split_var*/;
  logic     sw[ArrayDim][ArrayDim+1]   /*verilator split_var*/;
  acc_t     psum[ArrayDim+1][ArrayDim] /*verilator split_var*/;

  for (genvar r = 0; r < int'(ArrayDim); r++) begin : gen_row
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
      tpu_mxu_pe u_pe (
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

  for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_edges
    assign psum[0][c] = '0;
    assign psum_o[c]  = psum[ArrayDim][c];
  end

endmodule
