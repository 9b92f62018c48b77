// A chip of Cores cores (tpu_top each: its own controller and instruction stream, unified
// buffer, Mxus matrix units with their weight FIFOs and accumulators, and vector unit) that share the two
// external memories. The host link has one port, and a round-robin arbiter
// (tpu_mem_arbiter) gives it to one core's request per cycle: requests leave tagged with
// their core; read rows come back with the tag and go to that core alone, the data wired to
// every core. The weight (HBM) memory has a port per weight DMA (a matrix unit's: core c's
// unit m is port c x (Mxus + 1) + m) and one per host DMA (read_hbm and write_hbm: core
// c's is port c x (Mxus + 1) + Mxus, its write flag and row hb_req_write_o[c] and
// hb_req_data_o[c]), whose requests take turns at the memory's one channel outside
// the chip (contract/memory_channel.h, PortTurns: together the DMAs move up to the memory's
// bytes per cycle, each at most a row a cycle). Both memories are one address space for all
// cores.
//
// Per core, as tpu_top's own ports: the instruction stream, the weight-memory ports, the
// status, obs_o and the register file (reg_core_i picks the core that reg_addr_i reads). A
// core sees a memory as ready only in the cycles in which its request is taken, so waiting
// for another core's turn counts as a memory stall in its counters, as waiting for the
// memory itself does.
//
// Barriers (docs/isa.md, "Several cores"): every core sees which cores wait at a barrier
// or have halted (arrived), and a core's barrier goes when every core of its mask has.
module tpu_chip
  import tpu_pkg::*;
