// Matrix feeder: runs matmul, reading unified-buffer rows one per cycle and handing them,
// tagged with their accumulator row, to the matrix unit. The first row of a matmul with
// `switch` starts the next weight tile and waits (in a two-row buffer) until that tile
// is in the shadow registers; the buffer keeps one row per cycle flowing otherwise.
module tpu_mxu_feeder
  import tpu_pkg::*;
#(
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned AccDepth = 1024,
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  localparam int unsigned AccAddrWidth = $clog2(AccDepth)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    start_i,
  input  instr_t                  cmd_i,
  output logic                    busy_o,  // rows still to read or hand over
  // unified buffer read port
  output logic                    ub_rd_en_o,
  output logic [UbAddrWidth-1:0]  ub_rd_addr_o,
  input  operand_t [ArrayDim-1:0] ub_rd_data_i,
  // matrix unit activation port
  output logic                    a_valid_o,
  input  logic                    a_ready_i,
  output operand_t [ArrayDim-1:0] a_data_o,
  output logic                    a_switch_o,
  output logic [AccAddrWidth-1:0] a_acc_addr_o,
  output logic                    a_accumulate_o
);

  // {switch, accumulate, accumulator row}: what travels with a row read.
  localparam int unsigned MetaWidth = 2 + AccAddrWidth;
  localparam int unsigned BufDepth = 2;

  logic [31:0]          ub_row_q, acc_row_q, left_q;
  logic                 first_q, switch_q, accumulate_q;
  logic                 pending_q;
  logic [MetaWidth-1:0] pending_meta_q;

  logic                              buf_empty, buf_full, pop, rd;
  logic [$clog2(BufDepth+1)-1:0]     buf_count;
  logic [MetaWidth+ArrayDim*InputWidth-1:0] buf_head;

  assign pop = a_valid_o && a_ready_i;
  assign rd  = (left_q != '0) &&
               (32'(buf_count) - 32'(pop) + 32'(pending_q) < BufDepth);

  // Next state: a start loads the matmul; each read moves to the next row; what travels
  // with the row read this cycle waits a cycle for its data (pending).
  logic [31:0]          ub_row_d, acc_row_d, left_d;
  logic                 first_d, switch_d, accumulate_d, pending_d;
  logic [MetaWidth-1:0] pending_meta_d;

  always_comb begin
    ub_row_d     = ub_row_q;
    acc_row_d    = acc_row_q;
    left_d       = left_q;
    first_d      = first_q;
    switch_d     = switch_q;
    accumulate_d = accumulate_q;
    if (start_i) begin
      ub_row_d     = cmd_i.src;
      acc_row_d    = cmd_i.dst;
      left_d       = 32'(cmd_i.length);
      first_d      = 1'b1;
      switch_d     = cmd_i.flags[FlagSwitch];
      accumulate_d = cmd_i.flags[FlagAccumulate];
    end else if (rd) begin
      ub_row_d  = ub_row_q + 1'b1;
      acc_row_d = acc_row_q + 1'b1;
      left_d    = left_q - 1'b1;
      first_d   = 1'b0;
    end
    pending_d      = rd && !start_i;
    pending_meta_d = {first_q && switch_q, accumulate_q, AccAddrWidth'(acc_row_q)};
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ub_row_q       <= '0;
      acc_row_q      <= '0;
      left_q         <= '0;
      first_q        <= 1'b0;
      switch_q       <= 1'b0;
      accumulate_q   <= 1'b0;
      pending_q      <= 1'b0;
      pending_meta_q <= '0;
    end else begin
      ub_row_q       <= ub_row_d;
      acc_row_q      <= acc_row_d;
      left_q         <= left_d;
      first_q        <= first_d;
      switch_q       <= switch_d;
      accumulate_q   <= accumulate_d;
      pending_q      <= pending_d;
      pending_meta_q <= pending_meta_d;
    end
  end

  tpu_fifo #(
    .Width(MetaWidth + ArrayDim * InputWidth),
    .Depth(BufDepth)
  ) u_buf (
    .clk_i,
    .rst_ni,
    .push_i     (pending_q),
    .push_data_i({pending_meta_q, ub_rd_data_i}),
    .pop_i      (pop),
    .head_o     (buf_head),
    .full_o     (buf_full),
    .empty_o    (buf_empty),
    .count_o    (buf_count)
  );

  assign ub_rd_en_o     = rd && !start_i;
  assign ub_rd_addr_o   = UbAddrWidth'(ub_row_q);
  assign a_valid_o      = !buf_empty;
  assign a_data_o       = buf_head[ArrayDim*InputWidth-1:0];
  assign {a_switch_o, a_accumulate_o, a_acc_addr_o} = buf_head[ArrayDim*InputWidth+:MetaWidth];
  assign busy_o         = (left_q != '0) || pending_q || !buf_empty;

  logic unused;
  assign unused = buf_full;

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
