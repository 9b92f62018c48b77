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

  // Not every top uses every constant below (the matrix-subsystem top uses none).
  /* verilator lint_off UNUSEDPARAM */

  // ---------------------------------------------------------------- instruction set
  // One 128-bit instruction word (docs/isa.md); byte 0 (the opcode) is the least
  // significant byte, as in the little-endian program file.
  localparam int unsigned InstrWidth = 128;

  typedef struct packed {
    logic [31:0] aux;
    logic [31:0] dst;
    logic [31:0] src;
    logic [15:0] length;
    logic [7:0]  flags;
    logic [7:0]  opcode;
  } instr_t;

  localparam logic [7:0] OpNop         = 8'h00;
  localparam logic [7:0] OpReadHost    = 8'h01;
  localparam logic [7:0] OpReadWeights = 8'h02;
  localparam logic [7:0] OpMatMul      = 8'h03;
  localparam logic [7:0] OpActivate    = 8'h04;
  localparam logic [7:0] OpWriteHost   = 8'h05;
  localparam logic [7:0] OpSync        = 8'h06;
  localparam logic [7:0] OpHalt        = 8'h07;

  localparam int unsigned FlagParams     = 0;  // read_host: into VPU parameter sets
  localparam int unsigned FlagAccumulate = 0;  // matmul
  localparam int unsigned FlagSwitch     = 1;  // matmul
  localparam int unsigned FlagRelu       = 0;  // activate
  localparam int unsigned FlagPoolAvg    = 1;  // activate
  localparam int unsigned FlagPoolMax    = 2;  // activate

  // A VPU parameter set is ParamRows rows of ArrayDim bytes: 4 rows of int32 biases,
  // 4 rows of int32 multipliers (both little-endian, lane 0 first), 1 row of shifts.
  localparam int unsigned ParamRows = 9;

  // ---------------------------------------------------------------- status register
  typedef enum logic [3:0] {
    StatusOk            = 4'd0,  // running, or halted by HALT
    StatusInvalidOpcode = 4'd1,  // opcode above 0x07
    StatusAddressRange  = 4'd2,  // a start address outside its memory
    StatusOverflow      = 4'd3,  // a transfer that starts inside a memory and runs off its end
    StatusBadOperand    = 4'd4   // zero length, reserved flag, pooling rows not a multiple of 4
  } status_e;

  // What the controller's issue stage did in a cycle (counters and the watchdog).
  typedef enum logic [2:0] {
    IssueEmpty     = 3'd0,  // no instruction queued
    IssueFire      = 3'd1,  // an instruction issued or retired
    IssueUnitBusy  = 3'd2,  // its unit still runs the previous instruction
    IssueUbHazard  = 3'd3,  // unified-buffer rows still being read or written by another unit
    IssueAccHazard = 3'd4,  // accumulator rows still being written or read by another unit
    IssueParHazard = 3'd5,  // a VPU parameter set still being loaded or used
    IssueDrain     = 3'd6,  // sync or halt waiting for every unit to finish
    IssueHalted    = 3'd7   // stopped
  } issue_e;

  // Units, as bits of unit_busy_o.
  localparam int unsigned UnitHostDma   = 0;
  localparam int unsigned UnitWeightDma = 1;
  localparam int unsigned UnitMatrix    = 2;
  localparam int unsigned UnitActivate  = 3;
  localparam int unsigned NumUnits      = 4;

  // ---------------------------------------------------------------- register map
  // Read through tpu_top's reg_addr_i / reg_data_o; sim/tpu_registers.h has the same list.
  localparam int unsigned RegStatus      = 0;   // status_e
  localparam int unsigned RegHalted      = 1;
  localparam int unsigned RegErrorPc     = 2;   // index of the instruction that failed
  localparam int unsigned RegRetired     = 3;   // instructions issued so far
  localparam int unsigned RegArrayDim    = 4;
  localparam int unsigned RegAccDepth    = 5;
  localparam int unsigned RegUbDepth     = 6;
  localparam int unsigned RegWfifoTiles  = 7;
  localparam int unsigned RegParamSets   = 8;
  localparam int unsigned RegIqDepth     = 9;
  localparam int unsigned RegFirstCounter = 16;

  // Performance counters, RegFirstCounter + index. They stop when the chip halts.
  localparam int unsigned CntCycles          = 0;
  localparam int unsigned CntBusyHostDma     = 1;
  localparam int unsigned CntBusyWeightDma   = 2;
  localparam int unsigned CntBusyMatrix      = 3;
  localparam int unsigned CntBusyActivate    = 4;
  localparam int unsigned CntMxuStream       = 5;
  localparam int unsigned CntMxuLoad         = 6;
  localparam int unsigned CntMxuStallWeights = 7;
  localparam int unsigned CntMxuDrain        = 8;
  localparam int unsigned CntMxuIdle         = 9;
  localparam int unsigned CntIssueEmpty      = 10;
  localparam int unsigned CntIssueUnitBusy   = 11;
  localparam int unsigned CntIssueUbHazard   = 12;
  localparam int unsigned CntIssueAccHazard  = 13;
  localparam int unsigned CntIssueParHazard  = 14;
  localparam int unsigned CntIssueDrain      = 15;
  localparam int unsigned CntWdmaStallFifo   = 16;
  localparam int unsigned CntHostMemStall    = 17;
  localparam int unsigned CntWeightMemStall  = 18;
  localparam int unsigned CntUbReads         = 19;
  localparam int unsigned CntUbWrites        = 20;
  localparam int unsigned CntAccReads        = 21;
  localparam int unsigned CntAccWrites       = 22;
  localparam int unsigned CntWfifoPushes     = 23;
  localparam int unsigned CntWfifoPops       = 24;
  localparam int unsigned CntWeightTiles     = 25;
  localparam int unsigned CntParamWrites     = 26;
  localparam int unsigned CntHostBytesRead   = 27;
  localparam int unsigned CntHostBytesWritten = 28;
  localparam int unsigned CntWeightBytesRead = 29;
  localparam int unsigned CntMacs            = 30;
  localparam int unsigned CntVpuRowsIn       = 31;
  localparam int unsigned CntVpuRowsOut      = 32;
  localparam int unsigned CntInstructions    = 33;
  localparam int unsigned NumCounters        = 34;

  /* verilator lint_on UNUSEDPARAM */

endpackage
