// The whole chip: controller, host DMA engine, unified buffer, and per matrix unit (Mxus
// of them) a weight DMA engine and FIFO, a feeder and the unit with its accumulators; the
// activation unit (VPU and parameter sets), and the performance counters.
// docs/architecture.md has the block diagram.
//
// The system around it (sim/system/tpu_system.h) pushes instruction words into instr_*, answers
// the memory ports (the host port, and a weight-memory port per matrix unit's weight DMA;
// one request moves one row of ArrayDim elements; read data returns in order on *_resp_*), and reads status and counters through reg_addr_i/reg_data_o
// (register map in tpu_pkg). All outputs except reg_data_o and at_barrier_o come from
// registers. On a chip of several cores (tpu_chip) each core's at_barrier_o and halted_o
// come back to every core as arrived_i (tpu_controller: barrier); alone, arrived_i is 0.
`include "tpu_assert.svh"

module tpu_top
  import tpu_pkg::*;
#(
  // The number format: dtype_e's number (a build sets a top's parameters as numbers).
  parameter int unsigned Dtype = DtypeInt8,
  localparam dtype_e Format = dtype_e'(Dtype),
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam int unsigned ParamRows = ParamRowsOf(InputWidth),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,      // 2 .. 512
  parameter int unsigned AccDepth = 1024,   // accumulator rows
  parameter int unsigned UbDepth = 1024,    // unified-buffer rows
  parameter int unsigned WfifoTiles = 4,    // weight FIFO depth in tiles
  parameter int unsigned ParamSets = 32,    // VPU parameter sets
  parameter int unsigned IqDepth = 16,      // instruction queue entries
  parameter bit          CompactArray = 1'b0,  // the compact array form (see tpu_mxu)
  parameter int unsigned Mxus = 1,          // matrix units, 1 .. 4
  parameter int unsigned VectorSublanes = 1,  // the vector unit's rows a cycle (bf16 chips)
  parameter int unsigned Cores = 1,         // cores of the chip (a barrier's mask)
  parameter int unsigned CoreId = 0,        // this core's number on it
  localparam int unsigned RowWidth = ArrayDim * InputWidth
) (
  input  logic                    clk_i,
  // rst_ni also disables the assertions (tpu_assert.svh), a use Verilator counts as synchronous.
  /* verilator lint_off SYNCASYNCNET */
  input  logic                    rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // instructions
  input  logic                    instr_valid_i,
  output logic                    instr_ready_o,
  input  logic [InstrWidth-1:0]   instr_i,
  // external memory sizes in bytes
  input  logic [31:0]             hm_size_i,
  input  logic [63:0]             wm_size_i,
  // host memory port
  output logic                    hm_req_valid_o,
  input  logic                    hm_req_ready_i,
  output logic                    hm_req_write_o,
  output logic [31:0]             hm_req_addr_o,
  output logic [RowWidth-1:0]     hm_req_data_o,
  input  logic                    hm_resp_valid_i,
  input  logic [RowWidth-1:0]     hm_resp_data_i,
  // weight memory ports (read only): one per matrix unit's weight DMA (bit or row m: unit m's)
  output logic [Mxus-1:0]               wm_req_valid_o,
  input  logic [Mxus-1:0]               wm_req_ready_i,
  output logic [Mxus-1:0][63:0]         wm_req_addr_o,
  input  logic [Mxus-1:0]               wm_resp_valid_i,
  input  logic [Mxus-1:0][RowWidth-1:0] wm_resp_data_i,
  // the host DMA's weight-memory port (read_hbm, write_hbm)
  output logic                    hb_req_valid_o,
  input  logic                    hb_req_ready_i,
  output logic                    hb_req_write_o,
  output logic [63:0]             hb_req_addr_o,
  output logic [RowWidth-1:0]     hb_req_data_o,
  input  logic                    hb_resp_valid_i,
  input  logic [RowWidth-1:0]     hb_resp_data_i,
  // status
  output logic                    halted_o,
  output logic [3:0]              status_o,
  output logic                    idle_o,      // waiting for instructions, all units idle
  output logic                    progress_o,  // something moved last cycle
  output logic [NumUnits-1:0]     unit_busy_o,
  output logic [3:0]              mxu_busy_o,  // the matrix units with work (bit m: unit m)
  output logic [2:0]              issue_o,     // issue_e of the last cycle
  output logic                    wait_weights_o,  // a matmul waits for its weight tile
  // This cycle, for the per-layer attribution of the counters (docs/timing.md): what the
  // matrix units did (mxu_cycle_e, bits 2:0: the first of the units' in its order), a host memory stall (3), a weight memory stall
  // (4), the weight DMA waiting for FIFO room (5).
  output logic [5:0]              obs_o,
  // barriers: the cores of the chip waiting at one or halted (bit c: core c), and this
  // core waiting at one (combinational)
  input  logic [15:0]             arrived_i,
  output logic                    at_barrier_o,
  // register file (combinational read)
  input  logic [7:0]              reg_addr_i,
  output logic [63:0]             reg_data_o
);

  localparam int unsigned UbAddrWidth  = $clog2(UbDepth);
  localparam int unsigned AccAddrWidth = $clog2(AccDepth);
  localparam int unsigned ParDepth     = ParamSets * ParamRows;
  localparam int unsigned FifoRows     = WfifoTiles * ArrayDim;

  // ---------------------------------------------------------------- controller
  instr_t  cmd;
  window_t window;
  residual_t residual;
  logic    hdma_start, wdma_start, feed_start, act_start, vec_start;
  logic    hdma_busy, act_busy, vec_busy;
  logic [Mxus-1:0] wdma_busy, feed_busy, mxu_busy, mxu_last;
  logic    halted;
  status_e status;
  issue_e  issue;
  logic [31:0] error_pc, retired;

  tpu_controller #(
    .Format(Format),
    .ArrayDim (ArrayDim),
    .UbDepth  (UbDepth),
    .AccDepth (AccDepth),
    .ParamSets(ParamSets),
    .IqDepth  (IqDepth),
    .Mxus     (Mxus),
    .Cores    (Cores),
    .CoreId   (CoreId)
  ) u_controller (
    .clk_i,
    .rst_ni,
    .instr_valid_i,
    .instr_ready_o,
    .instr_i      (instr_t'(instr_i)),
    .hm_size_i,
    .wm_size_i,
    .hdma_busy_i  (hdma_busy),
    .wdma_busy_i  (wdma_busy),
    .feed_busy_i  (feed_busy),
    .mxu_busy_i   (mxu_busy),
    .mxu_last_i   (mxu_last),
    .act_busy_i   (act_busy),
    .vec_busy_i   (vec_busy),
    .arrived_i,
    .at_barrier_o,
    .cmd_o        (cmd),
    .window_o     (window),
    .residual_o   (residual),
    .hdma_start_o (hdma_start),
    .wdma_start_o (wdma_start),
    .feed_start_o (feed_start),
    .act_start_o  (act_start),
    .vec_start_o  (vec_start),
    .halted_o     (halted),
    .status_o     (status),
    .error_pc_o   (error_pc),
    .retired_o    (retired),
    .issue_o      (issue),
    .idle_o
  );

  // ---------------------------------------------------------------- unified buffer
  // Read port 0 and the gather port: one each per matrix unit's feeder.
  logic                    ub_rd1_en, ub_rd2_en, ub_wr0_en, ub_wr1_en;
  logic [UbAddrWidth-1:0]  ub_rd1_addr, ub_rd2_addr, ub_wr0_addr, ub_wr1_addr;
  operand_t [ArrayDim-1:0] ub_rd1_data, ub_rd2_data, ub_wr0_data, ub_wr1_data;
  logic [Mxus-1:0]                          ub_rd0_en, ub_rd3_en, ub_g_en;
  logic [Mxus-1:0][UbAddrWidth-1:0]         ub_rd0_addr, ub_rd3_addr;
  operand_t [Mxus-1:0][ArrayDim-1:0]        ub_rd0_data, ub_rd3_data, ub_g_data;
  logic [Mxus-1:0][ArrayDim-1:0][UbAddrWidth-1:0]       ub_g_row;
  logic [Mxus-1:0][ArrayDim-1:0][$clog2(ArrayDim)-1:0] ub_g_lane;
  logic [Mxus-1:0][ArrayDim-1:0]            ub_g_zero;
  // The vector unit's ports (tpu_vector_unit): three reads and a write, each VecRows wide.
  localparam int unsigned VecRows = 2 * VectorSublanes;
  localparam int unsigned VecRowsWidth = $clog2(VecRows + 1);  // rows a port moves, 0 .. VecRows
  logic [2:0]                               ub_vr_en;
  logic [2:0][UbAddrWidth-1:0]              ub_vr_addr;
  logic [2:0][VecRowsWidth-1:0]             vec_rd_rows;
  operand_t [2:0][VecRows-1:0][ArrayDim-1:0] ub_vr_data;
  logic                                     ub_vw_en;
  logic [UbAddrWidth-1:0]                   ub_vw_addr;
  logic [VecRowsWidth-1:0]                  ub_vw_rows;
  operand_t [VecRows-1:0][ArrayDim-1:0]      ub_vw_data;

  tpu_unified_buffer #(
    .Format(Format),
    .ArrayDim(ArrayDim),
    .Depth   (UbDepth),
    .Feeders (Mxus),
    .VecRows (VecRows)
  ) u_unified_buffer (
    .clk_i,
    .rst_ni,
    .rd0_en_i  (ub_rd0_en),
    .rd0_addr_i(ub_rd0_addr),
    .rd0_data_o(ub_rd0_data),
    .rd3_en_i  (ub_rd3_en),
    .rd3_addr_i(ub_rd3_addr),
    .rd3_data_o(ub_rd3_data),
    .rd1_en_i  (ub_rd1_en),
    .rd1_addr_i(ub_rd1_addr),
    .rd1_data_o(ub_rd1_data),
    .rd2_en_i  (ub_rd2_en),
    .rd2_addr_i(ub_rd2_addr),
    .rd2_data_o(ub_rd2_data),
    .g_en_i    (ub_g_en),
    .g_row_i   (ub_g_row),
    .g_lane_i  (ub_g_lane),
    .g_zero_i  (ub_g_zero),
    .g_data_o  (ub_g_data),
    .wr0_en_i  (ub_wr0_en),
    .wr0_addr_i(ub_wr0_addr),
    .wr0_data_i(ub_wr0_data),
    .wr1_en_i  (ub_wr1_en),
    .wr1_addr_i(ub_wr1_addr),
    .wr1_data_i(ub_wr1_data),
    .vr_en_i   (ub_vr_en),
    .vr_addr_i (ub_vr_addr),
    .vr_data_o (ub_vr_data),
    .vw_en_i   (ub_vw_en),
    .vw_addr_i (ub_vw_addr),
    .vw_rows_i (ub_vw_rows),
    .vw_data_i (ub_vw_data)
  );

  // ---------------------------------------------------------------- host DMA
  logic                     par_wr_en, hm_stall, hb_stall;
  logic [$clog2(ParDepth)-1:0] par_wr_addr;
  operand_t [ArrayDim-1:0]  par_wr_data, hm_req_data, hb_req_data;

  tpu_host_dma #(
    .Format(Format),
    .ArrayDim  (ArrayDim),
    .UbDepth   (UbDepth),
    .ParamDepth(ParDepth)
  ) u_host_dma (
    .clk_i,
    .rst_ni,
    .start_i         (hdma_start),
    .cmd_i           (cmd),
    .busy_o          (hdma_busy),
    .mem_req_valid_o (hm_req_valid_o),
    .mem_req_ready_i (hm_req_ready_i),
    .mem_req_write_o (hm_req_write_o),
    .mem_req_addr_o  (hm_req_addr_o),
    .mem_req_data_o  (hm_req_data),
    .mem_resp_valid_i(hm_resp_valid_i),
    .mem_resp_data_i (hm_resp_data_i),
    .mem_stall_o     (hm_stall),
    .hbm_req_valid_o (hb_req_valid_o),
    .hbm_req_ready_i (hb_req_ready_i),
    .hbm_req_write_o (hb_req_write_o),
    .hbm_req_addr_o  (hb_req_addr_o),
    .hbm_req_data_o  (hb_req_data),
    .hbm_resp_valid_i(hb_resp_valid_i),
    .hbm_resp_data_i (hb_resp_data_i),
    .hbm_stall_o     (hb_stall),
    .ub_wr_en_o      (ub_wr0_en),
    .ub_wr_addr_o    (ub_wr0_addr),
    .ub_wr_data_o    (ub_wr0_data),
    .ub_rd_en_o      (ub_rd1_en),
    .ub_rd_addr_o    (ub_rd1_addr),
    .ub_rd_data_i    (ub_rd1_data),
    .par_wr_en_o     (par_wr_en),
    .par_wr_addr_o   (par_wr_addr),
    .par_wr_data_o   (par_wr_data)
  );
  assign hm_req_data_o = hm_req_data;
  assign hb_req_data_o = hb_req_data;

  // ---------------------------------------------------------------- matrix units
  // Each: its weight DMA (on its own weight-memory port, started by a read_weights naming
  // the unit: mxu=) filling its weight FIFO, its feeder (on its own unified-buffer read and
  // gather ports) and the matrix unit with its accumulators, which the activation unit
  // reads for an activate naming it.
  localparam int unsigned FifoCountWidth = $clog2(FifoRows + 1);
  logic [1:0]              act_mxu_q, cmd_mxu;
  logic [Mxus-1:0]         wfifo_push, wm_stall, wdma_fifo_stall;

  assign cmd_mxu = cmd.flags[OpdMatmulMxuLsb+:OpdMatmulMxuBits];
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) act_mxu_q <= '0;
    else if (act_start) act_mxu_q <= cmd_mxu;
  end

  logic [Mxus-1:0]         a_fire, w_fire, switch_fire, out_valid, wait_w;
  logic [Mxus-1:0]         acc_rd_valid_l;
  acc_t [Mxus-1:0][ArrayDim-1:0] acc_rd_data_l;
  mxu_cycle_e [Mxus-1:0]   lane_cycle;
  logic                    acc_rd_en, acc_rd_valid;
  logic [AccAddrWidth-1:0] acc_rd_addr;
  acc_t [ArrayDim-1:0]     acc_rd_data;

  for (genvar m = 0; m < int'(Mxus); m++) begin : g_mxu
    logic                    w_valid, w_ready, wfifo_full, wfifo_empty;
    operand_t [ArrayDim-1:0] wfifo_head, wfifo_in;
    logic [FifoCountWidth-1:0] wfifo_count;
    logic                    a_valid, a_ready, a_switch, a_accumulate, a_max, a_last;
    logic                    in_flight, final_valid, acc_error;
    logic [AccAddrWidth-1:0] a_acc_addr, final_addr;
    operand_t [ArrayDim-1:0] a_data;

    tpu_weight_dma #(
      .Format(Format),
      .ArrayDim(ArrayDim),
      .FifoRows(FifoRows),
      .UbDepth (UbDepth)
    ) u_weight_dma (
      .clk_i,
      .rst_ni,
      .start_i         (wdma_start && 32'(cmd_mxu) == m),
      .cmd_i           (cmd),
      .busy_o          (wdma_busy[m]),
      .mem_req_valid_o (wm_req_valid_o[m]),
      .mem_req_ready_i (wm_req_ready_i[m]),
      .mem_req_addr_o  (wm_req_addr_o[m]),
      .mem_resp_valid_i(wm_resp_valid_i[m]),
      .mem_resp_data_i (wm_resp_data_i[m]),
      .mem_stall_o     (wm_stall[m]),
      .ub_rd_en_o      (ub_rd3_en[m]),
      .ub_rd_addr_o    (ub_rd3_addr[m]),
      .ub_rd_data_i    (ub_rd3_data[m]),
      .fifo_count_i    (wfifo_count),
      .fifo_push_o     (wfifo_push[m]),
      .fifo_data_o     (wfifo_in),
      .fifo_stall_o    (wdma_fifo_stall[m])
    );

    tpu_fifo #(
      .Width(RowWidth),
      .Depth(FifoRows)
    ) u_weight_fifo (
      .clk_i,
      .rst_ni,
      .push_i     (wfifo_push[m]),
      .push_data_i(wfifo_in),
      .pop_i      (w_fire[m]),
      .head_o     (wfifo_head),
      .full_o     (wfifo_full),
      .empty_o    (wfifo_empty),
      .count_o    (wfifo_count)
    );
    assign w_valid = !wfifo_empty;

    tpu_mxu_feeder #(
      .Format(Format),
      .ArrayDim(ArrayDim),
      .UbDepth (UbDepth),
      .AccDepth(AccDepth)
    ) u_feeder (
      .clk_i,
      .rst_ni,
      .start_i       (feed_start && 32'(cmd_mxu) == m),
      .cmd_i         (cmd),
      .window_i      (window),
      .busy_o        (feed_busy[m]),
      .ub_rd_en_o    (ub_rd0_en[m]),
      .ub_rd_addr_o  (ub_rd0_addr[m]),
      .ub_rd_data_i  (ub_rd0_data[m]),
      .g_en_o        (ub_g_en[m]),
      .g_row_o       (ub_g_row[m]),
      .g_lane_o      (ub_g_lane[m]),
      .g_zero_o      (ub_g_zero[m]),
      .g_data_i      (ub_g_data[m]),
      .a_valid_o     (a_valid),
      .a_ready_i     (a_ready),
      .a_data_o      (a_data),
      .a_switch_o    (a_switch),
      .a_last_o      (a_last),
      .a_acc_addr_o  (a_acc_addr),
      .a_accumulate_o(a_accumulate),
      .a_max_o       (a_max)
    );

    tpu_matrix_unit #(
      .Format(Format),
      .ArrayDim    (ArrayDim),
      .AccDepth    (AccDepth),
      .CompactArray(CompactArray)
    ) u_matrix (
      .clk_i,
      .rst_ni,
      .w_valid_i     (w_valid),
      .w_ready_o     (w_ready),
      .w_data_i      (wfifo_head),
      .a_valid_i     (a_valid),
      .a_ready_o     (a_ready),
      .a_data_i      (a_data),
      .a_switch_i    (a_switch),
      .a_acc_addr_i  (a_acc_addr),
      .a_accumulate_i(a_accumulate),
      .a_max_i       (a_max),
      .a_final_i     (1'b1),
      .rd_en_i       (acc_rd_en && 32'(act_mxu_q) == m),
      .rd_addr_i     (acc_rd_addr),
      .rd_valid_o    (acc_rd_valid_l[m]),
      .rd_data_o     (acc_rd_data_l[m]),
      .final_valid_o (final_valid),
      .final_addr_o  (final_addr),
      .error_o       (acc_error),
      .a_fire_o      (a_fire[m]),
      .w_fire_o      (w_fire[m]),
      .switch_fire_o (switch_fire[m]),
      .acc_write_o   (out_valid[m]),
      .in_flight_o   (in_flight),
      .drain_reads_i (1'b0),  // the activation unit reads the accumulators, not the matrix unit
      .cycle_o       (lane_cycle[m])
    );

    assign mxu_busy[m] = feed_busy[m] || in_flight;
    assign mxu_last[m] = a_fire[m] && a_last;
    assign wait_w[m]   = a_valid && !a_ready;

    // The controller's range checks keep every accumulator row an instruction names inside
    // the accumulators.
    `TPU_ASSERT(AccWriteInRange, a_fire[m] |-> 32'(a_acc_addr) < AccDepth,
                $error("tpu_top: a row went to accumulator row %0d of %0d", a_acc_addr, AccDepth))

    logic unused_lane;
    assign unused_lane = w_ready ^ wfifo_full ^ final_valid ^ acc_error ^ (^final_addr);
  end

  // The activation unit reads its unit's accumulators.
  always_comb begin
    acc_rd_valid = 1'b0;
    acc_rd_data  = '0;
    for (int m = 0; m < int'(Mxus); m++) begin
      if (32'(act_mxu_q) == m) begin
        acc_rd_valid = acc_rd_valid_l[m];
        acc_rd_data  = acc_rd_data_l[m];
      end
    end
  end
  `TPU_ASSERT(AccReadInRange, acc_rd_en |-> 32'(acc_rd_addr) < AccDepth,
              $error("tpu_top: the activation unit read accumulator row %0d of %0d",
                     acc_rd_addr, AccDepth))

  // What the matrix units did this cycle, for the counters and obs_o: the first of their
  // cycles in mxu_cycle_e's order (a row entered one of them: stream; ...).
  mxu_cycle_e mxu_cycle;
  always_comb begin
    mxu_cycle = MxuIdle;
    for (int m = 0; m < int'(Mxus); m++) if (lane_cycle[m] < mxu_cycle) mxu_cycle = lane_cycle[m];
  end

  // ---------------------------------------------------------------- activation unit
  logic vpu_in, vpu_out;

  tpu_activate_unit #(
    .Format(Format),
    .ArrayDim (ArrayDim),
    .UbDepth  (UbDepth),
    .AccDepth (AccDepth),
    .ParamSets(ParamSets)
  ) u_activate (
    .clk_i,
    .rst_ni,
    .start_i       (act_start),
    .cmd_i         (cmd),
    .residual_i    (residual),
    .busy_o        (act_busy),
    .par_wr_en_i   (par_wr_en),
    .par_wr_addr_i (par_wr_addr),
    .par_wr_data_i (par_wr_data),
    .acc_rd_en_o   (acc_rd_en),
    .acc_rd_addr_o (acc_rd_addr),
    .acc_rd_valid_i(acc_rd_valid),
    .acc_rd_data_i (acc_rd_data),
    .ub_rd_en_o    (ub_rd2_en),
    .ub_rd_addr_o  (ub_rd2_addr),
    .ub_rd_data_i  (ub_rd2_data),
    .ub_wr_en_o    (ub_wr1_en),
    .ub_wr_addr_o  (ub_wr1_addr),
    .ub_wr_data_o  (ub_wr1_data),
    .vpu_in_o      (vpu_in),
    .vpu_out_o     (vpu_out)
  );

  // ---------------------------------------------------------------- vector unit
  // A bf16 chip's float32 vector unit; an int8 chip has none (the controller refuses
  // `vector` there with wrong-format).
  if (Format == DtypeBf16) begin : g_vector
    tpu_vector_unit #(
      .ArrayDim(ArrayDim),
      .UbDepth (UbDepth),
      .Sublanes(VectorSublanes)
    ) u_vector (
      .clk_i,
      .rst_ni,
      .start_i  (vec_start),
      .cmd_i    (cmd),
      .busy_o   (vec_busy),
      .rd_en_o  (ub_vr_en),
      .rd_addr_o(ub_vr_addr),
      .rd_rows_o(vec_rd_rows),
      .rd_data_i(ub_vr_data),
      .wr_en_o  (ub_vw_en),
      .wr_addr_o(ub_vw_addr),
      .wr_rows_o(ub_vw_rows),
      .wr_data_o(ub_vw_data)
    );
  end else begin : g_no_vector
    assign vec_busy    = 1'b0;
    assign ub_vr_en    = '0;
    assign ub_vr_addr  = '0;
    assign vec_rd_rows = '0;
    assign ub_vw_en    = 1'b0;
    assign ub_vw_addr  = '0;
    assign ub_vw_rows  = '0;
    assign ub_vw_data  = '0;
    logic unused_vec;
    assign unused_vec = vec_start ^ (^ub_vr_data);
  end

  // ---------------------------------------------------------------- counters
  logic [NumCounters-1:0][31:0] inc;
  counter_t                     cnt_q[NumCounters];
  logic                         hm_fire, hb_fire;
  logic [Mxus-1:0]              wm_fire;
  // TPU v1's categories of the cycles the matrix unit does not work (docs/timing.md).
  logic                         mxu_waits, raw_wait;
  assign mxu_waits = mxu_cycle == MxuDrain || mxu_cycle == MxuIdle;
  assign raw_wait  = issue == IssueUbHazard || issue == IssueAccHazard ||
                     issue == IssueParamHazard || issue == IssueDrain;

  assign hm_fire = hm_req_valid_o && hm_req_ready_i;
  assign wm_fire = wm_req_valid_o & wm_req_ready_i;
  assign hb_fire = hb_req_valid_o && hb_req_ready_i;

  always_comb begin
    inc = '0;
    inc[CntCycles]                 = 32'd1;
    inc[CntBusyHostDma]            = 32'(hdma_busy);
    inc[CntBusyWeightDma]          = 32'(wdma_busy != '0);
    inc[CntBusyMatrix]             = 32'(mxu_busy != '0);
    inc[CntBusyActivate]           = 32'(act_busy);
    inc[CntBusyVector]             = 32'(vec_busy);
    // Every cycle of the matrix units is exactly one of these five (mxu_cycle).
    unique case (mxu_cycle)
      MxuStream: inc[CntMxuStreamCycles] = 32'd1;
      MxuLoad:   inc[CntMxuLoadCycles]   = 32'd1;
      MxuStall:  inc[CntMxuStallWeights] = 32'd1;
      MxuDrain:  inc[CntMxuDrainCycles]  = 32'd1;
      default:   inc[CntMxuIdleCycles]   = 32'd1;
    endcase
    inc[CntWaitInput]              = 32'(mxu_waits && hdma_busy);
    inc[CntWaitVector]             = 32'(mxu_waits && !hdma_busy && vec_busy);
    inc[CntWaitRaw]                = 32'(mxu_waits && !hdma_busy && !vec_busy && raw_wait);
    inc[CntWaitNonMatrix]          = 32'(mxu_waits && !hdma_busy && !vec_busy && !raw_wait);
    inc[CntIssueWaitInstruction]   = 32'(issue == IssueWaitInstruction);
    inc[CntIssueStallUnitBusy]     = 32'(issue == IssueUnitBusy);
    inc[CntIssueStallUbHazard]     = 32'(issue == IssueUbHazard);
    inc[CntIssueStallAccHazard]    = 32'(issue == IssueAccHazard);
    inc[CntIssueStallParamHazard]  = 32'(issue == IssueParamHazard);
    inc[CntIssueStallDrain]        = 32'(issue == IssueDrain);
    inc[CntWeightDmaStallFifoFull] = 32'(wdma_fifo_stall != '0);
    inc[CntHostMemStall]           = 32'(hm_stall);
    inc[CntWeightMemStall]         = 32'(wm_stall != '0 || hb_stall);
    inc[CntUbReads]                = 32'($countones(ub_rd0_en)) + 32'($countones(ub_rd3_en)) +
                                     32'(ub_rd1_en) +
                                     32'(ub_rd2_en) + 32'($countones(ub_g_en)) +
                                     32'(vec_rd_rows[0]) + 32'(vec_rd_rows[1]) +
                                     32'(vec_rd_rows[2]);
    inc[CntUbWrites]               = 32'(ub_wr0_en) + 32'(ub_wr1_en) +
                                     (ub_vw_en ? 32'(ub_vw_rows) : 32'd0);
    inc[CntAccReads]               = 32'(acc_rd_en);
    inc[CntAccWrites]              = 32'($countones(out_valid));
    inc[CntWeightFifoPushes]       = 32'($countones(wfifo_push));
    inc[CntWeightFifoPops]         = 32'($countones(w_fire));
    inc[CntWeightTiles]            = 32'($countones(switch_fire));
    inc[CntParamWrites]            = 32'(par_wr_en);
    inc[CntHostBytesRead]          = (hm_fire && !hm_req_write_o) ? 32'(ArrayDim * InputWidth / 8) : 32'd0;
    inc[CntHostBytesWritten]       = (hm_fire && hm_req_write_o) ? 32'(ArrayDim * InputWidth / 8) : 32'd0;
    inc[CntWeightBytesRead]        = (hb_fire && !hb_req_write_o) ? 32'(ArrayDim * InputWidth / 8) : 32'd0;
    inc[CntWeightBytesWritten]     = (hb_fire && hb_req_write_o) ? 32'(ArrayDim * InputWidth / 8) : 32'd0;
    for (int m = 0; m < int'(Mxus); m++)
      if (wm_fire[m]) inc[CntWeightBytesRead] += 32'(ArrayDim * InputWidth / 8);
    inc[CntMacs]                   = 32'($countones(a_fire)) * 32'(ArrayDim * ArrayDim);
    inc[CntVpuRowsIn]              = 32'(vpu_in);
    inc[CntVpuRowsOut]             = 32'(vpu_out);
    inc[CntInstructions]           = 32'(issue == IssueFire);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      for (int i = 0; i < int'(NumCounters); i++) cnt_q[i] <= '0;
    end else if (!halted) begin
      for (int i = 0; i < int'(NumCounters); i++) cnt_q[i] <= cnt_q[i] + counter_t'(inc[i]);
    end
  end

  // ---------------------------------------------------------------- status and registers
  logic progress_q;
  logic [2:0] issue_q;
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      progress_q <= 1'b0;
      issue_q    <= '0;
    end else begin
      progress_q <= (issue == IssueFire) || instr_valid_i && instr_ready_o || hm_fire ||
                    hm_resp_valid_i || wm_fire != '0 || wm_resp_valid_i != '0 || a_fire != '0 ||
                    hb_fire || hb_resp_valid_i ||
                    w_fire != '0 || out_valid != '0 || acc_rd_en || vpu_out ||
                    ub_rd3_en != '0 || wfifo_push != '0 || ub_vr_en != '0 || ub_vw_en;
      issue_q    <= issue;
    end
  end

  assign halted_o       = halted;
  assign status_o       = status;
  assign progress_o     = progress_q;
  assign issue_o        = issue_q;
  assign unit_busy_o[UnitHostDma]   = hdma_busy;
  assign unit_busy_o[UnitWeightDma] = wdma_busy != '0;
  assign unit_busy_o[UnitMatrix]    = mxu_busy != '0;
  assign unit_busy_o[UnitActivate]  = act_busy;
  assign unit_busy_o[UnitVector]    = vec_busy;
  assign mxu_busy_o     = 4'(mxu_busy);  // Mxus <= 4: the bits above its units are 0
  assign wait_weights_o = wait_w != '0;
  assign obs_o          = {wdma_fifo_stall != '0, wm_stall != '0 || hb_stall, hm_stall, mxu_cycle};

  always_comb begin
    unique case (32'(reg_addr_i))
      RegStatus:     reg_data_o = 64'(status);
      RegHalted:     reg_data_o = 64'(halted);
      RegErrorPc:    reg_data_o = 64'(error_pc);
      RegRetired:    reg_data_o = 64'(retired);
      RegArrayDim:   reg_data_o = 64'(ArrayDim);
      RegAccDepth:   reg_data_o = 64'(AccDepth);
      RegUbDepth:    reg_data_o = 64'(UbDepth);
      RegWfifoTiles: reg_data_o = 64'(WfifoTiles);
      RegParamSets:  reg_data_o = 64'(ParamSets);
      RegIqDepth:    reg_data_o = 64'(IqDepth);
      RegDtype:      reg_data_o = 64'(Format);
      RegMxus:       reg_data_o = 64'(Mxus);
      RegVectorSublanes: reg_data_o = 64'(VectorSublanes);
      default: begin
        if (32'(reg_addr_i) >= RegFirstCounter &&
            32'(reg_addr_i) < RegFirstCounter + NumCounters) begin
          reg_data_o = cnt_q[32'(reg_addr_i) - RegFirstCounter];
        end else begin
          reg_data_o = '0;
        end
      end
    endcase
  end


endmodule
