// A fixed-length delay line (shift register); Depth = 0 is a wire. With Ring, the same
// delay as a memory of Depth entries and a pointer: code whose size does not grow with
// Depth, for the long lines of large arrays.
module tpu_delay #(
  parameter int unsigned Width = 1,  // bits per stage, >= 1
  parameter int unsigned Depth = 1,  // number of register stages, >= 0
  parameter bit          Reset = 1'b1, // clear the stages at reset (off for pure data)
  parameter bit          Ring  = 1'b0  // a memory and a pointer instead of Depth registers
) (
  input  logic             clk_i,
  input  logic             rst_ni,
  input  logic [Width-1:0] d_i,
  output logic [Width-1:0] q_o
);

  if (Width < 1) begin : gen_bad_width
    $error("tpu_delay: Width must be >= 1");
  end

  if (Depth == 0) begin : gen_wire
    assign q_o = d_i;
    logic unused_clk_rst;
    assign unused_clk_rst = clk_i ^ rst_ni;
  end else if (Ring) begin : gen_ring
    // Each edge writes the input at the pointer and moves it on, so the entry at the
    // pointer is the one written Depth edges ago. Reset: zeros until Depth edges have
    // passed, exactly as reset stages would give.
    localparam int unsigned PtrWidth = (Depth > 1) ? $clog2(Depth) : 1;
    logic [Width-1:0]    mem_q[Depth];
    logic [PtrWidth-1:0] ptr_q;

    always_ff @(posedge clk_i) mem_q[ptr_q] <= d_i;

    if (Reset) begin : gen_reset
      logic [$clog2(Depth+1)-1:0] filled_q;
      always_ff @(posedge clk_i or negedge rst_ni) begin
        if (!rst_ni) begin
          ptr_q    <= '0;
          filled_q <= '0;
        end else begin
          ptr_q    <= (ptr_q == PtrWidth'(Depth - 1)) ? '0 : ptr_q + 1'b1;
          if (32'(filled_q) != Depth) filled_q <= filled_q + 1'b1;
        end
      end
      assign q_o = (32'(filled_q) == Depth) ? mem_q[ptr_q] : '0;
    end else begin : gen_no_reset
      always_ff @(posedge clk_i) ptr_q <= (ptr_q == PtrWidth'(Depth - 1)) ? '0 : ptr_q + 1'b1;
      assign q_o = mem_q[ptr_q];
      logic unused_rst;
      assign unused_rst = rst_ni;
    end
  end else begin : gen_regs
    // One always_ff per stage with constant indices, and split_var, let Verilator keep
    // each stage in a variable of its own: the shift compiles to plain copies instead
    // of delayed array writes, which makes the simulated array about 1.5x faster.
    logic [Width-1:0] stage_q[Depth]  /*verilator split_var*/;

    for (genvar s = 0; s < int'(Depth); s++) begin : gen_stage
      logic [Width-1:0] prev;
      if (s == 0) begin : gen_first
        assign prev = d_i;
      end else begin : gen_next
        assign prev = stage_q[s-1];
      end

      if (Reset) begin : gen_reset
        always_ff @(posedge clk_i or negedge rst_ni) begin
          if (!rst_ni) stage_q[s] <= '0;
          else stage_q[s] <= prev;
        end
      end else begin : gen_no_reset
        always_ff @(posedge clk_i) stage_q[s] <= prev;
      end
    end

    if (!Reset) begin : gen_unused_rst
      logic unused_rst;
      assign unused_rst = rst_ni;
    end

    assign q_o = stage_q[Depth-1];
  end

endmodule
