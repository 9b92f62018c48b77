// The vector unit of a bf16 chip (`vector`, docs/vpu.md "The vector unit"): float32
// operations over unified-buffer rows, Sublanes rows of ArrayDim lanes a cycle, as TPU v2
// and v3's vector unit works on 8 x 128 lanes.
//
// A row of an operand or of the result is one buffer row (bfloat16) or two (float32: the
// high halves of its lanes, then the low halves); the instruction's flags say which. Each
// cycle a group of up to Sublanes rows is read on three read ports of the unit's own (a;
// b, or b's one row with `bcast`; the result rows' old values for `select`), each
// 2 x Sublanes buffer rows wide with one cycle of latency; the next cycle computes the
// group (tpu_pkg's VectorLane, the lane tree, or the running reduction over rows) and
// hands it to a delay line; its rows are written VectorLatency(op) cycles after that, on a
// write port as wide. A reduction over rows writes its one row after the last group.
// The controller keeps other units off the rows while the unit is busy, and its checks
// make the result's rows either the same as an operand's or apart from them, so a group's
// write never reaches rows still to be read.
module tpu_vector_unit
  import tpu_pkg::*;
#(
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned Sublanes = 1,  // rows a cycle
  localparam int unsigned Ports = 2 * Sublanes,  // buffer rows a port moves a cycle
  localparam int unsigned UbAddrWidth = $clog2(UbDepth),
  // Each register as wide as what it holds: a port's rows in a cycle (up to Ports), a group's
  // rows (up to Sublanes), the rows of an instruction (a 16-bit length).
  localparam int unsigned PortRowsWidth = $clog2(Ports + 1),
  localparam int unsigned GroupWidth = $clog2(Sublanes + 1),
  localparam int unsigned LeftWidth = 16
) (
  input  logic                                 clk_i,
  input  logic                                 rst_ni,
  input  logic                                 start_i,
  input  instr_t                               cmd_i,
  output logic                                 busy_o,
  // the read ports: a, b and the result's old rows (c); Ports rows from the address
  output logic [2:0]                           rd_en_o,
  output logic [2:0][UbAddrWidth-1:0]          rd_addr_o,
  output logic [2:0][PortRowsWidth-1:0]        rd_rows_o,  // rows read (the counters)
  input  logic [2:0][Ports-1:0][ArrayDim-1:0][15:0] rd_data_i,
  // the write port: wr_rows_o rows from the address
  output logic                                 wr_en_o,
  output logic [UbAddrWidth-1:0]               wr_addr_o,
  output logic [PortRowsWidth-1:0]             wr_rows_o,
  output logic [Ports-1:0][ArrayDim-1:0][15:0] wr_data_o
);

  typedef logic [Sublanes-1:0][ArrayDim-1:0][31:0] group_t;  // a group's float32 values

  // The instruction, as it started.
  vector_op_e   op_q;
  vector_kind_e kind_q;
  logic         a32_q, b32_q, o32_q, bcast_q;
  logic [3:0]   lat_q;
  logic [LeftWidth-1:0]   left_q;
  logic [UbAddrWidth-1:0] a_addr_q, b_addr_q, d_addr_q;
  // The group read last cycle: its rows, where its results go, whether it is the last.
  logic         vld_q, last_q;
  logic [GroupWidth-1:0]  cnt_q;
  logic [UbAddrWidth-1:0] dst_q;
  // The running reduction over rows, and whether a row has been taken into it yet.
  logic [ArrayDim-1:0][31:0] racc_q;
  logic         rtaken_q;

  logic [GroupWidth-1:0] grp;  // rows in the group read this cycle
  logic         rd_fire;
  assign rd_fire = left_q != '0;
  assign grp     = 32'(left_q) < Sublanes ? GroupWidth'(left_q) : GroupWidth'(Sublanes);

  // The ports: a and c (the result rows) step with the group; b too, unless broadcast.
  logic [1:0] wa, wb, wo;  // buffer rows a row of each takes
  assign wa = a32_q ? 2'd2 : 2'd1;
  assign wb = b32_q ? 2'd2 : 2'd1;
  assign wo = o32_q ? 2'd2 : 2'd1;
  logic uses_b, uses_c;
  assign uses_b = kind_q == VkBinary || kind_q == VkSelect;
  assign uses_c = kind_q == VkSelect;
  assign rd_en_o   = {rd_fire && uses_c, rd_fire && uses_b, rd_fire};
  assign rd_addr_o = {d_addr_q, b_addr_q, a_addr_q};
  assign rd_rows_o = !rd_fire ? '0
                   : {uses_c ? PortRowsWidth'(32'(grp) * 32'(wo)) : '0,
                      !uses_b ? '0 : bcast_q ? PortRowsWidth'(wb) : PortRowsWidth'(32'(grp) * 32'(wb)),
                      PortRowsWidth'(32'(grp) * 32'(wa))};

  // Lane l of row s of a port's rows as float32: one buffer row of bfloat16, or two.
  function automatic logic [31:0] Value(logic [Ports-1:0][ArrayDim-1:0][15:0] rows, int s,
                                        int l, logic fp32);
    if (fp32) return Fp32Canon({rows[2*s][l], rows[2*s+1][l]});
    return Fp32Canon({rows[s][l], 16'h0});
  endfunction

  // The tree of a row's lanes (docs/vpu.md): pairs level by level, an odd one passed up.
  function automatic logic [31:0] LaneTree(logic [ArrayDim-1:0][31:0] v, logic max);
    logic [ArrayDim-1:0][31:0] t;
    int unsigned w;
    t = v;
    w = ArrayDim;
    while (w > 1) begin
      for (int unsigned i = 0; i < w / 2; i++)
        t[i] = max ? Fp32Max(t[2*i], t[2*i+1]) : Fp32Add(t[2*i], t[2*i+1]);
      if (w % 2 == 1) t[w/2] = t[w-1];
      w = (w + 1) / 2;
    end
    return Fp32Canon(t[0]);
  endfunction

  // The group's results (float32), and the reduction over rows with it.
  group_t res;
  logic [ArrayDim-1:0][31:0] racc_d;
  always_comb begin
    logic [ArrayDim-1:0][31:0] row;
    logic [31:0]               tree;
    logic                      taken;
    for (int s = 0; s < int'(Sublanes); s++) res[s] = '0;
    tree   = '0;
    row    = '0;
    racc_d = racc_q;
    taken  = rtaken_q;
    // Only the rows of a group that arrived (a simulation's idle cycles cost nothing here).
    for (int s = 0; s < int'(Sublanes); s++) begin
      if (vld_q && 32'(s) < cnt_q) begin
        for (int l = 0; l < int'(ArrayDim); l++) row[l] = Value(rd_data_i[0], s, l, a32_q);
        if (kind_q == VkLanes) begin
          tree = LaneTree(row, op_q == VopLaneMax);
          for (int l = 0; l < int'(ArrayDim); l++) res[s][l] = tree;
        end else if (kind_q == VkRows) begin
          for (int l = 0; l < int'(ArrayDim); l++)
            racc_d[l] = !taken ? row[l]
                      : op_q == VopRowMax ? Fp32Max(racc_d[l], row[l]) : Fp32Add(racc_d[l], row[l]);
          taken = 1'b1;
        end else begin
          for (int l = 0; l < int'(ArrayDim); l++)
            res[s][l] = VectorLane(op_q, row[l], Value(rd_data_i[1], bcast_q ? 0 : s, l, b32_q),
                                   Value(rd_data_i[2], s, l, o32_q));
        end
      end
    end
    if (kind_q == VkRows) res[0] = racc_d;
  end

  // The results as buffer rows in the result's format.
  logic [Ports-1:0][ArrayDim-1:0][15:0] out_rows;
  always_comb begin
    for (int k = 0; k < int'(Ports); k++) out_rows[k] = '0;
    for (int s = 0; s < int'(Sublanes); s++) begin
      for (int l = 0; l < int'(ArrayDim) && vld_q; l++) begin
        if (o32_q) begin
          out_rows[2*s][l]   = res[s][l][31:16];
          out_rows[2*s+1][l] = res[s][l][15:0];
        end else begin
          out_rows[s][l] = Bf16Round(res[s][l]);
        end
      end
    end
  end

  // The delay line: stage i holds what is written VectorLatency - 1 - i cycles later (its
  // valid bits reset, its rows not).
  typedef logic [Ports-1:0][ArrayDim-1:0][15:0] rows_t;
  logic [VectorMaxLatency-1:0]        line_valid_q;
  logic [VectorMaxLatency-1:0][UbAddrWidth-1:0]   line_addr_q;
  logic [VectorMaxLatency-1:0][PortRowsWidth-1:0] line_rows_q;
  rows_t [VectorMaxLatency-1:0]       line_data_q;
  logic                               enter;
  assign enter = vld_q && (kind_q != VkRows || last_q);

  logic [$clog2(VectorMaxLatency)-1:0] tap;  // the stage the write comes from: VectorLatency(op) - 1
  logic        pending; // a stage the write is still to come from holds rows
  assign tap = $clog2(VectorMaxLatency)'(lat_q - 4'd1);
  always_comb begin
    pending = 1'b0;
    for (int i = 0; i < int'(VectorMaxLatency); i++)
      if (i < int'(lat_q) && line_valid_q[i]) pending = 1'b1;
  end
  assign wr_en_o   = line_valid_q[tap];
  assign wr_addr_o = line_addr_q[tap];
  assign wr_rows_o = line_rows_q[tap];
  assign wr_data_o = line_data_q[tap];
  assign busy_o    = rd_fire || vld_q || pending;

  always_ff @(posedge clk_i)
    if (enter || line_valid_q != '0) line_data_q <= {line_data_q[VectorMaxLatency-2:0], out_rows};

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      op_q     <= VopAdd;
      kind_q   <= VkBinary;
      {a32_q, b32_q, o32_q, bcast_q} <= '0;
      lat_q    <= 4'd1;
      left_q   <= '0;
      a_addr_q <= '0;
      b_addr_q <= '0;
      d_addr_q <= '0;
      vld_q    <= 1'b0;
      last_q   <= 1'b0;
      cnt_q    <= '0;
      dst_q    <= '0;
      for (int l = 0; l < int'(ArrayDim); l++) racc_q[l] <= '0;
      rtaken_q <= 1'b0;
      line_valid_q <= '0;
      line_addr_q  <= '0;
      line_rows_q  <= '0;
    end else begin
      line_valid_q <= {line_valid_q[VectorMaxLatency-2:0], enter};
      line_addr_q  <= {line_addr_q[VectorMaxLatency-2:0], dst_q};
      line_rows_q  <= {line_rows_q[VectorMaxLatency-2:0],
                       PortRowsWidth'((kind_q == VkRows ? 32'd1 : 32'(cnt_q)) * 32'(wo))};
      racc_q <= racc_d;
      rtaken_q <= kind_q == VkRows && (rtaken_q || vld_q) && !(vld_q && last_q);
      vld_q  <= rd_fire;
      last_q <= rd_fire && 32'(left_q) == 32'(grp);
      cnt_q  <= grp;
      dst_q  <= d_addr_q;
      if (start_i) begin
        line_valid_q <= '0;  // what an earlier instruction left past its own latency
        op_q     <= vector_op_e'(cmd_i.aux[OpdVectorOpLsb+:OpdVectorOpBits]);
        kind_q   <= VectorKind(vector_op_e'(cmd_i.aux[OpdVectorOpLsb+:OpdVectorOpBits]));
        lat_q    <= VectorLatency(vector_op_e'(cmd_i.aux[OpdVectorOpLsb+:OpdVectorOpBits]));
        a32_q    <= cmd_i.flags[FlagA32];
        b32_q    <= cmd_i.flags[FlagB32];
        o32_q    <= cmd_i.flags[FlagO32];
        bcast_q  <= cmd_i.flags[FlagBcast];
        left_q   <= LeftWidth'(cmd_i.length);
        a_addr_q <= UbAddrWidth'(cmd_i.src);
        b_addr_q <= UbAddrWidth'(cmd_i.aux[OpdVectorBLsb+:OpdVectorBBits]);
        d_addr_q <= UbAddrWidth'(cmd_i.dst);
      end else if (rd_fire) begin
        left_q   <= left_q - LeftWidth'(grp);
        a_addr_q <= a_addr_q + UbAddrWidth'(32'(grp) * 32'(wa));
        b_addr_q <= bcast_q ? b_addr_q : b_addr_q + UbAddrWidth'(32'(grp) * 32'(wb));
        // A reduction over rows writes one row at dst.
        d_addr_q <= kind_q == VkRows ? d_addr_q : d_addr_q + UbAddrWidth'(32'(grp) * 32'(wo));
      end
    end
  end

  // Each unit uses only some fields of the instruction word.
  logic unused_cmd;
  assign unused_cmd = ^cmd_i;

endmodule
