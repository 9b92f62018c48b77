// Host-memory DMA engine: runs read_host (host memory -> unified buffer or VPU parameter
// rows), write_host (unified buffer -> host memory), and read_hbm and write_hbm (weight
// memory, the Cloud TPU's HBM, <-> unified buffer, read_hbm also into VPU parameter rows, on
// a weight-memory port of its own), one
// row of ArrayDim operands per memory request. Requests are issued as fast as the memory accepts them; read data
// comes back in order, any number of cycles later, and is written where it belongs;
// writes are posted (done when the memory accepts them). The memory-side outputs depend
// on registers only, so a memory model can answer them in the same cycle.
module tpu_host_dma
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam int unsigned ParamRows = ParamRowsOf(InputWidth),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned ParamDepth = 8 * ParamRows,  // parameter rows
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  localparam int unsigned ParAddrWidth = $clog2(ParamDepth)
) (
  input  logic                       clk_i,
  input  logic                       rst_ni,
  // command from the controller (checked there): read_host or write_host
  input  logic                       start_i,
  input  instr_t                     cmd_i,
  output logic                       busy_o,
  // host memory
  output logic                       mem_req_valid_o,
  input  logic                       mem_req_ready_i,
  output logic                       mem_req_write_o,
  output logic [31:0]                mem_req_addr_o,
  output operand_t [ArrayDim-1:0]    mem_req_data_o,
  input  logic                       mem_resp_valid_i,
  input  operand_t [ArrayDim-1:0]    mem_resp_data_i,
  output logic                       mem_stall_o,  // a request waited for the memory
  // weight memory (read_hbm, write_hbm)
  output logic                       hbm_req_valid_o,
  input  logic                       hbm_req_ready_i,
  output logic                       hbm_req_write_o,
  output logic [63:0]                hbm_req_addr_o,
  output operand_t [ArrayDim-1:0]    hbm_req_data_o,
  input  logic                       hbm_resp_valid_i,
  input  operand_t [ArrayDim-1:0]    hbm_resp_data_i,
  output logic                       hbm_stall_o,  // a request waited for the weight memory
  // unified buffer
  output logic                       ub_wr_en_o,
  output logic [UbAddrWidth-1:0]     ub_wr_addr_o,
  output operand_t [ArrayDim-1:0]    ub_wr_data_o,
  output logic                       ub_rd_en_o,
  output logic [UbAddrWidth-1:0]     ub_rd_addr_o,
  input  operand_t [ArrayDim-1:0]    ub_rd_data_i,
  // VPU parameter rows
  output logic                       par_wr_en_o,
  output logic [ParAddrWidth-1:0]    par_wr_addr_o,
  output operand_t [ArrayDim-1:0]    par_wr_data_o
);

  localparam int unsigned RowsWidth = 32;

  logic                 write_q;      // write_host, write_hbm
  logic                 params_q;     // read_host or read_hbm into parameter rows
  logic                 hbm_q;        // read_hbm, write_hbm: the weight memory's port
  logic [63:0]          req_addr_q;   // next memory address (host memory: bits 0-31)
  logic [RowsWidth-1:0] req_left_q;   // requests still to issue
  logic [RowsWidth-1:0] resp_left_q;  // read responses still to come
  logic [31:0]          buf_row_q;    // next unified-buffer / parameter row
  logic [RowsWidth-1:0] rd_left_q;    // write_host: unified-buffer rows still to read
  logic                 rd_pending_q; // a unified-buffer read returns this cycle

  // write_host, write_hbm: rows read from the unified buffer wait here for the memory.
  localparam int unsigned BufDepth = 2;
  logic                         obuf_full, obuf_empty, obuf_pop;
  logic [$clog2(BufDepth+1)-1:0] obuf_count;
  operand_t [ArrayDim-1:0]      obuf_head;

  logic req_fire, ub_read, resp_valid;
  operand_t [ArrayDim-1:0] resp_data;
  logic req_valid;  // a request for the memory the instruction uses
  assign req_valid       = write_q ? !obuf_empty : (req_left_q != '0);
  assign mem_req_valid_o = !hbm_q && req_valid;
  assign mem_req_write_o = write_q;
  assign mem_req_addr_o  = req_addr_q[31:0];
  assign mem_req_data_o  = obuf_head;
  assign hbm_req_valid_o = hbm_q && req_valid;
  assign hbm_req_write_o = write_q;
  assign hbm_req_addr_o  = req_addr_q;
  assign hbm_req_data_o  = obuf_head;
  assign req_fire        = (mem_req_valid_o && mem_req_ready_i) ||
                           (hbm_req_valid_o && hbm_req_ready_i);
  assign obuf_pop        = req_fire && write_q;
  assign mem_stall_o     = mem_req_valid_o && !mem_req_ready_i;
  assign hbm_stall_o     = hbm_req_valid_o && !hbm_req_ready_i;
  // Read rows come back on the port asked (one instruction at a time: the other is quiet).
  assign resp_valid      = hbm_q ? hbm_resp_valid_i : mem_resp_valid_i;
  assign resp_data       = hbm_q ? hbm_resp_data_i : mem_resp_data_i;

  // Read the next unified-buffer row when the buffer will have room for it.
  assign ub_read = write_q && (rd_left_q != '0) &&
                   (32'(obuf_count) - 32'(obuf_pop) + 32'(rd_pending_q) < BufDepth);

  // Rows are in [row, row + n) with the range checked by the controller, so the row
  // number fits the address width.
  logic [RowsWidth-1:0] num_rows;
  logic params_cmd;  // read_host or read_hbm into parameter rows
  assign params_cmd = cmd_i.flags[FlagParams] &&
                      (cmd_i.opcode == OpReadHost || cmd_i.opcode == OpReadHbm);
  assign num_rows = params_cmd ? 32'(cmd_i.length) * ParamRows : 32'(cmd_i.length);

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      write_q      <= 1'b0;
      params_q     <= 1'b0;
      hbm_q        <= 1'b0;
      req_addr_q   <= '0;
      req_left_q   <= '0;
      resp_left_q  <= '0;
      buf_row_q    <= '0;
      rd_left_q    <= '0;
      rd_pending_q <= 1'b0;
    end else if (start_i) begin
      write_q     <= (cmd_i.opcode == OpWriteHost) || (cmd_i.opcode == OpWriteHbm);
      params_q    <= params_cmd;
      hbm_q       <= (cmd_i.opcode == OpReadHbm) || (cmd_i.opcode == OpWriteHbm);
      req_left_q  <= num_rows;
      if (cmd_i.opcode == OpWriteHost || cmd_i.opcode == OpWriteHbm) begin
        // write_hbm: address bits 32-47 from aux
        req_addr_q  <= cmd_i.opcode == OpWriteHbm
                     ? {16'd0, cmd_i.aux[OpdWriteHbmAddrHiLsb+:OpdWriteHbmAddrHiBits], cmd_i.dst}
                     : 64'(cmd_i.dst);
        buf_row_q   <= cmd_i.src;
        rd_left_q   <= num_rows;
        resp_left_q <= '0;
      end else begin
        // read_hbm: address bits 32-47 from aux
        req_addr_q  <= cmd_i.opcode == OpReadHbm
                     ? {16'd0, cmd_i.aux[OpdReadHbmAddrHiLsb+:OpdReadHbmAddrHiBits], cmd_i.src}
                     : 64'(cmd_i.src);
        buf_row_q   <= params_cmd ? cmd_i.dst * ParamRows : cmd_i.dst;
        rd_left_q   <= '0;
        resp_left_q <= num_rows;
      end
    end else begin
      if (req_fire) begin
        req_addr_q <= req_addr_q + 64'(ArrayDim * InputWidth / 8);  // a row's bytes
        req_left_q <= req_left_q - 1'b1;
      end
      if (!write_q && resp_valid && resp_left_q != '0) begin
        resp_left_q <= resp_left_q - 1'b1;
        buf_row_q   <= buf_row_q + 1'b1;
      end
      if (ub_read) begin
        rd_left_q <= rd_left_q - 1'b1;
        buf_row_q <= buf_row_q + 1'b1;
      end
      rd_pending_q <= ub_read;
    end
  end

  tpu_fifo #(
    .Width(ArrayDim * InputWidth),
    .Depth(BufDepth)
  ) u_obuf (
    .clk_i,
    .rst_ni,
    .push_i     (rd_pending_q),
    .push_data_i(ub_rd_data_i),
    .pop_i      (obuf_pop),
    .head_o     (obuf_head),
    .full_o     (obuf_full),
    .empty_o    (obuf_empty),
    .count_o    (obuf_count)
  );

  logic resp_take;
  assign resp_take     = !write_q && resp_valid && (resp_left_q != '0);
  assign ub_wr_en_o    = resp_take && !params_q;
  assign ub_wr_addr_o  = UbAddrWidth'(buf_row_q);
  assign ub_wr_data_o  = resp_data;
  assign par_wr_en_o   = resp_take && params_q;
  assign par_wr_addr_o = ParAddrWidth'(buf_row_q);
  assign par_wr_data_o = resp_data;
  assign ub_rd_en_o    = ub_read;
  assign ub_rd_addr_o  = UbAddrWidth'(buf_row_q);

  assign busy_o = (req_left_q != '0) || (resp_left_q != '0) || (rd_left_q != '0) ||
                  rd_pending_q || !obuf_empty;

  logic unused;
  assign unused = obuf_full;

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
