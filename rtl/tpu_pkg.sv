// Shared widths and types of the tpusim hardware.
package tpu_pkg;

  // The instruction word, opcodes, flags, VPU parameter-set layout, status and issue
  // codes, units, register map and counters, and the number formats (dtype_e, with
  // InputWidthOf): generated from contract/tpu_contract.toml (the one home of those facts)
  // into build/generated/rtl/.
  `include "tpu_contract.svh"

  // The number format, one per built model (docs/bf16.md): each module that holds operands
  // takes it as its typed parameter `Format` (dtype_e; a top module as its number, Dtype,
  // since a build sets a top's parameters as numbers) and derives its operand type from it:
  //   parameter dtype_e Format = DtypeInt8,
  //   localparam type operand_t = logic signed [InputWidthOf(Format)-1:0]
  // int8 operands with int32 partial sums and accumulators (TPU v1), or bfloat16 operands
  // with float32 partial sums and accumulators (TPU v2/v3). The format changes the widths
  // and the arithmetic below (Mac, AccAdd, AccMax, PadMinOf), nothing else: the same
  // registers, handshakes and cycles.
  // Partial sums and accumulators are 32 bits: int32, or float32 bit patterns.
  localparam int unsigned AccWidth = 32;
  // Performance counters are 64 bits wide so that they never wrap in practice.
  localparam int unsigned CounterWidth = 64;

  typedef logic signed [AccWidth-1:0] acc_t;
  typedef logic [CounterWidth-1:0] counter_t;

  // Pooling done by the VPU after requantization.
  typedef enum logic [1:0] {
    VpuPoolNone = 2'd0,
    VpuPoolAvg  = 2'd1,  // 2 x 2 average, rounding half up
    VpuPoolMax  = 2'd2,  // 2 x 2 maximum
    VpuPoolLanes = 2'd3  // maximum of each four adjacent lanes (both pooling flags)
  } vpu_pool_e;

  // A function table the VPU applies after requantization (activate fn=, docs/vpu.md).
  typedef enum logic [1:0] {
    VpuFnNone    = 2'd0,
    VpuFnSigmoid = 2'd1,
    VpuFnTanh    = 2'd2
  } vpu_fn_e;

  // What the matrix unit did in a cycle (tpu_matrix_unit): every cycle is exactly one of
  // these, counted by the mxu_*_cycles counters.
  typedef enum logic [2:0] {
    MxuStream = 3'd0,  // a row entered the array
    MxuLoad   = 3'd1,  // no row entered; a weight row moved into the shadow registers
    MxuStall  = 3'd2,  // a row waited for its weight tile
    MxuDrain  = 3'd3,  // rows on their way to the accumulators
    MxuIdle   = 3'd4   // none of these
  } mxu_cycle_e;

  // The convolution window that `set_window` sets and `matmul window` walks (docs/isa.md):
  // an in_h x in_w input map of `channels` bytes per pixel, pixel_bytes apart, starting at
  // byte 0 of the matmul's unified-buffer row; kh x kw kernels at stride (stride_y,
  // stride_x), pad_top / pad_left zero rows and columns before the map; out_h x out_w
  // output pixels, in raster order or, `pooled`, 2 x 2 window by 2 x 2 window; positions
  // outside the map read 0, or -128 with `pad_min`.
  typedef struct packed {
    logic        valid;  // a good set_window has issued since reset
    logic        pooled;
    logic        pad_min;
    logic        dilated;  // a zero between neighbouring pixels (input dilation 2)
    logic [11:0] in_h, in_w, out_h, out_w;
    logic [3:0]  kh, kw, stride_y, stride_x, pad_top, pad_left;
    logic [15:0] channels, pixel_bytes;
  } window_t;

  // The residual that `set_residual` sets and `activate residual` adds (docs/isa.md): row
  // k of the activate's output becomes clamp((y * mul_a + r * mul_b + 2^(shift-1)) >>>
  // shift) with y its int8 value and r the int8 lane of unified-buffer row ub + k x stride;
  // with `product`, clamp((y * r * mul_a + 2^(shift-1)) >>> shift).
  typedef struct packed {
    logic        valid;  // a good set_residual has issued since reset
    logic        relu;
    logic        product;
    logic [5:0]  shift;
    logic [31:0] mul_a, mul_b, ub;
  } residual_t;

  // ---------------------------------------------------------------- arithmetic
  // bfloat16 and float32 as the chip computes them (docs/bf16.md; arith/bf16.h is the same
  // in C++): subnormal inputs are zeros of their sign, subnormal results become zeros of
  // their sign, rounding is to nearest even, every NaN is 0x7fc00000.
  localparam logic [31:0] Fp32Nan = 32'h7fc0_0000;

  // (Of the sign-less magnitude, bits 30:0.)
  function automatic logic Fp32IsNan(logic [30:0] x);
    return x[30:23] == 8'hff && x[22:0] != '0;
  endfunction

  function automatic logic Fp32IsInf(logic [30:0] x);
    return x[30:23] == 8'hff && x[22:0] == '0;
  endfunction

  // A subnormal becomes a zero of its sign.
  function automatic logic [31:0] Fp32Daz(logic [31:0] x);
    return x[30:23] == 8'h00 ? {x[31], 31'h0} : x;
  endfunction

  // The exact product of two bfloat16 values (8-bit significands: 16 bits, which float32
  // holds); out of float32's normal range it is an infinity or a zero of its sign.
  function automatic logic [31:0] Bf16Mul(logic [15:0] a, logic [15:0] b);
    logic        sign, a_zero, b_zero, a_inf, b_inf, a_nan, b_nan;
    logic [15:0] p;
    logic [9:0]  e;  // biased exponent of the product, two's complement
    sign   = a[15] ^ b[15];
    a_zero = a[14:7] == 8'h00;
    b_zero = b[14:7] == 8'h00;
    a_inf  = a[14:7] == 8'hff && a[6:0] == '0;
    b_inf  = b[14:7] == 8'hff && b[6:0] == '0;
    a_nan  = a[14:7] == 8'hff && a[6:0] != '0;
    b_nan  = b[14:7] == 8'hff && b[6:0] != '0;
    if (a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero)) return Fp32Nan;
    if (a_inf || b_inf) return {sign, 8'hff, 23'h0};
    if (a_zero || b_zero) return {sign, 31'h0};
    p = {8'h01, a[6:0]} * {8'h01, b[6:0]};  // in [2^14, 2^16)
    e = {2'b00, a[14:7]} + {2'b00, b[14:7]} - 10'd127 + {9'h0, p[15]};
    if ($signed(e) <= 0) return {sign, 31'h0};
    if ($signed(e) >= 255) return {sign, 8'hff, 23'h0};
    return {sign, e[7:0], p[15] ? {p[14:0], 8'h0} : {p[13:0], 9'h0}};
  endfunction

  // float32 addition, rounded to nearest even.
  function automatic logic [31:0] Fp32Add(logic [31:0] a_in, logic [31:0] b_in);
    logic [31:0] a, b, t;
    logic [26:0] ma, mb, m;  // 1.fraction, then guard, round and sticky bits
    logic [27:0] sum;
    logic [24:0] r;          // the rounded significand and its carry
    logic [7:0]  d;
    logic [9:0]  e;          // biased exponent, two's complement
    logic [4:0]  lz;
    logic        round_up;
    a = Fp32Daz(a_in);
    b = Fp32Daz(b_in);
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0])) return Fp32Nan;
    if (Fp32IsInf(a[30:0]) && Fp32IsInf(b[30:0])) return a[31] == b[31] ? a : Fp32Nan;
    if (Fp32IsInf(a[30:0])) return a;
    if (Fp32IsInf(b[30:0])) return b;
    if (a[30:0] == '0 && b[30:0] == '0) return {a[31] & b[31], 31'h0};
    if (a[30:0] == '0) return b;
    if (b[30:0] == '0) return a;
    if (b[30:0] > a[30:0]) begin  // a is the larger in magnitude and gives the sign
      t = a;
      a = b;
      b = t;
    end
    d  = a[30:23] - b[30:23];
    ma = {1'b1, a[22:0], 3'b000};
    mb = {1'b1, b[22:0], 3'b000};
    if (d >= 8'd27) mb = 27'd1;  // all of b is below the sticky bit
    else mb = (mb >> d) | 27'(|(mb & ((27'd1 << d) - 27'd1)));
    e = {2'b00, a[30:23]};
    if (a[31] == b[31]) begin
      sum = {1'b0, ma} + {1'b0, mb};
      if (sum[27]) begin
        m = sum[27:1] | 27'(sum[0]);
        e = e + 10'd1;
      end else begin
        m = sum[26:0];
      end
    end else begin
      m = ma - mb;
      if (m == '0) return 32'h0;  // x + (-x) is +0
      lz = '0;
      for (int i = 0; i < 27; i++) if (m[i]) lz = 5'(26 - i);
      m = m << lz;
      e = e - {5'h0, lz};
    end
    if ($signed(e) <= 0) return {a[31], 31'h0};
    round_up = m[2] && (m[1] || m[0] || m[3]);
    r = {1'b0, m[26:3]} + 25'(round_up);
    if (r[24]) begin
      r = r >> 1;
      e = e + 10'd1;
    end
    if ($signed(e) >= 255) return {a[31], 8'hff, 23'h0};
    return {a[31], e[7:0], r[22:0]};
  endfunction

  // The larger (`larger`) or the smaller of two float32 values: NaN when either is; +0 is
  // larger than -0.
  function automatic logic [31:0] Fp32Pick(logic [31:0] a_in, logic [31:0] b_in, logic larger);
    logic [31:0] a, b, ka, kb;
    a = Fp32Daz(a_in);
    b = Fp32Daz(b_in);
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0])) return Fp32Nan;
    ka = a[31] ? ~a : {1'b1, a[30:0]};  // ordered as the numbers are
    kb = b[31] ? ~b : {1'b1, b[30:0]};
    if (ka == kb) return a;
    return (ka > kb) == larger ? a : b;
  endfunction

  function automatic logic [31:0] Fp32Max(logic [31:0] a, logic [31:0] b);
    return Fp32Pick(a, b, 1'b1);
  endfunction

  function automatic logic [31:0] Fp32Min(logic [31:0] a, logic [31:0] b);
    return Fp32Pick(a, b, 1'b0);
  endfunction

  // x / 4, exact unless it falls below the smallest normal, where it is a zero of its sign.
  function automatic logic [31:0] Fp32Quarter(logic [31:0] x_in);
    logic [31:0] x;
    x = Fp32Daz(x_in);
    if (Fp32IsNan(x[30:0])) return Fp32Nan;
    if (x[30:23] == 8'hff) return x;  // an infinity
    if (x[30:23] <= 8'd2) return {x[31], 31'h0};
    return {x[31], x[30:23] - 8'd2, x[22:0]};
  endfunction

  // A float32 rounded to bfloat16 (nearest even): a carry may reach infinity, never a
  // subnormal; NaN gives the one NaN, 0x7fc0.
  function automatic logic [15:0] Bf16Round(logic [31:0] x_in);
    logic [31:0] x;
    x = Fp32Daz(x_in);
    if (Fp32IsNan(x[30:0])) return 16'h7fc0;
    if (x[30:23] == 8'hff) return x[31:16];
    return 16'((x + 32'h7fff + 32'(x[16])) >> 16);
  endfunction

  // Stage 2 of the float32 vector unit (tpu_vpu): ReLU (y > 0 ? y : +0; NaN stays NaN),
  // then the lane's upper bound hi, then rounding to bfloat16.
  function automatic logic [15:0] Bf16Activate(logic [31:0] sum_in, logic relu,
                                               logic [31:0] hi);
    logic [31:0] y;
    y = Fp32Daz(sum_in);
    if (relu && !Fp32IsNan(y[30:0]) && (y[31] || y[30:0] == '0)) y = 32'h0;
    return Bf16Round(Fp32Min(y, hi));
  endfunction

  // ---------------------------------------------------------------- the vector unit's float32
  // (docs/vpu.md, "Float32 arithmetic"; arith/fp32.h is the same in C++.)

  // A NaN becomes the one NaN and a subnormal a zero of its sign.
  function automatic logic [31:0] Fp32Canon(logic [31:0] x);
    return Fp32IsNan(x[30:0]) ? Fp32Nan : Fp32Daz(x);
  endfunction

  // A finite nonzero result sig / 2^26 x 2^(e - 127) (sig's bit 26 set, bit 0 sticky) rounded
  // to nearest even; above the range an infinity; below it rounded on the subnormal grid
  // as IEEE 754 does, then a zero of its sign unless that rounded up to 2^-126.
  function automatic logic [31:0] Fp32Pack(logic sign, logic signed [11:0] e_in,
                                           logic [26:0] sig);
    logic signed [11:0] e;
    logic [26:0] s;
    logic [24:0] r;
    logic [4:0]  sh;
    e = e_in;
    if (e >= 12'sd1) begin
      r = {1'b0, sig[26:3]} + 25'(sig[2] && (sig[1] || sig[0] || sig[3]));
      if (r[24]) begin
        r = r >> 1;
        e = e + 12'sd1;
      end
      if (e >= 12'sd255) return {sign, 8'hff, 23'h0};
      return {sign, e[7:0], r[22:0]};
    end
    sh = (e < -12'sd25) ? 5'd27 : 5'(12'sd1 - e);
    s  = (sig >> sh) | 27'(|(sig & ((27'd1 << sh) - 27'd1)));
    r  = {1'b0, s[26:3]} + 25'(s[2] && (s[1] || s[0] || s[3]));
    return r[23] ? {sign, 8'h01, 23'h0} : {sign, 31'h0};
  endfunction

  // a x b, one rounding; 0 x infinity is NaN.
  function automatic logic [31:0] Fp32Mul(logic [31:0] a_in, logic [31:0] b_in);
    logic [31:0] a, b;
    logic        sign;
    logic [47:0] p;
    a    = Fp32Daz(a_in);
    b    = Fp32Daz(b_in);
    sign = a[31] ^ b[31];
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0])) return Fp32Nan;
    if (Fp32IsInf(a[30:0]) || Fp32IsInf(b[30:0]))
      return (a[30:0] == '0 || b[30:0] == '0) ? Fp32Nan : {sign, 8'hff, 23'h0};
    if (a[30:0] == '0 || b[30:0] == '0) return {sign, 31'h0};
    p = {24'h0, 1'b1, a[22:0]} * {24'h0, 1'b1, b[22:0]};
    if (p[47])
      return Fp32Pack(sign, 12'(a[30:23]) + 12'(b[30:23]) - 12'sd126, {p[47:22], |p[21:0]});
    return Fp32Pack(sign, 12'(a[30:23]) + 12'(b[30:23]) - 12'sd127, {p[46:21], |p[20:0]});
  endfunction

  // a / b, one rounding: x / 0 an infinity of the quotient's sign, 0 / 0 and inf / inf NaN.
  function automatic logic [31:0] Fp32Div(logic [31:0] a_in, logic [31:0] b_in);
    logic [31:0] a, b;
    logic        sign, a_zero, b_zero;
    logic [50:0] num, rem;
    logic [27:0] q;  // below 2^28
    logic signed [11:0] e;
    a      = Fp32Daz(a_in);
    b      = Fp32Daz(b_in);
    sign   = a[31] ^ b[31];
    a_zero = a[30:0] == '0;
    b_zero = b[30:0] == '0;
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0]) || (a_zero && b_zero) ||
        (Fp32IsInf(a[30:0]) && Fp32IsInf(b[30:0]))) return Fp32Nan;
    if (Fp32IsInf(a[30:0]) || b_zero) return {sign, 8'hff, 23'h0};
    if (Fp32IsInf(b[30:0]) || a_zero) return {sign, 31'h0};
    num = {3'b001, a[22:0], 25'h0} << 2;  // 1.a x 2^50: the quotient has 27 or 28 bits
    q   = 28'(num / 51'({1'b1, b[22:0]}));
    rem = num % 51'({1'b1, b[22:0]});
    e   = 12'(a[30:23]) - 12'(b[30:23]);
    if (q[27]) return Fp32Pack(sign, e + 12'sd127, {q[27:2], q[1] | q[0] | (rem != '0)});
    return Fp32Pack(sign, e + 12'sd126, {q[26:1], q[0] | (rem != '0)});
  endfunction

  // The square root, one rounding: sqrt(-0) = -0, of anything below zero NaN.
  function automatic logic [31:0] Fp32Sqrt(logic [31:0] a_in);
    logic [31:0] a;
    logic [63:0] m, rem, root, trial;
    logic signed [11:0] ex;
    a = Fp32Daz(a_in);
    if (Fp32IsNan(a[30:0])) return Fp32Nan;
    if (a[30:0] == '0) return a;
    if (a[31]) return Fp32Nan;
    if (Fp32IsInf(a[30:0])) return a;
    ex = 12'(a[30:23]) - 12'sd127;
    // An even exponent: the significand x 2^29; odd: x 2^30 (a root of 27 bits either way).
    m    = {40'h0, 1'b1, a[22:0]} << (ex[0] ? 30 : 29);
    rem  = '0;
    root = '0;
    for (int i = 26; i >= 0; i--) begin
      rem   = (rem << 2) | ((m >> (2 * i)) & 64'd3);
      trial = (root << 2) | 64'd1;
      if (rem >= trial) begin
        rem  = rem - trial;
        root = (root << 1) | 64'd1;
      end else begin
        root = root << 1;
      end
    end
    return Fp32Pack(1'b0, (ex >>> 1) + 12'sd127, {root[26:1], root[0] | (rem != '0)});
  endfunction

  // Ordered comparisons (false with a NaN; +0 equals -0), as masks: 1.0 or +0.
  function automatic logic Fp32Lt(logic [31:0] a_in, logic [31:0] b_in);
    logic [31:0] a, b, ka, kb;
    a = Fp32Daz(a_in);
    b = Fp32Daz(b_in);
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0])) return 1'b0;
    if (a[30:0] == '0 && b[30:0] == '0) return 1'b0;
    ka = a[31] ? ~a : {1'b1, a[30:0]};
    kb = b[31] ? ~b : {1'b1, b[30:0]};
    return ka < kb;
  endfunction

  function automatic logic Fp32Eq(logic [31:0] a_in, logic [31:0] b_in);
    logic [31:0] a, b;
    a = Fp32Daz(a_in);
    b = Fp32Daz(b_in);
    if (Fp32IsNan(a[30:0]) || Fp32IsNan(b[30:0])) return 1'b0;
    return a == b || (a[30:0] == '0 && b[30:0] == '0);
  endfunction

  // The integer nearest t (ties to even), t finite and below 2^23 in magnitude.
  function automatic logic signed [31:0] Fp32NearestInt(logic [31:0] t);
    logic signed [11:0] ex;
    logic [31:0] m, ip, frac, half;
    logic [4:0]  sh;
    ex = 12'(t[30:23]) - 12'sd127;
    if (t[30:23] == 8'h00 || ex < -12'sd1) return '0;
    m    = {8'h0, 1'b1, t[22:0]};
    sh   = 5'(12'sd23 - ex);
    ip   = m >> sh;
    frac = m & ((32'd1 << sh) - 32'd1);
    half = 32'd1 << (sh - 5'd1);
    if (frac > half || (frac == half && ip[0])) ip = ip + 32'd1;
    return t[31] ? -$signed(ip) : $signed(ip);
  endfunction

  // The integer n (below 2^24 in magnitude) as a float32, exactly; a zero has the sign `neg`.
  function automatic logic [31:0] Fp32OfInt(logic signed [31:0] n, logic neg);
    logic [31:0] mag;
    logic [4:0]  k;
    if (n == '0) return {neg, 31'h0};
    mag = n[31] ? 32'(-n) : 32'(n);
    k   = '0;
    for (int i = 0; i < 24; i++) if (mag[i]) k = 5'(i);
    return {n[31], 8'(8'd127 + 8'(k)), 23'(mag << (5'd23 - k))};
  endfunction

  // e^x by the algorithm of docs/vpu.md: n the integer nearest x log2(e), r = (x - n ln2_hi)
  // - n ln2_lo, the Taylor polynomial of degree 7 in r by Horner's rule, then the exact
  // scalings by 2^h and 2^(n - h), h = n / 2.
  function automatic logic [31:0] Fp32Exp(logic [31:0] x_in);
    logic [31:0] x, t, n, r, p;
    logic signed [31:0] ni, h;
    logic [7:0][31:0] taylor;
    x = Fp32Daz(x_in);
    if (Fp32IsNan(x[30:0])) return Fp32Nan;
    if (Fp32Lt(32'h42b2_0000, x)) return 32'h7f80_0000;  // above 89
    if (Fp32Lt(x, 32'hc2d0_0000)) return 32'h0;          // below -104
    taylor = {Fp32ExpTaylor7, Fp32ExpTaylor6, Fp32ExpTaylor5, Fp32ExpTaylor4, Fp32ExpTaylor3,
              Fp32ExpTaylor2, Fp32ExpTaylor1, Fp32ExpTaylor0};
    t  = Fp32Mul(x, Fp32ExpLog2e);
    ni = Fp32NearestInt(t);
    n  = Fp32OfInt(ni, t[31]);
    r  = Fp32Add(x, Fp32Mul(n, Fp32ExpLn2Hi) ^ 32'h8000_0000);
    r  = Fp32Add(r, Fp32Mul(n, Fp32ExpLn2Lo) ^ 32'h8000_0000);
    p  = taylor[0];
    for (int k = 1; k < 8; k++) p = Fp32Add(Fp32Mul(p, r), taylor[k]);
    h = ni / 2;
    return Fp32Mul(Fp32Mul(p, {1'b0, 8'(h + 127), 23'h0}), {1'b0, 8'(ni - h + 127), 23'h0});
  endfunction

  // ln x by the algorithm of docs/vpu.md ("The logarithm", arith/fp32.h's Fp32Log): x = 2^e
  // m, m in [sqrt(2) / 2, sqrt(2)); f = m - 1; s = f / (m + 1); R = z p(z), z = s^2, p by
  // Horner's rule; h = f f / 2; ln x = e ln2_hi - ((h - (s (h + R) + e ln2_lo)) - f).
  function automatic logic [31:0] Fp32Log(logic [31:0] x_in);
    logic [31:0] x, m, f, s, z, p, r, hfsq, t, en;
    logic signed [31:0] e;
    logic [4:0][31:0] series;
    x = Fp32Daz(x_in);
    if (Fp32IsNan(x[30:0]) || (x[31] && x[30:0] != '0)) return Fp32Nan;
    if (x[30:0] == '0) return 32'hff80_0000;
    if (Fp32IsInf(x[30:0])) return 32'h7f80_0000;
    series = {Fp32LogSeries4, Fp32LogSeries3, Fp32LogSeries2, Fp32LogSeries1, Fp32LogSeries0};
    e = 32'(x[30:23]) - 32'sd127;
    m = {9'h07f, x[22:0]};  // [1, 2)
    if (m > Fp32LogSqrt2) begin
      m = m - 32'h0080_0000;
      e = e + 32'sd1;
    end
    f  = Fp32Add(m, 32'hbf80_0000);
    s  = Fp32Div(f, Fp32Add(m, 32'h3f80_0000));
    z  = Fp32Mul(s, s);
    p  = series[0];
    for (int k = 1; k < 5; k++) p = Fp32Add(Fp32Mul(p, z), series[k]);
    r    = Fp32Mul(z, p);
    hfsq = Fp32Mul(Fp32Mul(f, f), 32'h3f00_0000);
    en   = Fp32OfInt(e, 1'b0);
    t    = Fp32Add(Fp32Mul(s, Fp32Add(hfsq, r)), Fp32Mul(en, Fp32ExpLn2Lo));
    // (every value finite here: a - b is a + b with b's sign flipped, as Fp32Sub)
    return Fp32Add(Fp32Mul(en, Fp32ExpLn2Hi),
                   Fp32Add(Fp32Add(hfsq, t ^ 32'h8000_0000), f ^ 32'h8000_0000) ^ 32'h8000_0000);
  endfunction

  // One lane of a vector operation of kind binary, unary or select: a, b and the result
  // row's old value `old`, all float32 (docs/vpu.md, the vector operation table).
  function automatic logic [31:0] VectorLane(vector_op_e op, logic [31:0] a, logic [31:0] b,
                                             logic [31:0] old);
    unique case (op)
      VopAdd:    return Fp32Add(a, b);
      VopSub:    return Fp32Add(a, Fp32Canon(b) ^ {~Fp32IsNan(b[30:0]), 31'h0});
      VopMul:    return Fp32Mul(a, b);
      VopMax:    return Fp32Max(a, b);
      VopMin:    return Fp32Min(a, b);
      VopLess:   return Fp32Lt(a, b) ? 32'h3f80_0000 : 32'h0;
      VopEqual:  return Fp32Eq(a, b) ? 32'h3f80_0000 : 32'h0;
      VopSelect: return Fp32Daz(a) << 1 != '0 ? Fp32Canon(b) : Fp32Canon(old);
      VopExp:    return Fp32Exp(a);
      VopRecip:  return Fp32Div(32'h3f80_0000, a);
      VopRsqrt:  return Fp32Div(32'h3f80_0000, Fp32Sqrt(a));
      VopLog:    return Fp32Log(a);
      default:   return Fp32Canon(a);  // copy
    endcase
  endfunction

  // What `set_window pad_min` pads with: the most negative operand, -128 in int8; in bf16
  // the most negative finite value, -(2 - 2^-7) x 2^127 (not -infinity, whose product with
  // a 0 weight would be NaN).
  // The value in the low InputWidthOf(f) bits.
  function automatic logic [15:0] PadMinOf(dtype_e f);
    return f == DtypeBf16 ? 16'hff7f : 16'hff80;
  endfunction

  // The operands of the functions below are the format's, sign-extended to 16 bits (int8:
  // 16'(x) of a signed operand).
  // A processing element's step: the partial sum from above plus activation x weight.
  function automatic acc_t Mac(dtype_e f, acc_t psum, logic signed [15:0] act,
                               logic signed [15:0] w);
    if (f == DtypeBf16) return Fp32Add(psum, Bf16Mul(act, w));
    return psum + acc_t'(act) * acc_t'(w);  // wraps modulo 2^32, as two's complement does
  endfunction

  // The accumulators' add and max.
  function automatic acc_t AccAdd(dtype_e f, acc_t x, acc_t y);
    if (f == DtypeBf16) return Fp32Add(x, y);
    return x + y;
  endfunction

  function automatic acc_t AccMax(dtype_e f, acc_t x, acc_t y);
    if (f == DtypeBf16) return Fp32Max(x, y);
    return x > y ? x : y;
  endfunction

endpackage
