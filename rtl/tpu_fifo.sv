// A first-in first-out queue of Depth entries of Width bits: the instruction queue, the
// weight FIFO and the small row buffers of the DMA engines and the matrix feeder.
// A push when full and a pop when empty are ignored; the users never do either (asserted).
`include "tpu_assert.svh"

module tpu_fifo #(
  parameter int unsigned Width = 8,
  parameter int unsigned Depth = 2,  // 1 .. 2^20
  localparam int unsigned PtrWidth = (Depth > 1) ? $clog2(Depth) : 1,
  localparam int unsigned CountWidth = $clog2(Depth + 1)
) (
  input  logic                  clk_i,
  input  logic                  rst_ni,
  input  logic                  push_i,
  input  logic [Width-1:0]      push_data_i,
  input  logic                  pop_i,
  output logic [Width-1:0]      head_o,  // valid while !empty_o
  output logic                  full_o,
  output logic                  empty_o,
  output logic [CountWidth-1:0] count_o
);

  logic [Width-1:0]      mem_q[Depth];
  logic [PtrWidth-1:0]   rd_q, wr_q;
  logic [CountWidth-1:0] count_q;
  logic                  push, pop;

  assign push = push_i && (count_q != CountWidth'(Depth));
  assign pop  = pop_i && (count_q != '0);

  function automatic logic [PtrWidth-1:0] next_ptr(logic [PtrWidth-1:0] p);
    return (p == PtrWidth'(Depth - 1)) ? '0 : p + 1'b1;
  endfunction

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_q    <= '0;
      wr_q    <= '0;
      count_q <= '0;
    end else begin
      if (push) wr_q <= next_ptr(wr_q);
      if (pop) rd_q <= next_ptr(rd_q);
      count_q <= count_q + CountWidth'(push) - CountWidth'(pop);
    end
  end

  always_ff @(posedge clk_i) begin
    if (push) mem_q[wr_q] <= push_data_i;
  end

  `TPU_ASSERT(NoPushWhenFull, !(push_i && full_o),
              $error("tpu_fifo: push into a full FIFO (%0d entries)", Depth))
  `TPU_ASSERT(NoPopWhenEmpty, !(pop_i && empty_o), $error("tpu_fifo: pop from an empty FIFO"))

  assign head_o  = mem_q[rd_q];
  assign full_o  = (count_q == CountWidth'(Depth));
  assign empty_o = (count_q == '0);
  assign count_o = count_q;

endmodule
