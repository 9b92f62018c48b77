// Weight-memory DMA engine: runs read_weights, fetching tiles (ArrayDim rows of ArrayDim
// int8 weights) row by row into the weight FIFO, from a 48-bit byte address (src, and aux
// for bits 32-47). It only asks for a row when the FIFO
// will have room for it, counting rows still on their way, so the FIFO never overflows
// however long the memory takes. Memory-side outputs depend on registers only.
module tpu_weight_dma
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam type operand_t = logic signed [InputWidth-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned FifoRows = 4 * ArrayDim,
  localparam int unsigned CountWidth = $clog2(FifoRows + 1)
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
  // weight FIFO
  input  logic [CountWidth-1:0]   fifo_count_i,
  output logic                    fifo_push_o,
  output operand_t [ArrayDim-1:0] fifo_data_o,
  output logic                    fifo_stall_o  // rows left to fetch, but no room for them
);

  logic [63:0]           req_addr_q;
  logic [31:0]           req_left_q, resp_left_q;
  logic [CountWidth-1:0] outstanding_q;  // requested rows not yet back
  logic                  room, req_fire, resp_take;

  assign room            = (32'(outstanding_q) + 32'(fifo_count_i)) < FifoRows;
  assign mem_req_valid_o = (req_left_q != '0) && room;
  assign mem_req_addr_o  = req_addr_q;
  assign req_fire        = mem_req_valid_o && mem_req_ready_i;
  assign resp_take       = mem_resp_valid_i && (resp_left_q != '0);
  assign mem_stall_o     = mem_req_valid_o && !mem_req_ready_i;
  assign fifo_stall_o    = (req_left_q != '0) && !room;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      req_addr_q    <= '0;
      req_left_q    <= '0;
      resp_left_q   <= '0;
      outstanding_q <= '0;
    end else if (start_i) begin
      req_addr_q  <= {16'd0, cmd_i.aux[OpdReadWeightsAddrHiLsb+:OpdReadWeightsAddrHiBits],
                      cmd_i.src};
      req_left_q  <= 32'(cmd_i.length) * ArrayDim;
      resp_left_q <= 32'(cmd_i.length) * ArrayDim;
    end else begin
      if (req_fire) begin
        req_addr_q <= req_addr_q + 64'(ArrayDim * InputWidth / 8);  // a row's bytes
        req_left_q <= req_left_q - 1'b1;
      end
      if (resp_take) resp_left_q <= resp_left_q - 1'b1;
      outstanding_q <= outstanding_q + CountWidth'(req_fire) - CountWidth'(resp_take);
    end
  end

  assign fifo_push_o = resp_take;
  assign fifo_data_o = mem_resp_data_i;
  assign busy_o      = (req_left_q != '0) || (resp_left_q != '0);

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
