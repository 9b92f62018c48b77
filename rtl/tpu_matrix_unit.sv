// The matrix subsystem as one block: the matrix unit (tpu_mxu: skews, systolic array,
// double-buffered weights, row tags) feeding its accumulators (tpu_accumulators), and what
// every cycle of it was (mxu_cycle_e). Both tops use it: the chip (tpu_top, whose
// activation unit reads the accumulators) and the matrix subsystem on its own
// (tpu_mxu_top, tpusim gemm, whose harness reads them).
module tpu_matrix_unit
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim     = 4,     // 2 .. 512
  parameter int unsigned AccDepth     = 1024,  // accumulator rows, 2 .. 65536
  parameter bit          CompactArray = 1'b0,  // the compact array form (see tpu_mxu)
  localparam int unsigned AddrWidth = $clog2(AccDepth)
) (
  input  logic                    clk_i,
  // rst_ni also disables the assertions (tpu_assert.svh), a use Verilator counts as
  // synchronous (flagged here when the module is not inlined, as in a chip of several cores).
  /* verilator lint_off SYNCASYNCNET */
  input  logic                    rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // weight rows of a tile, row 0 first
  input  logic                    w_valid_i,
  output logic                    w_ready_o,
  input  operand_t [ArrayDim-1:0] w_data_i,
  // activation rows, each with the accumulator row its result goes to
  input  logic                    a_valid_i,
  output logic                    a_ready_o,
  input  operand_t [ArrayDim-1:0] a_data_i,
  input  logic                    a_switch_i,      // the first row of a tile
  input  logic [AddrWidth-1:0]    a_acc_addr_i,
  input  logic                    a_accumulate_i,  // add into the row instead of overwriting
  input  logic                    a_max_i,         // keep the larger of the two instead
  input  logic                    a_final_i,       // this write completes the row
  // accumulator read port (one cycle of latency)
  input  logic                    rd_en_i,
  input  logic [AddrWidth-1:0]    rd_addr_i,
  output logic                    rd_valid_o,
  output acc_t [ArrayDim-1:0]     rd_data_o,
  // the row at final_addr_o holds its final value
  output logic                    final_valid_o,
  output logic [AddrWidth-1:0]    final_addr_o,
  output logic                    error_o,  // sticky: an accumulator address out of range
  // activity, for counters
  output logic                    a_fire_o,       // a row entered the array
  output logic                    w_fire_o,       // a weight row entered the shadow registers
  output logic                    switch_fire_o,  // a tile was switched in
  output logic                    acc_write_o,    // a result row reached the accumulators
  output logic                    in_flight_o,    // rows are on their way to the accumulators
  // Whether reading the accumulators counts as draining: tpusim gemm's harness reads the
  // results as part of the matrix subsystem's work; in the chip, the activation unit does.
  input  logic                    drain_reads_i,
  output mxu_cycle_e              cycle_o
);

  localparam int unsigned TagWidth = AddrWidth + 3;  // {addr, accumulate, max, final}

  logic                out_valid;
  acc_t [ArrayDim-1:0] out_data;
  logic [TagWidth-1:0] out_tag;

  tpu_mxu #(
    .Format(Format),
    .ArrayDim    (ArrayDim),
    .TagWidth    (TagWidth),
    .CompactArray(CompactArray)
  ) u_mxu (
    .clk_i,
    .rst_ni,
    .w_valid_i,
    .w_ready_o,
    .w_data_i,
    .a_valid_i,
    .a_ready_o,
    .a_data_i,
    .a_switch_i,
    .a_tag_i      ({a_acc_addr_i, a_accumulate_i, a_max_i, a_final_i}),
    .out_valid_o  (out_valid),
    .out_data_o   (out_data),
    .out_tag_o    (out_tag),
    .a_fire_o,
    .w_fire_o,
    .busy_o       (in_flight_o),
    .switch_fire_o
  );

  tpu_accumulators #(
    .Format(Format),
    .ArrayDim(ArrayDim),
    .AccDepth(AccDepth)
  ) u_accumulators (
    .clk_i,
    .rst_ni,
    .wr_valid_i     (out_valid),
    .wr_addr_i      (out_tag[TagWidth-1:3]),
    .wr_accumulate_i(out_tag[2]),
    .wr_max_i       (out_tag[1]),
    .wr_final_i     (out_tag[0]),
    .wr_data_i      (out_data),
    .rd_en_i,
    .rd_addr_i,
    .rd_valid_o,
    .rd_data_o,
    .final_valid_o,
    .final_addr_o,
    .error_o
  );

  assign acc_write_o = out_valid;

  // Every cycle is exactly one of these, in this order of precedence.
  always_comb begin
    if (a_fire_o) cycle_o = MxuStream;
    else if (w_fire_o) cycle_o = MxuLoad;
    else if (a_valid_i) cycle_o = MxuStall;
    else if (in_flight_o || (drain_reads_i && rd_en_i)) cycle_o = MxuDrain;
    else cycle_o = MxuIdle;
  end

endmodule
