// Triangular skew buffer: lane i is delayed by i cycles (Reverse = 0) or by
// Lanes-1-i cycles (Reverse = 1). Used for the input skew, the weight-write skew and
// the output de-skew of the matrix unit.
module tpu_skew #(
  parameter int unsigned Lanes   = 4,  // number of lanes, >= 1
  parameter int unsigned Width   = 8,  // bits per lane, >= 1
  parameter bit          Reverse = 1'b0,
  parameter bit          Reset   = 1'b1,  // see tpu_delay
  parameter bit          Compact = 1'b0   // ring-buffer delay lines (large arrays)
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  input  logic [Lanes-1:0][Width-1:0] d_i,
  output logic [Lanes-1:0][Width-1:0] q_o
);

  for (genvar i = 0; i < int'(Lanes); i++) begin : gen_lane
    localparam int unsigned LaneDepth = Reverse ? Lanes - 1 - i : i;
    tpu_delay #(
      .Width(Width),
      .Depth(LaneDepth),
      .Reset(Reset),
      .Ring (Compact)
    ) u_delay (
      .clk_i,
      .rst_ni,
      .d_i(d_i[i]),
      .q_o(q_o[i])
    );
  end

endmodule
