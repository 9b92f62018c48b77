// Round-robin arbitration of Cores requesters for one external-memory port: the cores of a
// chip share the host link and the weight (HBM) memory this way. In every cycle the first
// core with a valid request, counting from the core after the one last served, is granted;
// its request goes to the memory tagged with its number, and it sees the memory's ready.
// The pointer moves on only when the memory takes the request, so a core that asks keeps
// its turn until it is served, and each core that keeps asking is served once in every
// Cores requests the memory takes. A read row comes back with its request's tag and goes
// to that core alone. No cycle is added: with one core this is a wire.
// fast/mem_arbiter.h is the fast engine's model of it, held equal by
// tests/rtl/tpu_mem_arbiter_test.cc.
module tpu_mem_arbiter #(
  parameter int unsigned Cores = 2,  // 1 .. 16
  parameter int unsigned Width = 8,  // a request's payload (write flag, address, data)
  localparam int unsigned IdWidth = (Cores > 1) ? $clog2(Cores) : 1
) (
  input  logic                        clk_i,
  input  logic                        rst_ni,
  // The cores' request ports (valid held until ready, payload held with it).
  input  logic [Cores-1:0]            req_valid_i,
  output logic [Cores-1:0]            req_ready_o,
  input  logic [Cores-1:0][Width-1:0] req_i,
  // The memory's request port.
  output logic                        mem_req_valid_o,
  input  logic                        mem_req_ready_i,
  output logic [Width-1:0]            mem_req_o,
  output logic [IdWidth-1:0]          mem_req_id_o,
  // Read rows, each with the tag of its request.
  input  logic                        mem_resp_valid_i,
  input  logic [IdWidth-1:0]          mem_resp_id_i,
  output logic [Cores-1:0]            resp_valid_o
);

  if (Cores < 1 || Cores > 16) begin : gen_bad_cores
    $error("tpu_mem_arbiter: Cores must be 1 .. 16");
  end

  logic [IdWidth-1:0] first_q;  // the core first in line
  logic [IdWidth-1:0] grant;
  logic [IdWidth:0]   cand;
  logic               any;

  // The first valid core from first_q on, wrapping round (a subtraction, not a divider).
  always_comb begin
    any   = 1'b0;
    grant = first_q;
    for (int unsigned k = 0; k < Cores; k++) begin
      cand = {1'b0, first_q} + (IdWidth + 1)'(k);
      if (cand >= (IdWidth + 1)'(Cores)) cand = cand - (IdWidth + 1)'(Cores);
      if (!any && req_valid_i[cand[IdWidth-1:0]]) begin
        any   = 1'b1;
        grant = cand[IdWidth-1:0];
      end
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      first_q <= '0;
    end else if (any && mem_req_ready_i) begin
      first_q <= (grant == IdWidth'(Cores - 1)) ? '0 : grant + 1'b1;
    end
  end

  assign mem_req_valid_o = any;
  assign mem_req_o       = req_i[grant];
  assign mem_req_id_o    = grant;
  for (genvar c = 0; c < Cores; c++) begin : gen_core
    assign req_ready_o[c]  = any && mem_req_ready_i && (grant == IdWidth'(c));
    assign resp_valid_o[c] = mem_resp_valid_i && (mem_resp_id_i == IdWidth'(c));
  end

endmodule
