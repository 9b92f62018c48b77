// Weight DMA engine of one matrix unit: fills its weight FIFO with tiles (ArrayDim rows of
// ArrayDim operands), row 0 first, from one of two sources.
// - read_weights: from weight memory, at a 48-bit byte address (src, and aux for bits
//   32-47), row by row. It only asks for a row when the FIFO will have room for it,
//   counting rows still on their way, so the FIFO never overflows however long the memory
//   takes. Memory-side outputs depend on registers only.
// - load_weights: from unified-buffer rows (src), on a read port of its own with one cycle
//   of latency: a row read while the FIFO has room (the rows on their way counted) is
//   pushed the next cycle. With `transpose`, each tile passes through a tile buffer: its N
//   rows are read into it (N cycles), then its N columns are pushed, one a cycle while the
//   FIFO has room; FIFO row k is lane k of the tile's rows (docs/isa.md, "Weights from the
//   unified buffer").
module tpu_weight_dma
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned FifoRows = 4 * ArrayDim,
  parameter int unsigned UbDepth = 1024,
  localparam int unsigned CountWidth = $clog2(FifoRows + 1),
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  localparam int unsigned TileWidth = $clog2(ArrayDim + 1)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  logic                    start_i,
  input  instr_t                  cmd_i,
  output logic                    busy_o,
  // weight memory (read only)
  output logic                    mem_req_valid_o,
  input  logic                    mem_req_ready_i,
  output logic [63:0]             mem_req_addr_o,
  input  logic                    mem_resp_valid_i,
  input  operand_t [ArrayDim-1:0] mem_resp_data_i,
  output logic                    mem_stall_o,
  // unified buffer (load_weights): a read port of its own
  output logic                    ub_rd_en_o,
  output logic [UbAddrWidth-1:0]  ub_rd_addr_o,
  input  operand_t [ArrayDim-1:0] ub_rd_data_i,
  // weight FIFO
  input  logic [CountWidth-1:0]   fifo_count_i,
  output logic                    fifo_push_o,
  output operand_t [ArrayDim-1:0] fifo_data_o,
  output logic                    fifo_stall_o  // rows left to push, but no room for them
);

  logic [63:0]           req_addr_q;
  logic [31:0]           req_left_q, resp_left_q;
  logic [CountWidth-1:0] outstanding_q;  // requested rows not yet back
  logic                  from_ub_q, transpose_q;
  logic                  ub_pending_q;   // a unified-buffer row read last cycle
  logic                  room, req_fire, resp_take;
  // The tile buffer (transpose): rows read into it so far, rows of it filled, the column
  // pushed next.
  operand_t [ArrayDim-1:0][ArrayDim-1:0] tile_q;
  logic [TileWidth-1:0]  tile_reads_q, tile_rows_q, tile_col_q;
  logic                  tile_full, col_push;

  assign room            = (32'(outstanding_q) + 32'(fifo_count_i)) < FifoRows;
  assign tile_full       = 32'(tile_rows_q) == ArrayDim;
  assign col_push        = transpose_q && tile_full && 32'(fifo_count_i) < FifoRows;
  assign mem_req_valid_o = !from_ub_q && (req_left_q != '0) && room;
  assign mem_req_addr_o  = req_addr_q;
  assign ub_rd_en_o      = from_ub_q && (req_left_q != '0) &&
                           (transpose_q ? 32'(tile_reads_q) < ArrayDim : room);
  assign ub_rd_addr_o    = UbAddrWidth'(req_addr_q);
  assign req_fire        = mem_req_valid_o ? mem_req_ready_i : ub_rd_en_o;
  assign resp_take       = transpose_q ? col_push
                         : from_ub_q ? ub_pending_q : mem_resp_valid_i && (resp_left_q != '0);
  assign mem_stall_o     = mem_req_valid_o && !mem_req_ready_i;
  assign fifo_stall_o    = transpose_q ? tile_full && !col_push
                                       : (req_left_q != '0) && !room;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      req_addr_q    <= '0;
      req_left_q    <= '0;
      resp_left_q   <= '0;
      outstanding_q <= '0;
      from_ub_q     <= 1'b0;
      transpose_q   <= 1'b0;
      ub_pending_q  <= 1'b0;
      tile_reads_q  <= '0;
      tile_rows_q   <= '0;
      tile_col_q    <= '0;
    end else if (start_i) begin
      from_ub_q   <= cmd_i.opcode == OpLoadWeights;
      transpose_q <= cmd_i.opcode == OpLoadWeights && cmd_i.flags[FlagTranspose];
      req_addr_q  <= cmd_i.opcode == OpLoadWeights ? 64'(cmd_i.src)
                   : {16'd0, cmd_i.aux[OpdReadWeightsAddrHiLsb+:OpdReadWeightsAddrHiBits],
                      cmd_i.src};
      req_left_q  <= 32'(cmd_i.length) * ArrayDim;
      resp_left_q <= 32'(cmd_i.length) * ArrayDim;
    end else begin
      if (req_fire) begin
        // a row's bytes in weight memory; a row in the unified buffer
        req_addr_q <= req_addr_q + (from_ub_q ? 64'd1 : 64'(ArrayDim * InputWidth / 8));
        req_left_q <= req_left_q - 1'b1;
      end
      if (resp_take) resp_left_q <= resp_left_q - 1'b1;
      ub_pending_q <= ub_rd_en_o;
      if (!transpose_q)
        outstanding_q <= outstanding_q + CountWidth'(req_fire) - CountWidth'(resp_take);
      // The tile buffer: rows in, then columns out; the next tile's reads after its last.
      if (ub_rd_en_o && transpose_q) tile_reads_q <= tile_reads_q + 1'b1;
      if (ub_pending_q && transpose_q) tile_rows_q <= tile_rows_q + 1'b1;
      if (col_push) begin
        if (32'(tile_col_q) == ArrayDim - 1) begin
          tile_col_q   <= '0;
          tile_rows_q  <= '0;
          tile_reads_q <= '0;
        end else begin
          tile_col_q <= tile_col_q + 1'b1;
        end
      end
    end
  end

  // The tile buffer's rows, as they arrive (no reset: read only once filled).
  always_ff @(posedge clk_i) begin
    if (ub_pending_q && transpose_q) tile_q[tile_rows_q[$clog2(ArrayDim)-1:0]] <= ub_rd_data_i;
  end

  // Column tile_col_q of the tile buffer: lane k of FIFO row tile_col_q is row k's lane.
  operand_t [ArrayDim-1:0] column;
  always_comb begin
    for (int k = 0; k < int'(ArrayDim); k++)
      column[k] = tile_q[k][tile_col_q[$clog2(ArrayDim)-1:0]];
  end

  assign fifo_push_o = resp_take;
  assign fifo_data_o = transpose_q ? column : from_ub_q ? ub_rd_data_i : mem_resp_data_i;
  assign busy_o      = (req_left_q != '0) || (resp_left_q != '0);

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
