// Named assertions, one form for the whole RTL (included by every module that checks one):
//
//   `TPU_ASSERT(Name, property, $error("what went wrong", args...))
//
// checks `property` at every rising edge of clk_i, except while rst_ni holds the module in
// reset (the registers are not yet defined then), and reports through the third argument,
// prefixed by the assertion's name as Verilator shows it (%m). A module that checks an
// assertion has clk_i and rst_ni. Verilator builds them in with --assert (every model of
// tpusim is built so), so a violated one stops the simulation with its message.
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH

`define TPU_ASSERT(name, prop, fail) \
  name: assert property (@(posedge clk_i) disable iff (!rst_ni) (prop)) else fail;

`endif
