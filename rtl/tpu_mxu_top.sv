// The matrix subsystem as a chip-level block: the matrix unit with its accumulators
// (tpu_matrix_unit, the same block the chip uses) and its performance counters, with plain
// (unskewed) rows in and out. The `gemm` command runs this top, compiled both as a C++
// model and as a SystemC module.
module tpu_mxu_top
  import tpu_pkg::*;
#(
  // The number format: dtype_e's number (a build sets a top's parameters as numbers).
  parameter int unsigned Dtype = DtypeInt8,
  localparam dtype_e Format = dtype_e'(Dtype),
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,     // 2 .. 512
  parameter int unsigned AccDepth = 1024,  // accumulator rows, 2 .. 65536
  parameter bit          CompactArray = 1'b0,  // the compact array form (see tpu_mxu)
  localparam int unsigned AddrWidth = $clog2(AccDepth)
) (
  input  logic                   clk_i,
  // rst_ni also disables the assertions (tpu_assert.svh), a use Verilator counts as synchronous.
  /* verilator lint_off SYNCASYNCNET */
  input  logic                   rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // weight rows of a tile, row 0 first
  input  logic                   w_valid_i,
  output logic                   w_ready_o,
  input  operand_t [ArrayDim-1:0] w_data_i,
  // activation rows; the first row of every tile sets a_switch_i
  input  logic                   a_valid_i,
  output logic                   a_ready_o,
  input  operand_t [ArrayDim-1:0] a_data_i,
  input  logic                   a_switch_i,
  input  logic [AddrWidth-1:0]   a_acc_addr_i,
  input  logic                   a_accumulate_i,
  input  logic                   a_final_i,
  // accumulator read port (one cycle latency)
  input  logic                   rd_en_i,
  input  logic [AddrWidth-1:0]   rd_addr_i,
  output logic                   rd_valid_o,
  output acc_t [ArrayDim-1:0]    rd_data_o,
  // the row at final_addr_o holds its final value
  output logic                   final_valid_o,
  output logic [AddrWidth-1:0]   final_addr_o,
  // status
  output logic                   error_o,
  output logic [31:0]            param_array_dim_o,
  output logic [31:0]            param_acc_depth_o,
  output logic [31:0]            param_input_width_o,  // operand bits: 8 int8, 16 bf16
  // performance counters
  output counter_t               cnt_cycles_o,
  output counter_t               cnt_stream_cycles_o,
  output counter_t               cnt_load_cycles_o,
  output counter_t               cnt_stall_cycles_o,
  output counter_t               cnt_drain_cycles_o,
  output counter_t               cnt_idle_cycles_o,
  output counter_t               cnt_weight_rows_o,
  output counter_t               cnt_tiles_o,
  output counter_t               cnt_acc_writes_o,
  output counter_t               cnt_acc_reads_o
);

  logic       a_fire, w_fire, switch_fire, acc_write, in_flight;
  mxu_cycle_e cycle;

  tpu_matrix_unit #(
    .Format(Format),
    .ArrayDim    (ArrayDim),
    .AccDepth    (AccDepth),
    .CompactArray(CompactArray)
  ) u_matrix (
    .clk_i,
    .rst_ni,
    .w_valid_i,
    .w_ready_o,
    .w_data_i,
    .a_valid_i,
    .a_ready_o,
    .a_data_i,
    .a_switch_i,
    .a_acc_addr_i,
    .a_accumulate_i,
    .a_max_i      (1'b0),  // max pooling is the chip's (tpu_top)
    .a_final_i,
    .rd_en_i,
    .rd_addr_i,
    .rd_valid_o,
    .rd_data_o,
    .final_valid_o,
    .final_addr_o,
    .error_o,
    .a_fire_o     (a_fire),
    .w_fire_o     (w_fire),
    .switch_fire_o(switch_fire),
    .acc_write_o  (acc_write),
    .in_flight_o  (in_flight),
    .drain_reads_i(1'b1),  // the harness reads the results as the subsystem's work
    .cycle_o      (cycle)
  );

  tpu_mxu_counters u_counters (
    .clk_i,
    .rst_ni,
    .cycle_i        (cycle),
    .w_fire_i       (w_fire),
    .switch_fire_i  (switch_fire),
    .acc_write_i    (acc_write),
    .acc_read_i     (rd_en_i),
    .cycles_o       (cnt_cycles_o),
    .stream_cycles_o(cnt_stream_cycles_o),
    .load_cycles_o  (cnt_load_cycles_o),
    .stall_cycles_o (cnt_stall_cycles_o),
    .drain_cycles_o (cnt_drain_cycles_o),
    .idle_cycles_o  (cnt_idle_cycles_o),
    .weight_rows_o  (cnt_weight_rows_o),
    .tiles_o        (cnt_tiles_o),
    .acc_writes_o   (cnt_acc_writes_o),
    .acc_reads_o    (cnt_acc_reads_o)
  );

  logic unused;
  assign unused = a_fire ^ in_flight;

  assign param_array_dim_o = 32'(ArrayDim);
  assign param_acc_depth_o = 32'(AccDepth);
  assign param_input_width_o = 32'(InputWidth);

endmodule
