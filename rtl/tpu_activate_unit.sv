// Activation unit: runs activate. Reads accumulator rows one per cycle, passes them
// through the VPU (bias, requantize, ReLU, an optional sigmoid or tanh table, then optional
// 2 x 2 pooling or the residual add or product) with one of the VPU parameter sets, and writes the int8 rows to the unified buffer.
// With `residual` it reads the residual rows (set_residual's, `stride` apart like the rows
// it writes) through its own unified-buffer read port, each in time for its row's stage 3.
// Also holds the parameter sets themselves (ParamSets x ParamRows rows of ArrayDim bytes,
// written by the host DMA; layout in tpu_pkg).
module tpu_activate_unit
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam int unsigned ParamRows = ParamRowsOf(InputWidth),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned AccDepth = 1024,
  parameter int unsigned ParamSets = 8,
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  localparam int unsigned AccAddrWidth = $clog2(AccDepth),
  localparam int unsigned ParDepth = ParamSets * ParamRows,
  localparam int unsigned ParAddrWidth = $clog2(ParDepth)
) (
  input  logic                     clk_i,
  input  logic                     rst_ni,
  input  logic                     start_i,
  input  instr_t                   cmd_i,
  input  residual_t                residual_i,  // the controller's set_residual register
  output logic                     busy_o,
  // parameter rows (from the host DMA)
  input  logic                     par_wr_en_i,
  input  logic [ParAddrWidth-1:0]  par_wr_addr_i,
  input  operand_t [ArrayDim-1:0]  par_wr_data_i,
  // accumulator read port
  output logic                     acc_rd_en_o,
  output logic [AccAddrWidth-1:0]  acc_rd_addr_o,
  input  logic                     acc_rd_valid_i,
  input  acc_t [ArrayDim-1:0]      acc_rd_data_i,
  // unified buffer read port (residual rows)
  output logic                     ub_rd_en_o,
  output logic [UbAddrWidth-1:0]   ub_rd_addr_o,
  input  operand_t [ArrayDim-1:0]  ub_rd_data_i,
  // unified buffer write port
  output logic                     ub_wr_en_o,
  output logic [UbAddrWidth-1:0]   ub_wr_addr_o,
  output operand_t [ArrayDim-1:0]  ub_wr_data_o,
  // VPU activity for the counters
  output logic                     vpu_in_o,
  output logic                     vpu_out_o
);

  // ---------------------------------------------------------------- parameter sets
  operand_t [ArrayDim-1:0] par_q[ParDepth];

  always_ff @(posedge clk_i) begin
    if (par_wr_en_i) par_q[par_wr_addr_i] <= par_wr_data_i;
  end

  // The selected set, copied into registers when an activate starts so that the VPU's
  // configuration stays fixed while its rows flow.
  acc_t [ArrayDim-1:0]       bias_q;
  logic [ArrayDim-1:0][31:0] mult_q;
  logic [ArrayDim-1:0][5:0]  shift_q;
  logic                      relu_q;
  vpu_fn_e                   fn_q;
  vpu_pool_e                 pool_q;
  logic                      residual_q;  // this activate adds the residual
  residual_t                 res_q;       // the residual, latched when it starts

  // The set's rows side by side: block b (bias, multiplier, shift) starts at byte b x N
  // (docs/isa.md, "VPU parameter sets"), whatever the width of a row.
  localparam int unsigned RowBits = ArrayDim * InputWidth;
  logic [ParamRows*RowBits-1:0] set_bits;
  logic [31:0]                  set_base;
  assign set_base = 32'(cmd_i.aux[OpdActivateParamsLsb+:OpdActivateParamsBits]) * ParamRows;

  always_comb begin
    for (int r = 0; r < int'(ParamRows); r++)
      set_bits[r*RowBits+:RowBits] = par_q[ParAddrWidth'(set_base + 32'(r))];
  end

  always_ff @(posedge clk_i) begin
    if (start_i) begin
      bias_q <= set_bits[ParamBiasByte*8*ArrayDim+:32*ArrayDim];
      mult_q <= set_bits[ParamMultiplierByte*8*ArrayDim+:32*ArrayDim];
      for (int l = 0; l < int'(ArrayDim); l++) begin
        shift_q[l] <= set_bits[(ParamShiftByte*ArrayDim+l)*8+:6];
      end
    end
  end

  logic                    vpu_out_valid;
  operand_t [ArrayDim-1:0] vpu_out_data;

  logic [31:0] acc_row_q, rd_left_q, ub_row_q, out_left_q, ub_step_q, res_row_q;
  // A row read from the accumulators two cycles ago is in the VPU's stage 1 now: read its
  // residual row, which arrives with it in stage 2.
  logic        stage1_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      acc_row_q  <= '0;
      rd_left_q  <= '0;
      ub_row_q   <= '0;
      ub_step_q  <= 32'd1;
      out_left_q <= '0;
      relu_q     <= 1'b0;
      fn_q       <= VpuFnNone;
      pool_q     <= VpuPoolNone;
      residual_q <= 1'b0;
      res_q      <= '0;
      res_row_q  <= '0;
      stage1_q   <= 1'b0;
    end else if (start_i) begin
      acc_row_q  <= cmd_i.src;
      rd_left_q  <= 32'(cmd_i.length);
      ub_row_q   <= cmd_i.dst;
      // `stride=`: rows between the rows written (0 meaning 1).
      ub_step_q  <= (cmd_i.aux[OpdActivateStrideLsb+:OpdActivateStrideBits] == '0) ? 32'd1
                  : 32'(cmd_i.aux[OpdActivateStrideLsb+:OpdActivateStrideBits]);
      out_left_q <= (cmd_i.flags[FlagPoolAvg] != cmd_i.flags[FlagPoolMax])
                    ? 32'(cmd_i.length) >> 2 : 32'(cmd_i.length);
      relu_q     <= cmd_i.flags[FlagRelu];
      fn_q       <= cmd_i.flags[FlagSigmoid] ? VpuFnSigmoid
                  : cmd_i.flags[FlagTanh] ? VpuFnTanh : VpuFnNone;
      pool_q     <= vpu_pool_e'({cmd_i.flags[FlagPoolMax], cmd_i.flags[FlagPoolAvg]});
      residual_q <= cmd_i.flags[FlagResidual];
      res_q      <= residual_i;
      res_row_q  <= residual_i.ub;
      stage1_q   <= 1'b0;
    end else begin
      stage1_q <= acc_rd_valid_i;
      if (ub_rd_en_o) res_row_q <= res_row_q + ub_step_q;
      if (rd_left_q != '0) begin
        acc_row_q <= acc_row_q + 1'b1;
        rd_left_q <= rd_left_q - 1'b1;
      end
      if (vpu_out_valid) begin
        ub_row_q   <= ub_row_q + ub_step_q;
        out_left_q <= out_left_q - 1'b1;
      end
    end
  end

  tpu_vpu #(
    .Format(Format),
    .ArrayDim(ArrayDim)
  ) u_vpu (
    .clk_i,
    .rst_ni,
    .bias_i      (bias_q),
    .multiplier_i(mult_q),
    .shift_i     (shift_q),
    .relu_i      (relu_q),
    .fn_i        (fn_q),
    .pool_i      (pool_q),
    .residual_i  (residual_q),
    .res_i       (res_q),
    .res_data_i  (ub_rd_data_i),
    .in_valid_i  (acc_rd_valid_i),
    .in_data_i   (acc_rd_data_i),
    .out_valid_o (vpu_out_valid),
    .out_data_o  (vpu_out_data)
  );

  assign acc_rd_en_o   = (rd_left_q != '0) && !start_i;
  assign acc_rd_addr_o = AccAddrWidth'(acc_row_q);
  assign ub_rd_en_o    = stage1_q && residual_q;
  assign ub_rd_addr_o  = UbAddrWidth'(res_row_q);
  assign ub_wr_en_o    = vpu_out_valid;
  assign ub_wr_addr_o  = UbAddrWidth'(ub_row_q);
  assign ub_wr_data_o  = vpu_out_data;
  assign busy_o        = (out_left_q != '0);
  assign vpu_in_o      = acc_rd_valid_i;
  assign vpu_out_o     = vpu_out_valid;

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
