// Performance counters of the matrix subsystem. Every cycle after reset falls into
// exactly one of: stream (a row entered the array), load (a weight row was written and
// no row entered), stall (a row waited for weights that had not arrived), drain (rows
// still in flight or being read out) or idle, so the five add up to cycles.
module tpu_mxu_counters
  import tpu_pkg::*;
(
  input  logic     clk_i,
  input  logic     rst_ni,
  input  logic     a_valid_i,
  input  logic     a_fire_i,
  input  logic     w_fire_i,
  input  logic     switch_fire_i,
  input  logic     busy_i,
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

  typedef enum logic [2:0] {
    CycleStream,
    CycleLoad,
    CycleStall,
    CycleDrain,
    CycleIdle
  } cycle_kind_e;

  cycle_kind_e kind;
  always_comb begin
    if (a_fire_i) kind = CycleStream;
    else if (w_fire_i) kind = CycleLoad;
    else if (a_valid_i) kind = CycleStall;
    else if (busy_i || acc_read_i) kind = CycleDrain;
    else kind = CycleIdle;
  end

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
      unique case (kind)
        CycleStream: stream_cycles_o <= stream_cycles_o + 1'b1;
        CycleLoad:   load_cycles_o   <= load_cycles_o + 1'b1;
        CycleStall:  stall_cycles_o  <= stall_cycles_o + 1'b1;
        CycleDrain:  drain_cycles_o  <= drain_cycles_o + 1'b1;
        CycleIdle:   idle_cycles_o   <= idle_cycles_o + 1'b1;
        default:     idle_cycles_o   <= idle_cycles_o + 1'b1;
      endcase
      if (w_fire_i) weight_rows_o <= weight_rows_o + 1'b1;
      if (switch_fire_i) tiles_o <= tiles_o + 1'b1;
      if (acc_write_i) acc_writes_o <= acc_writes_o + 1'b1;
      if (acc_read_i) acc_reads_o <= acc_reads_o + 1'b1;
    end
  end

endmodule
