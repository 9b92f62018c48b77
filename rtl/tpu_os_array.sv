// The output-stationary systolic array (teaching): ArrayDim x ArrayDim tpu_os_pe, PE
// (r, c) accumulating C[r][c] of the tile. Row r's A values enter at the left edge and
// move right; column c's B values enter at the top edge and move down. The drain shifts
// the accumulators down and out of the bottom row, c_o.
module tpu_os_array
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4
) (
  input  logic                      clk_i,
  input  logic                      rst_ni,
  input  operand_t [ArrayDim-1:0]   a_i,        // one per row, already skewed
  input  logic     [ArrayDim-1:0]   a_valid_i,
  input  operand_t [ArrayDim-1:0]   b_i,        // one per column, already skewed
  input  logic     [ArrayDim-1:0]   b_valid_i,
  input  logic                      shift_i,
  output acc_t     [ArrayDim-1:0]   c_o         // the bottom row's accumulators
);

  // Links between PEs: a_h[r][c] enters PE (r, c) from the left, b_v[r][c] from above,
  // c_v[r][c] is the accumulator PE (r, c) takes when draining.
  operand_t a_h[ArrayDim][ArrayDim+1];
  logic     av_h[ArrayDim][ArrayDim+1];
  operand_t b_v[ArrayDim+1][ArrayDim];
  logic     bv_v[ArrayDim+1][ArrayDim];
  acc_t     c_v[ArrayDim+1][ArrayDim];

  for (genvar r = 0; r < int'(ArrayDim); r++) begin : gen_row
    assign a_h[r][0]  = a_i[r];
    assign av_h[r][0] = a_valid_i[r];
    for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_col
      tpu_os_pe #(.Format(Format)) u_pe (
        .clk_i,
        .rst_ni,
        .a_i      (a_h[r][c]),
        .a_valid_i(av_h[r][c]),
        .a_o      (a_h[r][c+1]),
        .a_valid_o(av_h[r][c+1]),
        .b_i      (b_v[r][c]),
        .b_valid_i(bv_v[r][c]),
        .b_o      (b_v[r+1][c]),
        .b_valid_o(bv_v[r+1][c]),
        .shift_i,
        .c_i      (c_v[r][c]),
        .c_o      (c_v[r+1][c])
      );
    end
  end

  for (genvar c = 0; c < int'(ArrayDim); c++) begin : gen_edge
    assign b_v[0][c]  = b_i[c];
    assign bv_v[0][c] = b_valid_i[c];
    assign c_v[0][c]  = '0;
    assign c_o[c]     = c_v[ArrayDim][c];
  end

  // The right and bottom edges' outgoing A and B go nowhere.
  logic unused_edges;
  always_comb begin
    unused_edges = 1'b0;
    for (int i = 0; i < int'(ArrayDim); i++) begin
      unused_edges = unused_edges ^ ^a_h[i][ArrayDim] ^ av_h[i][ArrayDim] ^ ^b_v[ArrayDim][i] ^
                     bv_v[ArrayDim][i];
    end
  end

endmodule
