// Vector processing unit: turns accumulator rows (ArrayDim int32 lanes, one output channel
// per lane) into int8 activations, exactly as docs/quantization.md specifies:
//
//   stage 1  sum = acc + bias[lane]                                   (int32)
//   stage 2  y   = (sum * multiplier[lane] + 2^(shift[lane]-1)) >>> shift[lane]   (64-bit)
//            out = clamp(y, relu ? 0 : -128, 127)                     (int8)
//            then, with fn_i, out = table[out + 128], the sigmoid or tanh table of the
//            contract (VpuTable*, docs/vpu.md)
//   stage 3  either optional 2 x 2 pooling over PoolRows consecutive rows (the controller
//            sends the four pixels of a window back to back): average = (sum + 2) >>> 2,
//            or maximum;
//            or pooling over lanes (VpuPoolLanes, a row out per row in): lane l below
//            ArrayDim / 4 the maximum of lanes 4l .. 4l + 3, the lanes above 0 (a row
//            holding a 2 x 2 window's four pixels, channel c of pixel q in lane 4c + q);
//            or, with residual_i, the residual add of an int8 row r (res_data_i, valid with
//            the row in stage 2): out = clamp((out * mul_a + r * mul_b + 2^(shift-1))
//            >>> shift, res_relu ? 0 : -128, 127)                    (64-bit),
//            or its product, with res_i.product: out = clamp((out * r * mul_a +
//            2^(shift-1)) >>> shift, ...)
//
// On a bf16 chip (Format DtypeBf16, docs/bf16.md) the lanes are float32 and the outputs bfloat16:
//
//   stage 1  sum = Fp32Add(acc, bias[lane])                           (bias: float32)
//   stage 2  y = relu ? (sum > 0 ? sum : +0) : sum  (NaN stays NaN);
//            out = Bf16Round(Fp32Min(y, hi[lane]))  (hi: float32, the multiplier's bits)
//   stage 3  optional 2 x 2 pooling: the maximum (Fp32Max), or
//            Bf16Round(Fp32Quarter(((a + b) + c) + d)) with the adds in float32; over
//            lanes, max(d, max(c, max(b, a))) with Fp32Max, as over rows;
//            or, with residual_i, the residual add of a bf16 row r:
//            out = Bf16Round(ReLU(Fp32Add(PlusZero(out), r)))  (res_i.relu; mul_a,
//            mul_b and shift unused); PlusZero makes a zero or subnormal +0, as the
//            array's columns do, so the sum is the same whichever input came through the
//            array (docs/bf16.md, "Networks")
//   (no tables and no product: the controller refuses them on a bf16 chip)
//
// One row per cycle in, fully pipelined; out_valid_o follows in_valid_i by 2 cycles
// without pooling, 3 with the residual or pooling over lanes, and once per PoolRows input
// rows with pooling over rows.
module tpu_vpu
  import tpu_pkg::*;
