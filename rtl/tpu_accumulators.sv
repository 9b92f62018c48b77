// Accumulator memory after the matrix unit: AccDepth rows of ArrayDim int32 values (float32
// in a bf16 chip: tpu_pkg's AccAdd and AccMax).
//
// A result row is written to, added into, or compared with (max: each value keeps the
// larger) the row at its address (K larger than the array is done as several K-folds
// accumulated at the same address; max pooling as taps compared at the same address). When the final
// fold of a row has been written, final_valid_o/final_addr_o say so one cycle later,
// so a reader can take rows as they complete. The read port has one cycle of latency.
// An address beyond AccDepth is never written; it sets the sticky error_o instead.
module tpu_accumulators
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  parameter int unsigned ArrayDim = 4,     // 2 .. 256
  parameter int unsigned AccDepth = 1024,  // rows, 2 .. 65536
  localparam int unsigned AddrWidth = $clog2(AccDepth)
) (
  input  logic                     clk_i,
  input  logic                     rst_ni,
  // write / accumulate port (from the matrix unit)
  input  logic                     wr_valid_i,
  input  logic [AddrWidth-1:0]     wr_addr_i,
  input  logic                     wr_accumulate_i,
  input  logic                     wr_max_i,
  input  logic                     wr_final_i,
  input  acc_t [ArrayDim-1:0]      wr_data_i,
  // read port
  input  logic                     rd_en_i,
  input  logic [AddrWidth-1:0]     rd_addr_i,
  output logic                     rd_valid_o,
  output acc_t [ArrayDim-1:0]      rd_data_o,
  // completion of final folds
  output logic                     final_valid_o,
  output logic [AddrWidth-1:0]     final_addr_o,
  // sticky: an address was out of range
  output logic                     error_o
);

  if (AccDepth < 2 || AccDepth > 65536) begin : gen_bad_depth
    $error("tpu_accumulators: AccDepth must be in 2..65536");
  end

  acc_t [ArrayDim-1:0] mem_q[AccDepth];

  logic wr_in_range, rd_in_range;
  assign wr_in_range = (32'(wr_addr_i) < AccDepth);
  assign rd_in_range = (32'(rd_addr_i) < AccDepth);

  acc_t [ArrayDim-1:0] old_row, new_row;
  always_comb begin
    old_row = wr_in_range ? mem_q[wr_addr_i] : '0;
    for (int c = 0; c < int'(ArrayDim); c++) begin
      if (wr_accumulate_i) new_row[c] = AccAdd(Format, old_row[c], wr_data_i[c]);
      else if (wr_max_i) new_row[c] = AccMax(Format, old_row[c], wr_data_i[c]);
      else new_row[c] = wr_data_i[c];
    end
  end

  always_ff @(posedge clk_i) begin
    if (wr_valid_i && wr_in_range) mem_q[wr_addr_i] <= new_row;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_valid_o    <= 1'b0;
      rd_data_o     <= '0;
      final_valid_o <= 1'b0;
      final_addr_o  <= '0;
      error_o       <= 1'b0;
    end else begin
      rd_valid_o    <= rd_en_i && rd_in_range;
      if (rd_en_i && rd_in_range) rd_data_o <= mem_q[rd_addr_i];
      final_valid_o <= wr_valid_i && wr_final_i && wr_in_range;
      final_addr_o  <= wr_addr_i;
      if ((wr_valid_i && !wr_in_range) || (rd_en_i && !rd_in_range)) error_o <= 1'b1;
    end
  end

endmodule
