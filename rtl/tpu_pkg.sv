// Shared widths and types of the tpusim hardware.
package tpu_pkg;

  // Operands of the matrix unit are signed 8-bit integers (TPU v1: int8 x int8).
  localparam int unsigned InputWidth = 8;
  // Partial sums and accumulators are signed 32-bit integers.
  localparam int unsigned AccWidth = 32;
  // Performance counters are 64 bits wide so that they never wrap in practice.
  localparam int unsigned CounterWidth = 64;

  typedef logic signed [InputWidth-1:0] operand_t;
  typedef logic signed [AccWidth-1:0] acc_t;
  typedef logic [CounterWidth-1:0] counter_t;

  // Pooling done by the VPU after requantization.
  typedef enum logic [1:0] {
    VpuPoolNone = 2'd0,
    VpuPoolAvg  = 2'd1,  // 2 x 2 average, rounding half up
    VpuPoolMax  = 2'd2   // 2 x 2 maximum
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

  // The instruction word, opcodes, flags, VPU parameter-set layout, status and issue
  // codes, units, register map and counters: generated from contract/tpu_contract.toml
  // (the one home of those facts) into build/generated/rtl/.
  `include "tpu_contract.svh"

endpackage