#(
  parameter dtype_e Format = DtypeInt8,  // the number format (tpu_pkg.sv)
  localparam bit Bf16 = Format == DtypeBf16,
  localparam type operand_t = logic signed [InputWidthOf(Format)-1:0],
  parameter int unsigned ArrayDim = 4  // lanes, 2 .. 256
) (
  input  logic                           clk_i,
  input  logic                           rst_ni,
  // configuration, held stable while rows flow
  input  acc_t     [ArrayDim-1:0]        bias_i,
  input  logic     [ArrayDim-1:0][31:0]  multiplier_i,  // in [0, 2^31)
  input  logic     [ArrayDim-1:0][5:0]   shift_i,       // in [1, 62]
  input  logic                           relu_i,
  input  vpu_fn_e                        fn_i,
  input  vpu_pool_e                      pool_i,
  input  logic                           residual_i,  // add res_data_i (not with pooling)
  input  residual_t                      res_i,       // its multipliers, shift and ReLU
  input  operand_t [ArrayDim-1:0]        res_data_i,  // the residual row of the stage-2 row
  // accumulator rows in
  input  logic                           in_valid_i,
  input  acc_t     [ArrayDim-1:0]        in_data_i,
  // int8 rows out
  output logic                           out_valid_o,
  output operand_t [ArrayDim-1:0]        out_data_o
);

  localparam int unsigned PoolRows = 4;  // a 2 x 2 window

  // ---------------------------------------------------------------- stage 1: bias
  logic                  s1_valid_q;
  acc_t [ArrayDim-1:0]   s1_sum_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) s1_valid_q <= 1'b0;
    else s1_valid_q <= in_valid_i;
  end

  always_ff @(posedge clk_i) begin
    for (int l = 0; l < int'(ArrayDim); l++) s1_sum_q[l] <= AccAdd(Format, in_data_i[l], bias_i[l]);
  end

  // ---------------------------------------------------------------- stage 2: requantize
  operand_t [ArrayDim-1:0] requant, clamped;
  always_comb begin
    for (int l = 0; l < int'(ArrayDim); l++) begin
      logic signed [63:0] product, rounded, shifted;
      logic [7:0]         entry;  // the table entry of the clamped value: q + 128
      product = 64'(s1_sum_q[l]) * $signed({32'd0, multiplier_i[l]});
      rounded = product + (64'sd1 <<< (shift_i[l] - 6'd1));
      shifted = rounded >>> shift_i[l];
      if (shifted > 64'sd127) clamped[l] = operand_t'(127);
      else if (relu_i && shifted < 64'sd0) clamped[l] = operand_t'(0);
      else if (shifted < -64'sd128) clamped[l] = operand_t'(-128);
      else clamped[l] = operand_t'(shifted[7:0]);
      entry = {~clamped[l][7], clamped[l][6:0]};
      unique case (fn_i)
        VpuFnSigmoid: requant[l] = operand_t'(VpuTableSigmoid[entry]);
        VpuFnTanh:    requant[l] = operand_t'(VpuTableTanh[entry]);
        default:      requant[l] = clamped[l];
      endcase
      if (Bf16) requant[l] = operand_t'(Bf16Activate(s1_sum_q[l], relu_i, multiplier_i[l]));
    end
  end

  logic                    s2_valid_q;
  operand_t [ArrayDim-1:0] s2_data_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) s2_valid_q <= 1'b0;
    else s2_valid_q <= s1_valid_q;
  end

  always_ff @(posedge clk_i) s2_data_q <= requant;

  // ---------------------------------------------------------------- stage 3: pooling
  // Running sum (int8: 10 bits hold four values; bf16: float32) and maximum of the window
  // so far.
  localparam int unsigned SumWidth = Bf16 ? 32 : 10;
  logic [1:0]                             pool_count_q;
  logic signed [ArrayDim-1:0][SumWidth-1:0] pool_sum_q;
  operand_t [ArrayDim-1:0]         pool_max_q;
  logic                            pool_last;
  assign pool_last = (pool_count_q == 2'(PoolRows - 1));

  logic                    pool_valid_q;
  operand_t [ArrayDim-1:0] pool_data_q;

  // Over lanes: lane l (below ArrayDim / 4) the maximum of lanes 4l .. 4l + 3 of the row.
  operand_t [ArrayDim-1:0] lanes_max;
  for (genvar l = 0; l < int'(ArrayDim); l++) begin : gen_lanes_max
    if (l < int'(ArrayDim / 4)) begin : gen_window
      always_comb begin
        operand_t m;
        m = s2_data_q[4*l];
        for (int q = 1; q < 4; q++) begin
          if (Bf16) m = operand_t'(Fp32Max(32'({s2_data_q[4*l+q], 16'h0}), 32'({m, 16'h0})) >> 16);
          else if (s2_data_q[4*l+q] > m) m = s2_data_q[4*l+q];
        end
        lanes_max[l] = m;
      end
    end else begin : gen_zero
      assign lanes_max[l] = '0;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      pool_count_q <= '0;
      pool_valid_q <= 1'b0;
    end else begin
      pool_valid_q <= s2_valid_q && (pool_i == VpuPoolLanes ||
                                     (pool_last && pool_i != VpuPoolNone));
      if (s2_valid_q && pool_i != VpuPoolNone && pool_i != VpuPoolLanes)
        pool_count_q <= pool_count_q + 2'd1;
    end
  end

  always_ff @(posedge clk_i) begin
    if (s2_valid_q) begin
      for (int l = 0; l < int'(ArrayDim); l++) begin
        logic signed [SumWidth-1:0] sum;
        operand_t mx;
        if (Bf16) begin
          sum = (pool_count_q == 2'd0) ? SumWidth'(32'({s2_data_q[l], 16'h0}))
              : SumWidth'(Fp32Add(32'(pool_sum_q[l]), 32'({s2_data_q[l], 16'h0})));
          mx = (pool_count_q == 2'd0) ? s2_data_q[l]
             : operand_t'(Fp32Max(32'({s2_data_q[l], 16'h0}), 32'({pool_max_q[l], 16'h0})) >> 16);
        end else begin
          sum = (pool_count_q == 2'd0) ? SumWidth'(s2_data_q[l])
              : pool_sum_q[l] + SumWidth'(s2_data_q[l]);
          mx = (pool_count_q == 2'd0 || s2_data_q[l] > pool_max_q[l]) ? s2_data_q[l]
                                                                        : pool_max_q[l];
        end
        pool_sum_q[l] <= sum;
        pool_max_q[l] <= mx;
        // int8: floor((sum + 2) / 4) is an arithmetic shift by 2.
        if (pool_i == VpuPoolLanes) pool_data_q[l] <= lanes_max[l];
        else if (pool_i == VpuPoolMax) pool_data_q[l] <= mx;
        else if (Bf16) pool_data_q[l] <= operand_t'(Bf16Round(Fp32Quarter(32'(sum))));
        else pool_data_q[l] <= operand_t'((sum + SumWidth'(2)) >>> 2);
      end
    end
  end

  // ---------------------------------------------------------------- stage 3: residual
  // A float32 zero or subnormal as +0, anything else as it is: Fp32Add(+0, x) but for
  // NaN's payload (the sum that follows makes any NaN the canonical one).
  function automatic logic [31:0] PlusZero(logic [31:0] x);
    return (x[30:23] == 8'h00) ? 32'h0 : x;
  endfunction

  operand_t [ArrayDim-1:0] added;
  always_comb begin
    for (int l = 0; l < int'(ArrayDim); l++) begin
      logic signed [63:0] sum, shifted;
      if (res_i.product)
        sum = 64'(s2_data_q[l]) * 64'(res_data_i[l]) * $signed({32'd0, res_i.mul_a}) +
              (64'sd1 <<< (res_i.shift - 6'd1));
      else
        sum = 64'(s2_data_q[l]) * $signed({32'd0, res_i.mul_a}) +
              64'(res_data_i[l]) * $signed({32'd0, res_i.mul_b}) +
              (64'sd1 <<< (res_i.shift - 6'd1));
      shifted = sum >>> res_i.shift;
      if (shifted > 64'sd127) added[l] = operand_t'(127);
      else if (res_i.relu && shifted < 64'sd0) added[l] = operand_t'(0);
      else if (shifted < -64'sd128) added[l] = operand_t'(-128);
      else added[l] = operand_t'(shifted[7:0]);
      if (Bf16)
        added[l] = operand_t'(Bf16Activate(Fp32Add(PlusZero(32'({s2_data_q[l], 16'h0})),
                                                   32'({res_data_i[l], 16'h0})),
                                           res_i.relu, 32'h7f80_0000));
    end
  end

  logic                    s3_valid_q;
  operand_t [ArrayDim-1:0] s3_data_q;

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) s3_valid_q <= 1'b0;
    else s3_valid_q <= s2_valid_q && residual_i;
  end

  always_ff @(posedge clk_i) s3_data_q <= added;

  assign out_valid_o = residual_i ? s3_valid_q
                     : (pool_i == VpuPoolNone) ? s2_valid_q : pool_valid_q;
  assign out_data_o  = residual_i ? s3_data_q
                     : (pool_i == VpuPoolNone) ? s2_data_q : pool_data_q;

  // Per-lane views of the packed configuration and pipeline registers, for waveforms
  // (traces/vpu.gtkw): a viewer shows a packed array as one wide vector.
  /* verilator lint_off UNUSEDSIGNAL */
  for (genvar l = 0; l < int'(ArrayDim); l++) begin : gen_lane
    acc_t        acc_in, bias, sum;
    logic [31:0] multiplier;
    logic [5:0]  shift;
    operand_t    requantized, residual, out;
    assign acc_in      = in_data_i[l];
    assign bias        = bias_i[l];
    assign multiplier  = multiplier_i[l];
    assign shift       = shift_i[l];
    assign sum         = s1_sum_q[l];
    assign requantized = s2_data_q[l];
    assign residual    = res_data_i[l];
    assign out         = out_data_o[l];
  end
  /* verilator lint_on UNUSEDSIGNAL */

  logic unused_res;
  assign unused_res = res_i.valid ^ (^res_i.ub);

endmodule
