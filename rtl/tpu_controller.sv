// Controller: the instruction queue, decode, issue and the status register.
//
// Instructions arrive from the host on a valid/ready port and wait in a queue. The head
// of the queue is decoded and checked (opcode, flags, lengths, every address range); a
// bad instruction sets the status register and halts the chip before anything moves. A
// good one issues, in program order, to its unit (host DMA, weight DMA, matrix feeder,
// activation unit) once the unit is free and no other unit still uses the rows it will
// touch: each unit's footprint (unified-buffer rows, accumulator rows, parameter sets,
// read or written) is kept while the unit is busy, and an instruction waits while its
// footprint overlaps one that is written by either side. So units overlap whenever the
// data allows (weights stream into the FIFO while a matmul runs, the next matmul runs
// while the previous tile is activated) and nobody ever reads stale data. The matrix
// unit counts as busy until its last row has landed in the accumulators.
//
// The weight memory counts as one range: a write_hbm waits while a weight DMA runs a
// read_weights, and a read_weights while the host DMA runs a write_hbm (counted as its
// unit busy), so no weight DMA reads a row that a write_hbm is changing.
//
// A core of several matrix units (Mxus) keeps a feeder footprint and a drain footprint per
// unit (and its weight DMA's, for load_weights): `read_weights`, `load_weights`, `matmul` and
// `activate` name theirs (mxu=), a matmul issues when its
// own feeder is free, and accumulator rows overlap only within one unit's accumulators.
//
// On a chip of several cores (tpu_chip) a `barrier` waits like `sync` and then until every
// core of its mask waits at a barrier too or has halted (arrived_i, one bit per core of
// the chip; this core's own bit is its at_barrier_o); the waiting cores see the same
// condition in the same cycle and retire their barriers together.
`include "tpu_assert.svh"

module tpu_controller
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam int unsigned InputWidth = InputWidthOf(Format),
  localparam int unsigned ParamRows = ParamRowsOf(InputWidth),
  localparam bit Bf16 = Format == DtypeBf16,
  parameter int unsigned ArrayDim = 4,
  parameter int unsigned UbDepth = 1024,
  parameter int unsigned AccDepth = 1024,
  parameter int unsigned ParamSets = 8,
  parameter int unsigned IqDepth = 16,
  parameter int unsigned Mxus = 1,    // matrix units, 1 .. 4 (each its own feeder)
  parameter int unsigned Cores = 1,   // cores on the chip: a barrier's mask has Cores bits
  parameter int unsigned CoreId = 0   // this core's bit of a barrier's mask
) (
  input  logic        clk_i,
  input  logic        rst_ni,
  // instructions from the host
  input  logic        instr_valid_i,
  output logic        instr_ready_o,
  input  instr_t      instr_i,
  // sizes of the external memories in bytes (set by the system around the chip)
  input  logic [31:0] hm_size_i,
  input  logic [63:0] wm_size_i,
  // unit status
  input  logic        hdma_busy_i,
  input  logic [Mxus-1:0] wdma_busy_i,  // each matrix unit's weight DMA
  // per matrix unit: its feeder still has rows to hand over; ... or rows are still in the
  // unit; the last row of a matmul entered its array
  input  logic [Mxus-1:0] feed_busy_i,
  input  logic [Mxus-1:0] mxu_busy_i,
  input  logic [Mxus-1:0] mxu_last_i,
  input  logic        act_busy_i,
  input  logic        vec_busy_i,
  // barriers: which cores of the chip wait at a barrier or have halted (bit c: core c)
  input  logic [15:0] arrived_i,
  output logic        at_barrier_o,  // a good barrier at the head, every unit idle
  // dispatch: the head instruction and one start pulse per unit
  output instr_t      cmd_o,
  output window_t     window_o,  // the window set by the last set_window (the feeder's)
  output residual_t   residual_o,  // the residual set by the last set_residual (the VPU's)
  output logic        hdma_start_o,
  output logic        wdma_start_o,
  output logic        feed_start_o,  // the matmul's unit: its mxu= (cmd_o)
  output logic        act_start_o,
  output logic        vec_start_o,
  // status
  output logic        halted_o,
  output status_e     status_o,
  output logic [31:0] error_pc_o,
  output logic [31:0] retired_o,
  output issue_e      issue_o,
  output logic        idle_o  // nothing queued, every unit idle, not halted
);

  // ---------------------------------------------------------------- instruction queue
  logic   iq_full, iq_empty, pop;
  logic [$clog2(IqDepth+1)-1:0] iq_count;
  instr_t head;

  tpu_fifo #(
    .Width(InstrWidth),
    .Depth(IqDepth)
  ) u_iq (
    .clk_i,
    .rst_ni,
    .push_i     (instr_valid_i && instr_ready_o),
    .push_data_i(instr_i),
    .pop_i      (pop),
    .head_o     (head),
    .full_o     (iq_full),
    .empty_o    (iq_empty),
    .count_o    (iq_count)
  );

  assign instr_ready_o = !iq_full;

  // ---------------------------------------------------------------- footprints
  // ub2, ub3: more ranges of unified-buffer rows that are only read (activate residual's;
  // a vector instruction's a and b).
  typedef struct packed {
    logic        ub_use, ub_wr;
    logic [31:0] ub_lo, ub_hi;
    logic        ub2_use;
    logic [31:0] ub2_lo, ub2_hi;
    logic        ub3_use;
    logic [31:0] ub3_lo, ub3_hi;
    logic        acc_use, acc_wr;
    logic [1:0]  acc_mxu;  // whose accumulators
    logic [31:0] acc_lo, acc_hi;
    logic        par_use, par_wr;
    logic [31:0] par_lo, par_hi;
    logic        wm_rd, wm_wr;  // reads, writes the weight memory (all of it)
  } footprint_t;

  function automatic logic overlaps(logic [31:0] a_lo, logic [31:0] a_hi, logic [31:0] b_lo,
                                    logic [31:0] b_hi);
    return (a_lo < b_hi) && (b_lo < a_hi);
  endfunction

  // Where [start, start + count) lies relative to a memory of `size` units.
  function automatic status_e range_check(logic [63:0] start, logic [63:0] count,
                                          logic [63:0] size);
    if (start >= size) return StatusAddressOutOfRange;
    if (start + count > size) return StatusBufferOverflow;
    return StatusOk;
  endfunction

  function automatic status_e first_error(status_e a, status_e b);
    return (a != StatusOk) ? a : b;
  endfunction

  // Two row ranges that are the same or apart (a vector instruction's result and operand).
  function automatic logic same_or_apart(logic [63:0] a_lo, logic [63:0] a_hi,
                                         logic [63:0] b_lo, logic [63:0] b_hi);
    return (a_lo == b_lo && a_hi == b_hi) || a_hi <= b_lo || b_hi <= a_lo;
  endfunction

  localparam logic [63:0] N = 64'(ArrayDim);
  localparam logic [63:0] RowBytes = 64'(ArrayDim * InputWidth / 8);

  logic [7:0]  op, flags;
  logic [1:0]  mxu;       // read_weights, matmul, activate: the matrix unit (mxu=)
  logic        mxu_bad;   // ... past the core's last
  logic [7:0]  mxu_bits;  // the flag bits that hold it
  logic [63:0] len, src, dst, aux, out_rows, wm_addr, hbm_addr, hbm_wr_addr;
  logic        pooled;
  status_e     check;
  footprint_t  fp;

  // read_host and read_hbm: `len` rows from `addr` of a memory of `size` bytes into buffer
  // rows [dst, dst + len), or, with `params`, parameter sets [dst, dst + len) of ParamRows
  // rows each: the range checks, and the footprint (the rows or sets written).
  function automatic status_e read_check(logic [63:0] addr, logic [63:0] size, logic params);
    return params ? first_error(range_check(addr, len * ParamRows * RowBytes, size),
                                range_check(dst, len, 64'(ParamSets)))
                  : first_error(range_check(addr, len * RowBytes, size),
                                range_check(dst, len, 64'(UbDepth)));
  endfunction
  function automatic footprint_t read_fp(logic params);
    footprint_t f = '0;
    f.ub_use  = !params;
    f.ub_wr   = 1'b1;
    f.ub_lo   = 32'(dst);
    f.ub_hi   = 32'(dst + len);
    f.par_use = params;
    f.par_wr  = 1'b1;
    f.par_lo  = 32'(dst);
    f.par_hi  = 32'(dst + len);
    return f;
  endfunction

  // The window geometry: set by set_window when it issues, used by matmul window.
  window_t     win_q, win_new;
  logic [63:0] step, win_rows, win_tiles, win_pixels, act_step;
  logic        win_bad;

  // vector: the operation, its kind, the buffer rows a row of a, b and the result takes, the
  // result's rows, and the three ranges.
  vector_op_e   vop;
  vector_kind_e vkind;
  logic [63:0]  vb, vwa, vwb, vwo, vout, va_hi, vb_hi, vd_hi;
  logic         vuses_b;
  assign vop     = vector_op_e'(head.aux[OpdVectorOpLsb+:OpdVectorOpBits]);
  assign vkind   = VectorKind(vop);
  assign vb      = 64'(head.aux[OpdVectorBLsb+:OpdVectorBBits]);
  assign vwa     = head.flags[FlagA32] ? 64'd2 : 64'd1;
  assign vwb     = head.flags[FlagB32] ? 64'd2 : 64'd1;
  assign vwo     = head.flags[FlagO32] ? 64'd2 : 64'd1;
  assign vuses_b = vkind == VkBinary || vkind == VkSelect;
  assign vout    = vkind == VkRows ? 64'd1 : 64'(head.length);
  assign va_hi   = 64'(head.src) + 64'(head.length) * vwa;
  assign vb_hi   = vb + (head.flags[FlagBcast] ? 64'd1 : 64'(head.length)) * vwb;
  assign vd_hi   = 64'(head.dst) + vout * vwo;

  // The program's format: int8 from reset, bf16 once a set_format dtype=bf16 has issued.
  logic        bf16_q;

  // The residual: set by set_residual when it issues, used by activate residual.
  residual_t   res_q, res_new;
  logic        res_bad;
  always_comb begin
    res_new       = '0;
    res_new.valid = 1'b1;
    res_new.relu  = head.flags[FlagResidualRelu];
    res_new.product = head.flags[FlagProduct];
    res_new.shift = head.length[OpdSetResidualShiftLsb+:OpdSetResidualShiftBits];
    res_new.mul_a = head.src;
    res_new.mul_b = head.aux;
    res_new.ub    = head.dst;
    // The shift in 1..62, no bits above it, multipliers below 2^31, no mul_b with product.
    res_bad = res_new.shift == '0 || res_new.shift > 6'd62 ||
              (head.length >> OpdSetResidualShiftBits) != '0 || head.src[31] || head.aux[31] ||
              (res_new.product && head.aux != '0);
  end

  // set_window's fields (docs/isa.md).
  always_comb begin
    win_new             = '0;
    win_new.valid       = 1'b1;
    win_new.pooled      = head.flags[FlagPooled];
    win_new.pad_min     = head.flags[FlagPadMin];
    win_new.dilated     = head.flags[FlagDilated];
    win_new.in_h        = head.src[OpdSetWindowInHLsb+:OpdSetWindowInHBits];
    win_new.in_w        = head.src[OpdSetWindowInWLsb+:OpdSetWindowInWBits];
    win_new.kh          = head.src[OpdSetWindowKhLsb+:OpdSetWindowKhBits];
    win_new.kw          = head.src[OpdSetWindowKwLsb+:OpdSetWindowKwBits];
    win_new.out_h       = head.dst[OpdSetWindowOutHLsb+:OpdSetWindowOutHBits];
    win_new.out_w       = head.dst[OpdSetWindowOutWLsb+:OpdSetWindowOutWBits];
    win_new.stride_y    = head.dst[OpdSetWindowStrideYLsb+:OpdSetWindowStrideYBits];
    win_new.stride_x    = head.dst[OpdSetWindowStrideXLsb+:OpdSetWindowStrideXBits];
    win_new.channels    = head.aux[OpdSetWindowChannelsLsb+:OpdSetWindowChannelsBits];
    win_new.pad_top     = head.aux[OpdSetWindowPadTopLsb+:OpdSetWindowPadTopBits];
    win_new.pad_left    = head.aux[OpdSetWindowPadLeftLsb+:OpdSetWindowPadLeftBits];
    win_new.pixel_bytes = head.length;
    // Consistent: nothing zero, the padding inside the kernel, every output window
    // starting inside the padded map, whole pooling windows, no reserved bits.
    win_bad = win_new.in_h == '0 || win_new.in_w == '0 || win_new.kh == '0 ||
              win_new.kw == '0 || win_new.out_h == '0 || win_new.out_w == '0 ||
              win_new.stride_y == '0 || win_new.stride_x == '0 || win_new.channels == '0 ||
              win_new.pixel_bytes < win_new.channels || win_new.pad_top >= win_new.kh ||
              win_new.pad_left >= win_new.kw ||
              (32'(win_new.out_h) - 32'd1) * 32'(win_new.stride_y) >
                  ((32'(win_new.in_h) - 32'd1) << win_new.dilated) + 32'(win_new.pad_top) ||
              (32'(win_new.out_w) - 32'd1) * 32'(win_new.stride_x) >
                  ((32'(win_new.in_w) - 32'd1) << win_new.dilated) + 32'(win_new.pad_left) ||
              (win_new.pooled && (win_new.out_h[0] || win_new.out_w[0])) ||
              (head.aux >> (OpdSetWindowPadLeftLsb + OpdSetWindowPadLeftBits)) != '0;
  end

  // matmul: rows between the rows read (aux, 0 meaning 1); with window, the rows of the
  // map, its K-tiles and its output pixels.
  assign step       = (aux[OpdMatmulStrideLsb+:OpdMatmulStrideBits] == '0) ? 64'd1
                    : 64'(aux[OpdMatmulStrideLsb+:OpdMatmulStrideBits]);
  assign win_rows   = ((64'(win_q.in_h) * 64'(win_q.in_w) - 64'd1) * 64'(win_q.pixel_bytes) +
                       64'(win_q.channels) + N - 64'd1) / N;
  assign win_tiles  = (64'(win_q.kh) * 64'(win_q.kw) * 64'(win_q.channels) + N - 64'd1) / N;
  assign win_pixels = 64'(win_q.out_h) * 64'(win_q.out_w);
  // activate: rows between the rows written (aux bits 16-31, 0 meaning 1).
  assign act_step   = (aux[OpdActivateStrideLsb+:OpdActivateStrideBits] == '0) ? 64'd1
                    : 64'(aux[OpdActivateStrideLsb+:OpdActivateStrideBits]);

  assign op     = head.opcode;
  assign flags  = head.flags;
  assign len    = 64'(head.length);
  assign src    = 64'(head.src);
  assign dst    = 64'(head.dst);
  assign aux    = 64'(head.aux);
  // 2 x 2 pooling over rows: one of the pooling flags (both: over lanes, a row per row).
  assign pooled = flags[FlagPoolAvg] != flags[FlagPoolMax];
  // mxu= sits at the same bits of read_weights, matmul and activate.
  assign mxu_bits = 8'(((1 << OpdMatmulMxuBits) - 1) << OpdMatmulMxuLsb);
  assign mxu      = flags[OpdMatmulMxuLsb+:OpdMatmulMxuBits];
  assign mxu_bad  = 32'(mxu) >= Mxus;
  assign out_rows = pooled ? len >> 2 : len;
  // read_weights: the weight-memory address, bits 32-47 from aux.
  assign wm_addr  = {16'd0, aux[OpdReadWeightsAddrHiLsb+:OpdReadWeightsAddrHiBits], src[31:0]};
  assign hbm_addr = {16'd0, aux[OpdReadHbmAddrHiLsb+:OpdReadHbmAddrHiBits], src[31:0]};
  assign hbm_wr_addr = {16'd0, aux[OpdWriteHbmAddrHiLsb+:OpdWriteHbmAddrHiBits], dst[31:0]};

  always_comb begin
    check = StatusOk;
    fp    = '0;
    unique case (op)
      OpNop, OpSync, OpHalt: begin
        if (flags != '0) check = StatusBadOperand;
      end
      OpBarrier: begin
        if (flags != '0 || (src >> Cores) != '0) check = StatusBadOperand;
      end
      OpSetWindow: begin
        if ((flags & ~8'((1 << FlagPooled) | (1 << FlagPadMin) | (1 << FlagDilated))) != '0 ||
            len == '0)
          check = StatusBadOperand;
        else if (win_bad) check = StatusBadWindow;
      end
      OpSetResidual: begin
        if ((flags & ~8'((1 << FlagResidualRelu) | (1 << FlagProduct))) != '0 || res_bad)
          check = StatusBadOperand;
      end
      OpSetFormat: begin
        if ((flags & ~8'(1 << FlagBf16)) != '0) check = StatusBadOperand;
        else if (flags[FlagBf16] != Bf16) check = StatusWrongFormat;
      end
      OpReadHost: begin
        if ((flags & ~8'(1 << FlagParams)) != '0 || len == '0) check = StatusBadOperand;
        else check = read_check(src, 64'(hm_size_i), flags[FlagParams]);
        fp = read_fp(flags[FlagParams]);
      end
      OpReadHbm: begin
        if ((flags & ~8'(1 << FlagParams)) != '0 || len == '0 ||
            (aux >> (OpdReadHbmAddrHiLsb + OpdReadHbmAddrHiBits)) != '0)
          check = StatusBadOperand;
        else check = read_check(hbm_addr, wm_size_i, flags[FlagParams]);
        fp = read_fp(flags[FlagParams]);
        fp.wm_rd = 1'b1;
      end
      OpWriteHbm: begin
        if (flags != '0 || len == '0 ||
            (aux >> (OpdWriteHbmAddrHiLsb + OpdWriteHbmAddrHiBits)) != '0)
          check = StatusBadOperand;
        else check = first_error(range_check(src, len, 64'(UbDepth)),
                                 range_check(hbm_wr_addr, len * RowBytes, wm_size_i));
        fp.ub_use = 1'b1;
        fp.ub_lo  = 32'(src);
        fp.ub_hi  = 32'(src + len);
        fp.wm_wr  = 1'b1;
      end
      OpReadWeights: begin
        if ((flags & ~mxu_bits) != '0 || mxu_bad || len == '0 ||
            (aux >> (OpdReadWeightsAddrHiLsb + OpdReadWeightsAddrHiBits)) != '0)
          check = StatusBadOperand;
        else check = range_check(wm_addr, len * N * RowBytes, wm_size_i);
        fp.wm_rd = 1'b1;
      end
      OpLoadWeights: begin
        if ((flags & ~(8'(1 << FlagTranspose) | mxu_bits)) != '0 || mxu_bad || len == '0)
          check = StatusBadOperand;
        else check = range_check(src, len * N, 64'(UbDepth));
        fp.ub_use = 1'b1;
        fp.ub_lo  = 32'(src);
        fp.ub_hi  = 32'(src + len * N);
      end
      OpMatmul: begin
        if ((flags & ~(8'((1 << FlagAccumulate) | (1 << FlagSwitch) | (1 << FlagWindow) |
                          (1 << FlagMax)) | mxu_bits)) != '0 || mxu_bad ||
            (flags[FlagMax] && flags[FlagAccumulate]) ||
            len == '0 || (!flags[FlagWindow] && (aux[31:0] >> OpdMatmulStrideBits) != '0)) begin
          check = StatusBadOperand;
        end else if (flags[FlagWindow]) begin
          if (!win_q.valid || 64'(aux[OpdMatmulKtileLsb+:OpdMatmulKtileBits]) >= win_tiles ||
              64'(aux[OpdMatmulFirstLsb+:OpdMatmulFirstBits]) + len > win_pixels)
            check = StatusBadWindow;
          else
            check = first_error(range_check(src, win_rows, 64'(UbDepth)),
                                range_check(dst, len, 64'(AccDepth)));
        end else begin
          check = first_error(range_check(src, (len - 64'd1) * step + 64'd1, 64'(UbDepth)),
                              range_check(dst, len, 64'(AccDepth)));
        end
        fp.ub_use  = 1'b1;
        fp.ub_lo   = 32'(src);
        fp.ub_hi   = flags[FlagWindow] ? 32'(src + win_rows) : 32'(src + (len - 64'd1) * step + 64'd1);
        fp.acc_use = 1'b1;
        fp.acc_wr  = 1'b1;
        fp.acc_mxu = mxu;
        fp.acc_lo  = 32'(dst);
        fp.acc_hi  = 32'(dst + len);
      end
      OpActivate: begin
        if ((flags & ~(8'((1 << FlagRelu) | (1 << FlagPoolAvg) | (1 << FlagPoolMax) |
                          (1 << FlagResidual) | (1 << FlagSigmoid) | (1 << FlagTanh)) |
                       mxu_bits)) != '0 || mxu_bad ||
            (flags[FlagSigmoid] && flags[FlagTanh]) || len == '0 ||
            (pooled && len[1:0] != 2'd0) ||
            (flags[FlagResidual] &&
             (flags[FlagPoolAvg] || flags[FlagPoolMax] || !res_q.valid))) begin
          check = StatusBadOperand;
        end else begin
          check = first_error(first_error(range_check(src, len, 64'(AccDepth)),
                                          range_check(dst, (out_rows - 64'd1) * act_step + 64'd1,
                                                      64'(UbDepth))),
                              range_check(64'(aux[OpdActivateParamsLsb+:OpdActivateParamsBits]), 1,
                                          64'(ParamSets)));
          if (flags[FlagResidual])
            check = first_error(check, range_check(64'(res_q.ub),
                                                   (out_rows - 64'd1) * act_step + 64'd1,
                                                   64'(UbDepth)));
        end
        fp.acc_use = 1'b1;
        fp.acc_mxu = mxu;
        fp.acc_lo  = 32'(src);
        fp.acc_hi  = 32'(src + len);
        fp.ub_use  = 1'b1;
        fp.ub_wr   = 1'b1;
        fp.ub_lo   = 32'(dst);
        fp.ub_hi   = 32'(dst + (out_rows - 64'd1) * act_step + 64'd1);
        fp.ub2_use = flags[FlagResidual];
        fp.ub2_lo  = res_q.ub;
        fp.ub2_hi  = 32'(64'(res_q.ub) + (out_rows - 64'd1) * act_step + 64'd1);
        fp.par_use = 1'b1;
        fp.par_lo  = 32'(aux[OpdActivateParamsLsb+:OpdActivateParamsBits]);
        fp.par_hi  = 32'(aux[OpdActivateParamsLsb+:OpdActivateParamsBits]) + 32'd1;
      end
      OpVector: begin
        // No reserved flag or operation; no b without an operation that takes one; the
        // result's rows the same as an operand's or apart from them (b's one row apart).
        if ((flags & ~8'((1 << FlagA32) | (1 << FlagB32) | (1 << FlagO32) | (1 << FlagBcast))) != '0 ||
            32'(vop) >= NumVectorOps || len == '0 ||
            (!vuses_b && (flags[FlagB32] || flags[FlagBcast] || vb != '0)))
          check = StatusBadOperand;
        else
          check = first_error(first_error(range_check(src, len * vwa, 64'(UbDepth)),
                                          range_check(vuses_b ? vb : '0,
                                                      vuses_b ? vb_hi - vb : 64'd1, 64'(UbDepth))),
                              range_check(dst, vd_hi - dst, 64'(UbDepth)));
        if (check == StatusOk &&
            (!same_or_apart(dst, vd_hi, src, va_hi) ||
             (vuses_b && (flags[FlagBcast] ? !(vd_hi <= vb || vb_hi <= dst)
                                           : !same_or_apart(dst, vd_hi, vb, vb_hi)))))
          check = StatusBadOperand;
        fp.ub_use  = 1'b1;
        fp.ub_wr   = 1'b1;
        fp.ub_lo   = 32'(dst);
        fp.ub_hi   = 32'(vd_hi);
        fp.ub2_use = 1'b1;
        fp.ub2_lo  = 32'(src);
        fp.ub2_hi  = 32'(va_hi);
        fp.ub3_use = vuses_b;
        fp.ub3_lo  = 32'(vb);
        fp.ub3_hi  = 32'(vb_hi);
      end
      OpWriteHost: begin
        if (flags != '0 || len == '0) check = StatusBadOperand;
        else check = first_error(range_check(src, len, 64'(UbDepth)),
                                 range_check(dst, len * RowBytes, 64'(hm_size_i)));
        fp.ub_use = 1'b1;
        fp.ub_lo  = 32'(src);
        fp.ub_hi  = 32'(src + len);
      end
      default: check = StatusInvalidOpcode;
    endcase
    // The number format (docs/bf16.md): a bf16 chip runs what a set_format dtype=bf16 has
    // declared, and its float32 vector unit has no tables and no residual product.
    if (Bf16 && check != StatusInvalidOpcode && op != OpNop && op != OpSync && op != OpHalt &&
        op != OpSetFormat && op != OpBarrier &&
        (!bf16_q || (op == OpSetResidual && flags[FlagProduct]) ||
         (op == OpActivate && (flags[FlagSigmoid] || flags[FlagTanh]))))
      check = StatusWrongFormat;
    // An int8 chip has no float32 vector unit.
    if (!Bf16 && op == OpVector) check = StatusWrongFormat;
  end

  // Footprints of the instructions the units are running (valid while a unit is busy),
  // each weight DMA's (the unified-buffer rows a load_weights reads; none for read_weights)
  // and, per matrix unit, the accumulator rows of finished matmuls whose last rows are still
  // in the array (for 2 N cycles after the last row entered: then it has landed).
  footprint_t hdma_fp_q, act_fp_q, vec_fp_q;
  footprint_t [Mxus-1:0] mxu_fp_q, drain_fp_q, wdma_fp_q;
  logic [Mxus-1:0][31:0] drain_left_q;
  logic [Mxus-1:0]       draining;
  always_comb
    for (int m = 0; m < int'(Mxus); m++) draining[m] = drain_left_q[m] != '0;

  logic ub_hazard, acc_hazard, par_hazard, wm_hazard;
  always_comb begin
    ub_hazard  = 1'b0;
    acc_hazard = 1'b0;
    par_hazard = 1'b0;
    wm_hazard  = 1'b0;
    for (int u = 0; u < 3 + 3 * int'(Mxus); u++) begin
      footprint_t o;
      logic       busy, same;
      // 0: host DMA, 1: activation unit, then each matrix unit's feeder and drain, then
      // each weight DMA, then the vector unit.
      o    = (u == 0) ? hdma_fp_q : (u == 1) ? act_fp_q
           : (u == 2 + 3 * int'(Mxus)) ? vec_fp_q
           : (u >= 2 + 2 * int'(Mxus)) ? wdma_fp_q[u - 2 - 2 * int'(Mxus)]
           : (u % 2 == 0) ? mxu_fp_q[(u - 2) / 2] : drain_fp_q[(u - 2) / 2];
      busy = (u == 0) ? hdma_busy_i : (u == 1) ? act_busy_i
           : (u == 2 + 3 * int'(Mxus)) ? vec_busy_i
           : (u >= 2 + 2 * int'(Mxus)) ? wdma_busy_i[u - 2 - 2 * int'(Mxus)]
           : (u % 2 == 0) ? feed_busy_i[(u - 2) / 2] : draining[(u - 2) / 2];
      // A unit's own earlier instructions run in order (matmul after matmul); a matmul
      // and another unit's footprint share no accumulators and both only read the buffer.
      same = (u >= 2) && (u < 2 + 2 * int'(Mxus)) && (op == OpMatmul);
      if (busy && !same) begin
        if (fp.ub_use && o.ub_use && (fp.ub_wr || o.ub_wr) &&
            overlaps(fp.ub_lo, fp.ub_hi, o.ub_lo, o.ub_hi)) ub_hazard = 1'b1;
        // The read-only second ranges against the other side's writes.
        if (fp.ub2_use && o.ub_use && o.ub_wr &&
            overlaps(fp.ub2_lo, fp.ub2_hi, o.ub_lo, o.ub_hi)) ub_hazard = 1'b1;
        if (fp.ub_use && fp.ub_wr && o.ub2_use &&
            overlaps(fp.ub_lo, fp.ub_hi, o.ub2_lo, o.ub2_hi)) ub_hazard = 1'b1;
        if (fp.ub3_use && o.ub_use && o.ub_wr &&
            overlaps(fp.ub3_lo, fp.ub3_hi, o.ub_lo, o.ub_hi)) ub_hazard = 1'b1;
        if (fp.ub_use && fp.ub_wr && o.ub3_use &&
            overlaps(fp.ub_lo, fp.ub_hi, o.ub3_lo, o.ub3_hi)) ub_hazard = 1'b1;
        if (fp.acc_use && o.acc_use && (fp.acc_wr || o.acc_wr) && fp.acc_mxu == o.acc_mxu &&
            overlaps(fp.acc_lo, fp.acc_hi, o.acc_lo, o.acc_hi)) acc_hazard = 1'b1;
        if (fp.par_use && o.par_use && (fp.par_wr || o.par_wr) &&
            overlaps(fp.par_lo, fp.par_hi, o.par_lo, o.par_hi)) par_hazard = 1'b1;
        // The weight memory as one range: write_hbm against read_weights and read_hbm.
        if ((fp.wm_wr && o.wm_rd) || (fp.wm_rd && o.wm_wr)) wm_hazard = 1'b1;
      end
    end
  end

  // ---------------------------------------------------------------- issue
  logic    halted_q;
  status_e status_q;
  logic [31:0] error_pc_q, retired_q;
  logic    all_idle, unit_busy, go;

  logic [3:0] feed_busy4, wdma_busy4;  // feed_busy_i and wdma_busy_i, indexable by any mxu=
  assign feed_busy4 = 4'(feed_busy_i);
  assign wdma_busy4 = 4'(wdma_busy_i);
  assign all_idle = !hdma_busy_i && wdma_busy_i == '0 && mxu_busy_i == '0 && !act_busy_i &&
                    !vec_busy_i;

  // A barrier goes when every core of its mask has arrived (this one included: it has).
  logic [15:0] arrived;
  logic        released;
  assign at_barrier_o = !halted_q && !iq_empty && check == StatusOk && op == OpBarrier &&
                        all_idle;
  assign arrived      = arrived_i | (16'(at_barrier_o) << CoreId);
  assign released     = (~arrived & src[15:0]) == '0;

  always_comb begin
    unique case (op)
      OpReadHost, OpWriteHost, OpReadHbm, OpWriteHbm: unit_busy = hdma_busy_i;
      OpReadWeights, OpLoadWeights: unit_busy = wdma_busy4[mxu];
      OpMatmul:                unit_busy = feed_busy4[mxu];
      OpActivate:              unit_busy = act_busy_i;
      OpVector:                unit_busy = vec_busy_i;
      default:                 unit_busy = 1'b0;
    endcase
  end

  always_comb begin
    go = 1'b0;
    if (halted_q) issue_o = IssueHalted;
    else if (iq_empty) issue_o = IssueWaitInstruction;
    else if (check != StatusOk) issue_o = IssueHalted;
    else if (op == OpSync || op == OpHalt) begin
      issue_o = all_idle ? IssueFire : IssueDrain;
      go      = all_idle;
    end else if (op == OpBarrier) begin  // waiting for the other cores counts as a drain
      issue_o = (at_barrier_o && released) ? IssueFire : IssueDrain;
      go      = at_barrier_o && released;
    end else if (unit_busy || wm_hazard) issue_o = IssueUnitBusy;
    else if (ub_hazard) issue_o = IssueUbHazard;
    else if (acc_hazard) issue_o = IssueAccHazard;
    else if (par_hazard) issue_o = IssueParamHazard;
    else begin
      issue_o = IssueFire;
      go      = 1'b1;
    end
  end

  assign pop          = go;
  assign cmd_o        = head;
  assign window_o     = win_q;
  assign residual_o   = res_q;
  assign hdma_start_o = go && (op == OpReadHost || op == OpWriteHost || op == OpReadHbm ||
                               op == OpWriteHbm);
  assign wdma_start_o = go && (op == OpReadWeights || op == OpLoadWeights);
  assign feed_start_o = go && (op == OpMatmul);
  assign act_start_o  = go && (op == OpActivate);
  assign vec_start_o  = go && (op == OpVector);

  // Next state: a failed check halts the chip with its status; an issued instruction
  // counts, hands its footprint to its unit, and halt stops the chip.
  logic        halted_d;
  status_e     status_d;
  logic [31:0] error_pc_d, retired_d;
  footprint_t  hdma_fp_d, act_fp_d, vec_fp_d;
  footprint_t [Mxus-1:0] mxu_fp_d, drain_fp_d, wdma_fp_d;
  logic [Mxus-1:0][31:0] drain_left_d;
  window_t     win_d;
  residual_t   res_d;

  always_comb begin
    halted_d   = halted_q;
    status_d   = status_q;
    error_pc_d = error_pc_q;
    retired_d  = retired_q;
    hdma_fp_d  = hdma_fp_q;
    act_fp_d   = act_fp_q;
    vec_fp_d   = vec_fp_q;
    mxu_fp_d   = mxu_fp_q;
    wdma_fp_d  = wdma_fp_q;
    if (!halted_q && !iq_empty && check != StatusOk) begin
      halted_d   = 1'b1;
      status_d   = check;
      error_pc_d = retired_q;
    end
    win_d = win_q;
    res_d = res_q;
    if (go) begin
      retired_d = retired_q + 1'b1;
      if (op == OpHalt) halted_d = 1'b1;
      if (op == OpSetWindow) win_d = win_new;
      if (op == OpSetResidual) res_d = res_new;
    end
    if (hdma_start_o) hdma_fp_d = fp;
    if (act_start_o) act_fp_d = fp;
    if (vec_start_o) vec_fp_d = fp;
    // When a matmul's last row enters its array, its accumulator rows pass to that unit's
    // drain footprint (put together with those of its earlier matmuls still draining).
    drain_fp_d = drain_fp_q;
    for (int m = 0; m < int'(Mxus); m++) begin
      if (feed_start_o && 32'(mxu) == m) mxu_fp_d[m] = fp;
      if (wdma_start_o && 32'(mxu) == m) wdma_fp_d[m] = fp;
      drain_left_d[m] = draining[m] ? drain_left_q[m] - 32'd1 : '0;
      if (mxu_last_i[m]) begin
        drain_fp_d[m]         = '0;
        drain_fp_d[m].acc_use = 1'b1;
        drain_fp_d[m].acc_wr  = 1'b1;
        drain_fp_d[m].acc_mxu = mxu_fp_q[m].acc_mxu;
        drain_fp_d[m].acc_lo  = (draining[m] && drain_fp_q[m].acc_lo < mxu_fp_q[m].acc_lo)
                              ? drain_fp_q[m].acc_lo : mxu_fp_q[m].acc_lo;
        drain_fp_d[m].acc_hi  = (draining[m] && drain_fp_q[m].acc_hi > mxu_fp_q[m].acc_hi)
                              ? drain_fp_q[m].acc_hi : mxu_fp_q[m].acc_hi;
        drain_left_d[m]       = 32'(2 * ArrayDim);
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      halted_q   <= 1'b0;
      status_q   <= StatusOk;
      error_pc_q <= '0;
      retired_q  <= '0;
      hdma_fp_q  <= '0;
      act_fp_q   <= '0;
      vec_fp_q   <= '0;
      mxu_fp_q   <= '0;
      wdma_fp_q  <= '0;
      drain_fp_q <= '0;
      drain_left_q <= '0;
      win_q      <= '0;
      res_q      <= '0;
      bf16_q     <= 1'b0;
    end else begin
      halted_q   <= halted_d;
      status_q   <= status_d;
      error_pc_q <= error_pc_d;
      retired_q  <= retired_d;
      hdma_fp_q  <= hdma_fp_d;
      act_fp_q   <= act_fp_d;
      vec_fp_q   <= vec_fp_d;
      mxu_fp_q   <= mxu_fp_d;
      wdma_fp_q  <= wdma_fp_d;
      drain_fp_q <= drain_fp_d;
      drain_left_q <= drain_left_d;
      win_q      <= win_d;
      res_q      <= res_d;
      if (go && op == OpSetFormat) bf16_q <= flags[FlagBf16];
    end
  end

  // An instruction starts one unit, and only one instruction issues per cycle.
  `TPU_ASSERT(OneUnitStarts, $onehot0({hdma_start_o, wdma_start_o, feed_start_o, act_start_o,
                                        vec_start_o}),
              $error("tpu_controller: two units started in one cycle"))

  assign halted_o   = halted_q;
  assign status_o   = status_q;
  assign error_pc_o = error_pc_q;
  assign retired_o  = retired_q;
  assign idle_o     = iq_empty && all_idle && !halted_q;

  logic unused;
  assign unused = ^iq_count ^ (^aux[63:32]);

endmodule