#(
  // The number format: dtype_e's number (a build sets a top's parameters as numbers).
  parameter int unsigned Dtype = DtypeInt8,
  localparam dtype_e Format = dtype_e'(Dtype),
  localparam int unsigned InputWidth = InputWidthOf(Format),
  parameter int unsigned Cores = 2,         // 1 .. 16
  parameter int unsigned ArrayDim = 4,      // 2 .. 512
  parameter int unsigned AccDepth = 1024,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned WfifoTiles = 4,
  parameter int unsigned ParamSets = 32,
  parameter int unsigned IqDepth = 16,
  parameter bit          CompactArray = 1'b0,
  parameter int unsigned Mxus = 1,          // matrix units per core, 1 .. 4
  parameter int unsigned VectorSublanes = 1,  // the vector unit's rows a cycle (bf16)
  localparam int unsigned RowWidth = ArrayDim * InputWidth,
  localparam int unsigned IdWidth = (Cores > 1) ? $clog2(Cores) : 1,
  localparam int unsigned Wp = Mxus + 1  // weight-memory ports per core
) (
  input  logic                                clk_i,
  /* verilator lint_off SYNCASYNCNET */
  input  logic                                rst_ni,
  /* verilator lint_on SYNCASYNCNET */
  // instructions, one stream per core
  input  logic [Cores-1:0]                    instr_valid_i,
  output logic [Cores-1:0]                    instr_ready_o,
  input  logic [Cores-1:0][InstrWidth-1:0]    instr_i,
  // external memory sizes in bytes
  input  logic [31:0]                         hm_size_i,
  input  logic [63:0]                         wm_size_i,
  // host memory port, requests tagged with their core
  output logic                                hm_req_valid_o,
  input  logic                                hm_req_ready_i,
  output logic                                hm_req_write_o,
  output logic [31:0]                         hm_req_addr_o,
  output logic [RowWidth-1:0]                 hm_req_data_o,
  output logic [IdWidth-1:0]                  hm_req_id_o,
  input  logic                                hm_resp_valid_i,
  input  logic [IdWidth-1:0]                  hm_resp_id_i,
  input  logic [RowWidth-1:0]                 hm_resp_data_i,
  // weight memory: Wp ports per core, its matrix units' (core c's unit m: c x Wp + m), then
  // its host DMA's (c x Wp + Mxus), the one that writes too
  output logic [Cores*Wp-1:0]                 wm_req_valid_o,
  input  logic [Cores*Wp-1:0]                 wm_req_ready_i,
  output logic [Cores*Wp-1:0][63:0]           wm_req_addr_o,
  input  logic [Cores*Wp-1:0]                 wm_resp_valid_i,
  input  logic [Cores*Wp-1:0][RowWidth-1:0]   wm_resp_data_i,
  output logic [Cores-1:0]                    hb_req_write_o,  // core c's host DMA port writes
  output logic [Cores-1:0][RowWidth-1:0]      hb_req_data_o,   // ... this row
  // the cores' own host requests (before arbitration): the system forms each core's memory
  // stalls (obs) from them, as it does for one core's ports
  output logic [Cores-1:0]                    hm_core_valid_o,
  // status, per core (tpu_top's)
  output logic [Cores-1:0]                    halted_o,
  output logic [Cores-1:0][3:0]               status_o,
  output logic [Cores-1:0]                    idle_o,
  output logic [Cores-1:0]                    progress_o,
  output logic [Cores-1:0][NumUnits-1:0]      unit_busy_o,
  output logic [Cores-1:0][3:0]               mxu_busy_o,
  output logic [Cores-1:0][2:0]               issue_o,
  output logic [Cores-1:0]                    wait_weights_o,
  output logic [Cores-1:0][5:0]               obs_o,
  // register files (combinational read): register reg_addr_i of core reg_core_i
  input  logic [IdWidth-1:0]                  reg_core_i,
  input  logic [7:0]                          reg_addr_i,
  output logic [63:0]                         reg_data_o
);

  localparam int unsigned HmWidth = 1 + 32 + RowWidth;  // write, address, data

  logic [Cores-1:0]               hm_valid, hm_ready, hm_write, hm_resp_valid;
  logic [Cores-1:0][31:0]         hm_addr;
  logic [Cores-1:0][RowWidth-1:0] hm_data;
  logic [Cores-1:0][HmWidth-1:0]  hm_req;
  logic [HmWidth-1:0]             hm_mem_req;
  logic [Cores-1:0][63:0]         reg_data;
  logic [Cores-1:0]               at_barrier, arrived_cores;
  logic [15:0]                    arrived;

  assign arrived_cores = at_barrier | halted_o;
  assign arrived       = 16'(arrived_cores);

  for (genvar c = 0; c < Cores; c++) begin : gen_core
    tpu_top #(
      .Dtype(Dtype),
      .ArrayDim    (ArrayDim),
      .AccDepth    (AccDepth),
      .UbDepth     (UbDepth),
      .WfifoTiles  (WfifoTiles),
      .ParamSets   (ParamSets),
      .IqDepth     (IqDepth),
      .CompactArray(CompactArray),
      .Mxus        (Mxus),
      .VectorSublanes(VectorSublanes),
      .Cores       (Cores),
      .CoreId      (c)
    ) u_core (
      .clk_i,
      .rst_ni,
      .instr_valid_i  (instr_valid_i[c]),
      .instr_ready_o  (instr_ready_o[c]),
      .instr_i        (instr_i[c]),
      .hm_size_i,
      .wm_size_i,
      .hm_req_valid_o (hm_valid[c]),
      .hm_req_ready_i (hm_ready[c]),
      .hm_req_write_o (hm_write[c]),
      .hm_req_addr_o  (hm_addr[c]),
      .hm_req_data_o  (hm_data[c]),
      .hm_resp_valid_i(hm_resp_valid[c]),
      .hm_resp_data_i,
      .wm_req_valid_o (wm_req_valid_o[c*Wp+:Mxus]),
      .wm_req_ready_i (wm_req_ready_i[c*Wp+:Mxus]),
      .wm_req_addr_o  (wm_req_addr_o[c*Wp+:Mxus]),
      .wm_resp_valid_i(wm_resp_valid_i[c*Wp+:Mxus]),
      .wm_resp_data_i (wm_resp_data_i[c*Wp+:Mxus]),
      .hb_req_valid_o (wm_req_valid_o[c*Wp+Mxus]),
      .hb_req_ready_i (wm_req_ready_i[c*Wp+Mxus]),
      .hb_req_write_o (hb_req_write_o[c]),
      .hb_req_addr_o  (wm_req_addr_o[c*Wp+Mxus]),
      .hb_req_data_o  (hb_req_data_o[c]),
      .hb_resp_valid_i(wm_resp_valid_i[c*Wp+Mxus]),
      .hb_resp_data_i (wm_resp_data_i[c*Wp+Mxus]),
      .halted_o       (halted_o[c]),
      .status_o       (status_o[c]),
      .idle_o         (idle_o[c]),
      .progress_o     (progress_o[c]),
      .unit_busy_o    (unit_busy_o[c]),
      .mxu_busy_o     (mxu_busy_o[c]),
      .issue_o        (issue_o[c]),
      .wait_weights_o (wait_weights_o[c]),
      .obs_o          (obs_o[c]),
      .arrived_i      (arrived),
      .at_barrier_o   (at_barrier[c]),
      .reg_addr_i,
      .reg_data_o     (reg_data[c])
    );
    assign hm_req[c] = {hm_write[c], hm_addr[c], hm_data[c]};
  end

  tpu_mem_arbiter #(
    .Cores(Cores),
    .Width(HmWidth)
  ) u_host_arbiter (
    .clk_i,
    .rst_ni,
    .req_valid_i     (hm_valid),
    .req_ready_o     (hm_ready),
    .req_i           (hm_req),
    .mem_req_valid_o (hm_req_valid_o),
    .mem_req_ready_i (hm_req_ready_i),
    .mem_req_o       (hm_mem_req),
    .mem_req_id_o    (hm_req_id_o),
    .mem_resp_valid_i(hm_resp_valid_i),
    .mem_resp_id_i   (hm_resp_id_i),
    .resp_valid_o    (hm_resp_valid)
  );
  assign {hm_req_write_o, hm_req_addr_o, hm_req_data_o} = hm_mem_req;

  assign hm_core_valid_o = hm_valid;

  // A core number past the last reads zeros.
  assign reg_data_o = (32'(reg_core_i) < Cores) ? reg_data[reg_core_i] : '0;

endmodule
