// A fixed-length delay line (shift register); Depth = 0 is a wire.
module tpu_delay #(
  parameter int unsigned Width = 1,  // bits per stage, >= 1
  parameter int unsigned Depth = 1   // number of register stages, >= 0
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
  end else begin : gen_regs
    logic [Width-1:0] stage_q[Depth];

    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        for (int unsigned s = 0; s < Depth; s++) stage_q[s] <= '0;
      end else begin
        stage_q[0] <= d_i;
        for (int unsigned s = 1; s < Depth; s++) stage_q[s] <= stage_q[s-1];
      end
    end

    assign q_o = stage_q[Depth-1];
  end

endmodule
