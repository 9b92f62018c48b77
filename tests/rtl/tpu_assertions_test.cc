// The RTL's assertions are live in the Verilated builds (--assert): breaking an invariant
// stops the simulation with the assertion's message. Here on the FIFO that every queue of
// the chip is made of (rtl/tpu_fifo.sv), driven as no user of it may drive it.
#include <gtest/gtest.h>
#include <unistd.h>
#include <verilated.h>

#include <cstdio>
#include <cstdlib>

#include "Vtpu_fifo_assert.h"

namespace tpu::test {
namespace {

void Edge(Vtpu_fifo_assert& m) {
  m.clk_i = 0;
  m.eval();
  m.clk_i = 1;
  m.eval();
}

void PushIntoFullFifo() {
  // Verilator prints the assertion's message on stdout; the death test reads stderr.
  std::fflush(stdout);
  ::dup2(2, 1);
  VerilatedContext context;
  Vtpu_fifo_assert m(&context);
  m.rst_ni = 0;
  Edge(m);
  m.rst_ni = 1;
  m.push_i = 1;
  m.push_data_i = 7;
  for (int i = 0; i < 3; ++i) Edge(m);  // two entries fit; the third push is the violation
}

void UseTheFifoAsIntended() {
  VerilatedContext context;
  Vtpu_fifo_assert m(&context);
  m.rst_ni = 0;
  Edge(m);
  m.rst_ni = 1;
  for (int i = 0; i < 100; ++i) {
    m.push_i = !m.full_o && (i % 3 != 0);
    m.pop_i = !m.empty_o && (i % 2 == 0);
    Edge(m);
  }
}

TEST(RtlAssertionsTest, AFifoOverflowStopsTheSimulation) {
  EXPECT_DEATH(PushIntoFullFifo(), "push into a full FIFO");
}

TEST(RtlAssertionsTest, CorrectUseRaisesNothing) { UseTheFifoAsIntended(); }

// In reset the assertions are off (tpu_assert.svh): a pop from the empty FIFO while rst_ni
// is low is no violation, the same pop after reset is.
void PopFromEmptyFifo(bool in_reset) {
  std::fflush(stdout);
  ::dup2(2, 1);
  VerilatedContext context;
  Vtpu_fifo_assert m(&context);
  m.rst_ni = 0;
  Edge(m);
  m.rst_ni = !in_reset;
  m.pop_i = 1;
  for (int i = 0; i < 3; ++i) Edge(m);
  std::exit(0);
}

TEST(RtlAssertionsTest, NothingIsCheckedInReset) {
  EXPECT_EXIT(PopFromEmptyFifo(true), ::testing::ExitedWithCode(0), "");
  EXPECT_DEATH(PopFromEmptyFifo(false), "pop from an empty FIFO");
}

}  // namespace
}  // namespace tpu::test
