// Performance counters of the matrix subsystem on its own (tpu_mxu_top). Every cycle after
// reset is exactly one of stream, load, stall, drain or idle (tpu_matrix_unit decides
// which), so the five add up to cycles.
module tpu_mxu_counters
  import tpu_pkg::*;
(
  input  logic     clk_i,
  input  logic     rst_ni,
  input  mxu_cycle_e cycle_i,  // what this cycle was (tpu_matrix_unit)
  input  logic     w_fire_i,
  input  logic     switch_fire_i,
  input  logic     acc_write_i,
  input  logic     acc_read_i,
  output counter_t cycles_o,
  output counter_t stream_cycles_o,
  output counter_t load_cycles_o,
  output counter_t stall_cycles_o,
  output counter_t drain_cycles_o,
  output counter_t idle_cycles_o,
  output counter_t weight_rows_o,
  output counter_t tiles_o,
  output counter_t acc_writes_o,
  output counter_t acc_reads_o
);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      cycles_o        <= '0;
      stream_cycles_o <= '0;
      load_cycles_o   <= '0;
      stall_cycles_o  <= '0;
      drain_cycles_o  <= '0;
      idle_cycles_o   <= '0;
      weight_rows_o   <= '0;
      tiles_o         <= '0;
      acc_writes_o    <= '0;
      acc_reads_o     <= '0;
    end else begin
      cycles_o <= cycles_o + 1'b1;
      unique case (cycle_i)
        MxuStream: stream_cycles_o <= stream_cycles_o + 1'b1;
        MxuLoad:   load_cycles_o   <= load_cycles_o + 1'b1;
        MxuStall:  stall_cycles_o  <= stall_cycles_o + 1'b1;
        MxuDrain:  drain_cycles_o  <= drain_cycles_o + 1'b1;
        default:   idle_cycles_o   <= idle_cycles_o + 1'b1;
      endcase
      if (w_fire_i) weight_rows_o <= weight_rows_o + 1'b1;
      if (switch_fire_i) tiles_o <= tiles_o + 1'b1;
      if (acc_write_i) acc_writes_o <= acc_writes_o + 1'b1;
      if (acc_read_i) acc_reads_o <= acc_reads_o + 1'b1;
    end
  end

endmodule
