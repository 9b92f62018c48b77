// Matrix feeder: runs matmul, reading unified-buffer rows one per cycle and handing them,
// tagged with their accumulator row, to the matrix unit. Rows are read `stride` rows
// apart; with `window` each row is formed instead by the window-gather stage: lane l of
// the row for output pixel (oy, ox) is element ktile x N + l of that pixel's receptive
// field in (ky, kx, c) order, read from the feature map through the unified buffer's
// gather port, zero in the padding (-128 with the window's pad_min) and past the field's
// end (docs/isa.md). The first row of a matmul with
// `switch` starts the next weight tile and waits (in a two-row buffer) until that tile
// is in the shadow registers; the buffer keeps one row per cycle flowing otherwise.
module tpu_mxu_feeder
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned AccDepth = 1024,
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  localparam int unsigned AccAddrWidth = $clog2(AccDepth),
  localparam int unsigned LaneWidth = $clog2(ArrayDim)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    start_i,
  input  instr_t                  cmd_i,
  input  window_t                 window_i,  // the geometry of set_window
  output logic                    busy_o,  // rows still to read or hand over
  // unified buffer read port
  output logic                    ub_rd_en_o,
  output logic [UbAddrWidth-1:0]  ub_rd_addr_o,
  input  operand_t [ArrayDim-1:0] ub_rd_data_i,
  // unified buffer gather port: one byte per lane (row, lane), zero where g_zero_o
  output logic                    g_en_o,
  output logic [ArrayDim-1:0][UbAddrWidth-1:0] g_row_o,
  output logic [ArrayDim-1:0][LaneWidth-1:0]   g_lane_o,
  output logic [ArrayDim-1:0]     g_zero_o,
  input  operand_t [ArrayDim-1:0] g_data_i,
  // matrix unit activation port
  output logic                    a_valid_o,
  input  logic                    a_ready_i,
  output operand_t [ArrayDim-1:0] a_data_o,
  output logic                    a_switch_o,
  output logic                    a_last_o,  // the last row of its matmul
  output logic [AccAddrWidth-1:0] a_acc_addr_o,
  output logic                    a_accumulate_o,
  output logic                    a_max_o  // keep the larger value instead (matmul max)
);

  // {last, switch, accumulate, max, accumulator row}: what travels with a row read.
  localparam int unsigned MetaWidth = 4 + AccAddrWidth;
  localparam int unsigned BufDepth = 2;

  logic [31:0]          ub_row_q, acc_row_q, left_q, step_q;
  logic                 first_q, switch_q, accumulate_q, max_q;
  logic                 pending_q, win_mode_q, pending_win_q;

  // ---------------------------------------------------------------- window-gather stage
  // Latched when a matmul window starts: the geometry, the map's first row, and per lane
  // the kernel position (ky, kx) and channel c of its element of the receptive field.
  window_t     win_q;
  logic [31:0] base_q;
  logic [ArrayDim-1:0]       lane_on_q;
  logic [ArrayDim-1:0][31:0] lane_ky_q, lane_kx_q, lane_c_q;
  // The output pixel of the next row: (oy, ox) in raster order, or pooling window
  // (wy, wx) and its pixel q (oy = 2 wy + q / 2, ox = 2 wx + q % 2) in pooled order.
  logic [31:0] oy_q, ox_q, wy_q, wx_q;
  logic [1:0]  q_q;
  // The lanes of the row gathered last cycle that fell outside the map (pad_min: -128).
  logic [ArrayDim-1:0] pad_q;

  logic [ArrayDim-1:0]       lane_on_d;
  logic [ArrayDim-1:0][31:0] lane_ky_d, lane_kx_d, lane_c_d;
  logic [31:0] first_px, pool_w, fields;
  always_comb begin
    fields = 32'(window_i.kh) * 32'(window_i.kw) * 32'(window_i.channels);
    for (int l = 0; l < int'(ArrayDim); l++) begin
      logic [31:0] e;
      e            = 32'(cmd_i.aux[OpdMatmulKtileLsb+:OpdMatmulKtileBits]) * ArrayDim + 32'(l);
      lane_on_d[l] = e < fields;
      lane_c_d[l]  = (window_i.channels == '0) ? '0 : e % 32'(window_i.channels);
      lane_kx_d[l] = (window_i.channels == '0 || window_i.kw == '0) ? '0
                   : (e / 32'(window_i.channels)) % 32'(window_i.kw);
      lane_ky_d[l] = (window_i.channels == '0 || window_i.kw == '0) ? '0
                   : e / (32'(window_i.channels) * 32'(window_i.kw));
    end
    first_px = 32'(cmd_i.aux[OpdMatmulFirstLsb+:OpdMatmulFirstBits]);
    pool_w   = 32'(window_i.out_w) >> 1;
  end

  // Where each lane's byte lies for the pixel of this cycle.
  logic [31:0] oy, ox;
  logic signed [31:0] y0, x0;
  assign oy = win_q.pooled ? (wy_q << 1) + 32'(q_q[1]) : oy_q;
  assign ox = win_q.pooled ? (wx_q << 1) + 32'(q_q[0]) : ox_q;
  assign y0 = $signed(oy * 32'(win_q.stride_y)) - $signed(32'(win_q.pad_top));
  assign x0 = $signed(ox * 32'(win_q.stride_x)) - $signed(32'(win_q.pad_left));

  logic [ArrayDim-1:0] outside;
  always_comb begin
    for (int l = 0; l < int'(ArrayDim); l++) begin
      logic signed [31:0] yv, xv, y, x;
      logic [31:0] byte_addr;
      // (yv, xv) in the map as read: with `dilated`, a zero between neighbouring pixels, so
      // pixel (y, x) lies at (2y, 2x) and an odd coordinate is a zero.
      yv          = y0 + $signed(lane_ky_q[l]);
      xv          = x0 + $signed(lane_kx_q[l]);
      y           = win_q.dilated ? yv >>> 1 : yv;
      x           = win_q.dilated ? xv >>> 1 : xv;
      outside[l]  = lane_on_q[l] && ((win_q.dilated && (yv[0] || xv[0])) || y < 0 ||
                                     y >= $signed(32'(win_q.in_h)) || x < 0 ||
                                     x >= $signed(32'(win_q.in_w)));
      g_zero_o[l] = !lane_on_q[l] || outside[l];
      byte_addr   = g_zero_o[l] ? '0
                  : (32'(y) * 32'(win_q.in_w) + 32'(x)) * 32'(win_q.pixel_bytes) + lane_c_q[l];
      g_row_o[l]  = UbAddrWidth'(base_q + byte_addr / ArrayDim);
      g_lane_o[l] = LaneWidth'(byte_addr % ArrayDim);
    end
  end
  logic [MetaWidth-1:0] pending_meta_q;

  logic                              buf_empty, buf_full, pop, rd;
  logic [$clog2(BufDepth+1)-1:0]     buf_count;
  logic [MetaWidth+ArrayDim*InputWidth-1:0] buf_head;

  assign pop = a_valid_o && a_ready_i;
  assign rd  = (left_q != '0) &&
               (32'(buf_count) - 32'(pop) + 32'(pending_q) < BufDepth);

  // Next state: a start loads the matmul; each read moves to the next row; what travels
  // with the row read this cycle waits a cycle for its data (pending).
  logic [31:0]          ub_row_d, acc_row_d, left_d, step_d;
  logic                 first_d, switch_d, accumulate_d, max_d, pending_d, win_mode_d;
  logic [MetaWidth-1:0] pending_meta_d;

  always_comb begin
    ub_row_d     = ub_row_q;
    acc_row_d    = acc_row_q;
    left_d       = left_q;
    first_d      = first_q;
    switch_d     = switch_q;
    accumulate_d = accumulate_q;
    max_d        = max_q;
    step_d       = step_q;
    win_mode_d   = win_mode_q;
    if (start_i) begin
      ub_row_d     = cmd_i.src;
      acc_row_d    = cmd_i.dst;
      left_d       = 32'(cmd_i.length);
      first_d      = 1'b1;
      switch_d     = cmd_i.flags[FlagSwitch];
      accumulate_d = cmd_i.flags[FlagAccumulate];
      max_d        = cmd_i.flags[FlagMax];
      win_mode_d   = cmd_i.flags[FlagWindow];
      step_d       = (cmd_i.flags[FlagWindow] ||
                      cmd_i.aux[OpdMatmulStrideLsb+:OpdMatmulStrideBits] == '0)
                   ? 32'd1 : 32'(cmd_i.aux[OpdMatmulStrideLsb+:OpdMatmulStrideBits]);
    end else if (rd) begin
      ub_row_d  = ub_row_q + step_q;
      acc_row_d = acc_row_q + 1'b1;
      left_d    = left_q - 1'b1;
      first_d   = 1'b0;
    end
    pending_d      = rd && !start_i;
    pending_meta_d = {left_q == 32'd1, first_q && switch_q, accumulate_q, max_q,
                      AccAddrWidth'(acc_row_q)};
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      ub_row_q       <= '0;
      acc_row_q      <= '0;
      left_q         <= '0;
      first_q        <= 1'b0;
      switch_q       <= 1'b0;
      accumulate_q   <= 1'b0;
      max_q          <= 1'b0;
      pending_q      <= 1'b0;
      pending_meta_q <= '0;
      step_q         <= 32'd1;
      win_mode_q     <= 1'b0;
      pending_win_q  <= 1'b0;
    end else begin
      ub_row_q       <= ub_row_d;
      acc_row_q      <= acc_row_d;
      left_q         <= left_d;
      first_q        <= first_d;
      switch_q       <= switch_d;
      accumulate_q   <= accumulate_d;
      max_q          <= max_d;
      pending_q      <= pending_d;
      pending_meta_q <= pending_meta_d;
      step_q         <= step_d;
      win_mode_q     <= win_mode_d;
      pending_win_q  <= win_mode_q;
    end
  end

  // The window stage's registers: latched at start, the pixel advanced with each read.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      win_q     <= '0;
      base_q    <= '0;
      lane_on_q <= '0;
      lane_ky_q <= '0;
      lane_kx_q <= '0;
      lane_c_q  <= '0;
      oy_q      <= '0;
      ox_q      <= '0;
      wy_q      <= '0;
      wx_q      <= '0;
      q_q       <= '0;
      pad_q     <= '0;
    end else if (start_i && cmd_i.flags[FlagWindow]) begin
      win_q     <= window_i;
      base_q    <= cmd_i.src;
      lane_on_q <= lane_on_d;
      lane_ky_q <= lane_ky_d;
      lane_kx_q <= lane_kx_d;
      lane_c_q  <= lane_c_d;
      // The first pixel (`first=`); the controller has checked it lies in the output.
      oy_q      <= (window_i.out_w == '0) ? '0 : first_px / 32'(window_i.out_w);
      ox_q      <= (window_i.out_w == '0) ? '0 : first_px % 32'(window_i.out_w);
      wy_q      <= (pool_w == '0) ? '0 : (first_px >> 2) / pool_w;
      wx_q      <= (pool_w == '0) ? '0 : (first_px >> 2) % pool_w;
      q_q       <= first_px[1:0];
    end else if (rd && !start_i && win_mode_q) begin
      pad_q <= win_q.pad_min ? outside : '0;
      if (ox_q + 1 == 32'(win_q.out_w)) begin
        ox_q <= '0;
        oy_q <= oy_q + 1'b1;
      end else begin
        ox_q <= ox_q + 1'b1;
      end
      q_q <= q_q + 1'b1;
      if (q_q == 2'd3) begin
        if (wx_q + 1 == (32'(win_q.out_w) >> 1)) begin
          wx_q <= '0;
          wy_q <= wy_q + 1'b1;
        end else begin
          wx_q <= wx_q + 1'b1;
        end
      end
    end
  end

  // The gathered row, with the format's PadMinOf (-128 in int8) where pad_min pads.
  localparam operand_t PadMin = operand_t'(PadMinOf(Format));
  operand_t [ArrayDim-1:0] gathered;
  always_comb begin
    for (int l = 0; l < int'(ArrayDim); l++) gathered[l] = pad_q[l] ? PadMin : g_data_i[l];
  end

  tpu_fifo #(
    .Width(MetaWidth + ArrayDim * InputWidth),
    .Depth(BufDepth)
  ) u_buf (
    .clk_i,
    .rst_ni,
    .push_i     (pending_q),
    .push_data_i({pending_meta_q, pending_win_q ? gathered : ub_rd_data_i}),
    .pop_i      (pop),
    .head_o     (buf_head),
    .full_o     (buf_full),
    .empty_o    (buf_empty),
    .count_o    (buf_count)
  );

  assign ub_rd_en_o     = rd && !start_i && !win_mode_q;
  assign ub_rd_addr_o   = UbAddrWidth'(ub_row_q);
  assign g_en_o         = rd && !start_i && win_mode_q;
  assign a_valid_o      = !buf_empty;
  assign a_data_o       = buf_head[ArrayDim*InputWidth-1:0];
  assign {a_last_o, a_switch_o, a_accumulate_o, a_max_o, a_acc_addr_o} =
      buf_head[ArrayDim*InputWidth+:MetaWidth];
  assign busy_o         = (left_q != '0) || pending_q || !buf_empty;

  logic unused;
  assign unused = buf_full ^ (^win_q);  // the window stage uses some of the geometry

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
