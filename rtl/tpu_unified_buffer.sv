// Unified buffer: Depth rows of ArrayDim int8 values, the on-chip home of activations.
// The vector unit (bf16 chips) has ports of its own, VecRows rows wide (below). Four kinds of read port (a matrix feeder's and a weight DMA's, one each per matrix unit;
// the host DMA writing results out; the activation unit reading residual rows) and two write ports (the host DMA reading inputs in; the
// VPU), each one row per cycle; reads have one cycle of latency. A gather port (a feeder's
// window stage, one per matrix unit) reads one byte per
// lane from any row and lane, also with one cycle of latency: in silicon, a line buffer
// in front of the buffer that holds the rows the current windows touch (docs/isa.md). The controller's interlocks keep concurrent users on disjoint
// rows and its range checks keep addresses inside the buffer, so there is no arbitration.
`include "tpu_assert.svh"

module tpu_unified_buffer
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned Depth = 1024,  // rows, 2 .. 2^24
  parameter int unsigned Feeders = 1,   // read ports 0 and gather ports: one per matrix unit
  parameter int unsigned VecRows = 2,   // rows of each vector port (tpu_vector_unit: 2 x Sublanes)
  localparam int unsigned AddrWidth = $clog2(Depth),
  localparam int unsigned LaneWidth = $clog2(ArrayDim)
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,  // only for the assertion's reset disable
  // read ports 0: the matrix feeders
  input  logic [Feeders-1:0]                    rd0_en_i,
  input  logic [Feeders-1:0][AddrWidth-1:0]     rd0_addr_i,
  output operand_t [Feeders-1:0][ArrayDim-1:0]  rd0_data_o,
  // read ports 3: the weight DMAs (load_weights)
  input  logic [Feeders-1:0]                    rd3_en_i,
  input  logic [Feeders-1:0][AddrWidth-1:0]     rd3_addr_i,
  output operand_t [Feeders-1:0][ArrayDim-1:0]  rd3_data_o,
  // read port 1: host DMA (write_host)
  input  logic                    rd1_en_i,
  input  logic [AddrWidth-1:0]    rd1_addr_i,
  output operand_t [ArrayDim-1:0] rd1_data_o,
  // read port 2: activation unit (residual rows of activate residual)
  input  logic                    rd2_en_i,
  input  logic [AddrWidth-1:0]    rd2_addr_i,
  output operand_t [ArrayDim-1:0] rd2_data_o,
  // gather ports: the matrix feeders' window stages
  input  logic [Feeders-1:0]                              g_en_i,
  input  logic [Feeders-1:0][ArrayDim-1:0][AddrWidth-1:0] g_row_i,
  input  logic [Feeders-1:0][ArrayDim-1:0][LaneWidth-1:0] g_lane_i,
  input  logic [Feeders-1:0][ArrayDim-1:0]                g_zero_i,
  output operand_t [Feeders-1:0][ArrayDim-1:0]            g_data_o,
  // write port 0: host DMA (read_host)
  input  logic                    wr0_en_i,
  input  logic [AddrWidth-1:0]    wr0_addr_i,
  input  operand_t [ArrayDim-1:0] wr0_data_i,
  // write port 1: VPU (activate)
  input  logic                    wr1_en_i,
  input  logic [AddrWidth-1:0]    wr1_addr_i,
  input  operand_t [ArrayDim-1:0] wr1_data_i,
  // the vector unit's ports: three reading VecRows rows from an address, one writing
  // vw_rows_i rows from one (rows past the buffer's end read as 0; the controller's checks
  // keep the rows used inside it)
  input  logic [2:0]                               vr_en_i,
  input  logic [2:0][AddrWidth-1:0]                vr_addr_i,
  output operand_t [2:0][VecRows-1:0][ArrayDim-1:0] vr_data_o,
  input  logic                                     vw_en_i,
  input  logic [AddrWidth-1:0]                     vw_addr_i,
  input  logic [$clog2(VecRows+1)-1:0]             vw_rows_i,
  input  operand_t [VecRows-1:0][ArrayDim-1:0]      vw_data_i
);

  operand_t [ArrayDim-1:0] mem_q[Depth];

  // The controller's range checks keep every row an instruction names inside the buffer.
  `TPU_ASSERT(RowsInRange, !(rd1_en_i && 32'(rd1_addr_i) >= Depth) &&
                          !(rd2_en_i && 32'(rd2_addr_i) >= Depth) &&
                          !(wr0_en_i && 32'(wr0_addr_i) >= Depth) &&
                          !(wr1_en_i && 32'(wr1_addr_i) >= Depth),
              $error("tpu_unified_buffer: a row address at or beyond %0d", Depth))

  always_ff @(posedge clk_i) begin
    for (int k = 0; k < int'(VecRows); k++)
      if (vw_en_i && 32'(k) < vw_rows_i && 32'(vw_addr_i) + 32'(k) < Depth)
        mem_q[AddrWidth'(32'(vw_addr_i) + 32'(k))] <= vw_data_i[k];
    for (int p = 0; p < 3; p++)
      for (int k = 0; k < int'(VecRows); k++)
        if (vr_en_i[p])
          vr_data_o[p][k] <= 32'(vr_addr_i[p]) + 32'(k) < Depth
                           ? mem_q[AddrWidth'(32'(vr_addr_i[p]) + 32'(k))] : '0;
    if (wr0_en_i) mem_q[wr0_addr_i] <= wr0_data_i;
    if (wr1_en_i) mem_q[wr1_addr_i] <= wr1_data_i;
    if (rd1_en_i) rd1_data_o <= mem_q[rd1_addr_i];
    if (rd2_en_i) rd2_data_o <= mem_q[rd2_addr_i];
  end

  for (genvar f = 0; f < int'(Feeders); f++) begin : g_feeder
    `TPU_ASSERT(FeederRowInRange, !(rd0_en_i[f] && 32'(rd0_addr_i[f]) >= Depth),
                $error("tpu_unified_buffer: feeder %0d read row %0d of %0d", f, rd0_addr_i[f],
                       Depth))
    `TPU_ASSERT(WeightRowInRange, !(rd3_en_i[f] && 32'(rd3_addr_i[f]) >= Depth),
                $error("tpu_unified_buffer: weight DMA %0d read row %0d of %0d", f,
                       rd3_addr_i[f], Depth))
    always_ff @(posedge clk_i) begin
      if (rd0_en_i[f]) rd0_data_o[f] <= mem_q[rd0_addr_i[f]];
      if (rd3_en_i[f]) rd3_data_o[f] <= mem_q[rd3_addr_i[f]];
      if (g_en_i[f]) begin
        for (int l = 0; l < int'(ArrayDim); l++) begin
          g_data_o[f][l] <= g_zero_i[f][l] ? '0 : mem_q[g_row_i[f][l]][g_lane_i[f][l]];
        end
      end
    end
  end

endmodule
