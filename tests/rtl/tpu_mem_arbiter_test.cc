// rtl/tpu_mem_arbiter.sv against its fast-engine model (fast/mem_arbiter.h), cycle by cycle,
// for 1, 3 and 4 cores: random requests held until served (as the DMA engines hold them),
// a memory that is ready at random, read rows coming back with random tags. Every output
// is compared in every cycle, and no core that keeps asking waits more than Cores - 1
// grants to the others.
#include <gtest/gtest.h>
#include <verilated.h>

#include <random>
#include <vector>

#include "Vtpu_mem_arbiter_c1.h"
#include "Vtpu_mem_arbiter_c3.h"
#include "Vtpu_mem_arbiter_c4.h"
#include "fast/mem_arbiter.h"

namespace tpu {
namespace {

constexpr int kWidth = 8;  // the payload bits of these builds (-GWidth=8)

template <class Model>
void RunLockstep(int cores, uint32_t seed, int cycles) {
  VerilatedContext context;
  Model rtl(&context);
  fast::MemArbiter model(cores);
  std::mt19937 rng(seed);
  std::bernoulli_distribution start(0.45), ready(0.6), resp(0.5);
  std::uniform_int_distribution<int> payload_of(0, 255), id_of(0, cores - 1);

  rtl.clk_i = 0;
  rtl.rst_ni = 0;
  rtl.req_valid_i = 0;
  rtl.eval();
  rtl.rst_ni = 1;
  rtl.eval();

  std::vector<bool> asking(cores, false);
  std::vector<int> payload(cores, 0), waited(cores, 0);
  int served = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    // Inputs, between edges.
    uint32_t valid = 0;
    uint64_t req = 0;
    for (int c = 0; c < cores; ++c) {
      if (!asking[c] && start(rng)) {
        asking[c] = true;
        payload[c] = payload_of(rng);
        waited[c] = 0;
      }
      valid |= uint32_t{asking[c]} << c;
      req |= static_cast<uint64_t>(payload[c]) << (kWidth * c);
    }
    const bool mem_ready = ready(rng), resp_valid = resp(rng);
    const int resp_id = id_of(rng);
    rtl.req_valid_i = valid;
    rtl.req_i = req;
    rtl.mem_req_ready_i = mem_ready;
    rtl.mem_resp_valid_i = resp_valid;
    rtl.mem_resp_id_i = static_cast<uint32_t>(resp_id);
    rtl.eval();

    const int grant = model.Grant(valid);
    const bool taken = grant >= 0 && mem_ready;
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    ASSERT_EQ(rtl.mem_req_valid_o, grant >= 0);
    if (grant >= 0) {
      ASSERT_EQ(static_cast<int>(rtl.mem_req_id_o), grant);
      ASSERT_EQ(static_cast<int>(rtl.mem_req_o), payload[grant]);
    }
    ASSERT_EQ(static_cast<uint32_t>(rtl.req_ready_o), taken ? 1u << grant : 0u);
    ASSERT_EQ(static_cast<uint32_t>(rtl.resp_valid_o), resp_valid ? 1u << resp_id : 0u);

    // The clock edge.
    rtl.clk_i = 1;
    rtl.eval();
    rtl.clk_i = 0;
    rtl.eval();
    model.Edge(grant, taken);
    if (taken) {
      ++served;
      asking[grant] = false;
      for (int c = 0; c < cores; ++c) {
        if (c != grant && asking[c]) ASSERT_LE(++waited[c], cores - 1) << "core " << c;
      }
    }
  }
  EXPECT_GT(served, cycles / 4);  // the memory was busy: the test exercised the grants
}

TEST(MemArbiterLockstep, OneCoreIsAWire) { RunLockstep<Vtpu_mem_arbiter_c1>(1, 1, 20000); }
TEST(MemArbiterLockstep, ThreeCores) { RunLockstep<Vtpu_mem_arbiter_c3>(3, 2, 20000); }
TEST(MemArbiterLockstep, FourCores) { RunLockstep<Vtpu_mem_arbiter_c4>(4, 3, 20000); }

TEST(MemArbiter, RoundRobinOrderAndHeldTurn) {
  fast::MemArbiter a(3);
  EXPECT_EQ(a.Grant(0b000), -1);
  EXPECT_EQ(a.Grant(0b110), 1);
  a.Edge(1, false);  // not taken: core 1 keeps its turn
  EXPECT_EQ(a.Grant(0b111), 0);
  a.Edge(0, true);
  EXPECT_EQ(a.Grant(0b111), 1);
  a.Edge(1, true);
  EXPECT_EQ(a.Grant(0b111), 2);
  a.Edge(2, true);
  EXPECT_EQ(a.Grant(0b111), 0);
  EXPECT_THROW(fast::MemArbiter(0), std::invalid_argument);
  EXPECT_THROW(fast::MemArbiter(17), std::invalid_argument);
}

}  // namespace
}  // namespace tpu
