// The TPU system's TLM-2.0 target socket (sim/system/tpu_system.h), used the way another SystemC
// virtual platform would: load memories and a program, start, wait for the interrupt,
// read status and counters, and get the standard TLM error responses for bad accesses.
// Also the external memories' timing (sim/system/memory_model.h, sim/system/memory_port.h).
#include "sim/system/tpu_system.h"

#include <gtest/gtest.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <numeric>
#include <vector>

#include "contract/memory_channel.h"
#include "contract/tpu_contract.h"
#include "fast/memory_timing.h"
#include "sim/system/tpu_registry.h"
#include "tests/sim/tlm_transport.h"

namespace tpu::sim {
namespace {

TEST(MemoryModelTest, TimingIsLatencyPlusBytesOverBandwidth) {
  const MemoryTiming t{100, 8};
  EXPECT_EQ(t.TransferCycles(0), 100u);
  EXPECT_EQ(t.TransferCycles(1), 101u);
  EXPECT_EQ(t.TransferCycles(64), 108u);
  EXPECT_EQ(t.TransferCycles(65), 109u);
}

TEST(MemoryModelTest, ReadWriteCountTrafficAndCheckBounds) {
  MemoryModel m("host memory", 256, {10, 4});
  std::vector<uint8_t> data(16);
  std::iota(data.begin(), data.end(), 1);
  m.Write(240, data.data(), 16);
  std::vector<uint8_t> back(16);
  m.Read(240, back.data(), 16);
  EXPECT_EQ(back, data);
  m.Peek(240, back.data(), 16);
  EXPECT_EQ(m.BytesWritten(), 16u);
  EXPECT_EQ(m.BytesRead(), 16u) << "Peek does not count";
  try {
    m.Read(250, back.data(), 16);
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "host memory: read of 16 bytes at 0xfa is outside its 256 bytes");
  }
  EXPECT_THROW(m.Write(~uint64_t{0}, data.data(), 2), std::out_of_range) << "no wrap-around";
  EXPECT_THROW(MemoryModel("x", 0, {}), std::invalid_argument);
  EXPECT_THROW(MemoryModel("x", 8, {1, 0}), std::invalid_argument);
}

TEST(MemoryPortTest, RowsHoldTheChannelAndReturnAfterTheLatency) {
  MemoryModel m("weight memory", 1024, {5, 4});  // 16-byte rows: 4 cycles each
  std::vector<uint8_t> bytes(1024);
  std::iota(bytes.begin(), bytes.end(), 0);
  m.Write(0, bytes.data(), bytes.size());
  MemoryPort port(m, 16);
  ASSERT_TRUE(port.Ready(0));
  port.Accept(0, false, 32, nullptr);
  for (uint64_t c = 1; c < 4; ++c) EXPECT_FALSE(port.Ready(c)) << c;
  EXPECT_TRUE(port.Ready(4));
  port.Accept(4, false, 48, nullptr);
  for (uint64_t c = 1; c < 9; ++c) EXPECT_EQ(port.Respond(c), nullptr) << c;
  const uint8_t* row = port.Respond(9);  // 4 cycles of transfer + 5 of latency
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row[0], 32);
  EXPECT_EQ(port.Respond(10), nullptr);
  row = port.Respond(13);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row[15], 63);
  EXPECT_TRUE(port.Idle());
}

// TPU v1's weight memory: 256-byte rows at 48 bytes per cycle take 5 1/3 cycles each, the
// fraction carried from row to row (a whole-cycle rule would take 6 and deliver 29.9 GB/s at
// 700 MHz instead of the 33.6 configured). Both engines' ports follow the one rule.
TEST(MemoryPortTest, FractionalRowsCarryTheRemainderSoTheConfiguredBandwidthIsDelivered) {
  MemoryModel m("weight memory", 4096, {7, 48});
  MemoryPort port(m, 256);
  fast::MemoryTiming timing(256, 48, 7);
  std::vector<uint64_t> accepted, arrived, fast_arrived;
  for (uint64_t c = 0; arrived.size() < 9; ++c) {
    if (port.Respond(c) != nullptr) arrived.push_back(c);
    if (timing.Respond(c) >= 0) fast_arrived.push_back(c);
    EXPECT_EQ(port.Ready(c), timing.Ready(c)) << c;
    if (accepted.size() < 9 && port.Ready(c)) {
      port.Accept(c, false, 256 * (accepted.size() % 4), nullptr);
      timing.Accept(c, true);
      accepted.push_back(c);
    }
  }
  // Row k's bytes end at 256 (k + 1) bytes of channel time: accepted in cycle
  // floor(256 k / 48), presented in cycle ceil(256 (k + 1) / 48) + 7.
  EXPECT_EQ(accepted, (std::vector<uint64_t>{0, 5, 10, 16, 21, 26, 32, 37, 42}));
  EXPECT_EQ(arrived, (std::vector<uint64_t>{13, 18, 23, 29, 34, 39, 45, 50, 55}));
  EXPECT_EQ(fast_arrived, arrived);
  EXPECT_EQ(hw::MemoryChannel::RowCycles(256, 48), 256.0 / 48);
  EXPECT_EQ(hw::MemoryChannel::RowCycles(16, 64), 1.0) << "one request per cycle";
}

// Host software as a TLM initiator: every check runs in one simulation (the SystemC
// kernel elaborates once per process).
struct Host : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Host> socket{"socket"};
  TpuSystemBase& system;
  Host(sc_core::sc_module_name n, TpuSystemBase& s) : sc_core::sc_module(n), system(s) {
    SC_THREAD(Run);
  }
  SC_HAS_PROCESS(Host);

  tlm::tlm_response_status Transport(tlm::tlm_command cmd, uint64_t addr, void* data, unsigned len,
                                     sc_core::sc_time* delay = nullptr) {
    sc_core::sc_time local = sc_core::SC_ZERO_TIME;
    return TlmTransport(socket, cmd, addr, data, len, delay ? delay : &local);
  }
  uint64_t Csr(uint64_t off) {
    uint64_t v = ~uint64_t{0};
    csr_status = Transport(tlm::TLM_READ_COMMAND, kCsrBase + off, &v, 8);
    return v;
  }

  void Run() {
    // Memories: write, read back, delay = the memory's latency + bytes / bandwidth.
    std::vector<uint8_t> data(100);
    std::iota(data.begin(), data.end(), 1);
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    host_write = Transport(tlm::TLM_WRITE_COMMAND, kHostMemBase + 0x40, data.data(), 100, &delay);
    host_write_delay = delay;
    std::vector<uint8_t> back(100);
    Transport(tlm::TLM_READ_COMMAND, kHostMemBase + 0x40, back.data(), 100);
    host_back = back == data;
    Transport(tlm::TLM_WRITE_COMMAND, kWeightMemBase + 8, data.data(), 100);
    Transport(tlm::TLM_READ_COMMAND, kWeightMemBase + 8, back.data(), 100);
    weight_back = back == data;
    // A program: copy 3 rows of 4 bytes from 0x40 to 0x80 through the unified buffer.
    const uint8_t program[4][16] = {
        {0x01, 0, 3, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},  // read_host host=0x40 ub=0
        {0x05, 0, 3, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0},  // write_host host=0x80
        {0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     // halt
        {0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},     // (not run)
    };
    Transport(tlm::TLM_WRITE_COMMAND, kProgramBase, const_cast<uint8_t*>(&program[0][0]), 64);
    uint8_t word[16] = {};
    Transport(tlm::TLM_READ_COMMAND, kProgramBase + 32, word, 16);
    program_back = word[0] == 0x07;
    state_before = Csr(kCsrState);
    uint64_t too_many = 5;
    start_too_many = Transport(tlm::TLM_WRITE_COMMAND, kCsrBase + kCsrStart, &too_many, 8);
    uint64_t n = 3;
    start = Transport(tlm::TLM_WRITE_COMMAND, kCsrBase + kCsrStart, &n, 8);
    sc_core::wait(system.DoneEvent());
    state_after = Csr(kCsrState);
    fed = Csr(kCsrFed);
    instructions = Csr(kCsrRegBase + 8 * (hw::kRegFirstCounter + hw::kCounterInstructions));
    status = Csr(kCsrRegBase + 8 * hw::kRegStatus);
    array_dim = Csr(kCsrRegBase + 8 * hw::kRegArrayDim);
    Transport(tlm::TLM_READ_COMMAND, kHostMemBase + 0x80, back.data(), 12);
    copied = std::equal(back.begin(), back.begin() + 12, data.begin());
    // Errors: unmapped address, a CSR access that is not 8 bytes, out-of-range memory.
    unmapped = Transport(tlm::TLM_READ_COMMAND, 0x3000'0000, back.data(), 4);
    uint32_t half = 0;
    csr_short = Transport(tlm::TLM_READ_COMMAND, kCsrBase + kCsrState, &half, 4);
    past_end = Transport(tlm::TLM_READ_COMMAND, kHostMemBase + (1 << 20) - 2, back.data(), 4);
    // Debug transport reads without timing.
    tlm::tlm_generic_payload dbg;
    uint8_t peek[4] = {};
    dbg.set_command(tlm::TLM_READ_COMMAND);
    dbg.set_address(kHostMemBase + 0x80);
    dbg.set_data_ptr(peek);
    dbg.set_data_length(4);
    debug_bytes = socket->transport_dbg(dbg);
    debug_first = peek[0];
    sc_core::sc_stop();
  }

  tlm::tlm_response_status host_write{}, start{}, start_too_many{}, unmapped{}, csr_short{},
      past_end{}, csr_status{};
  sc_core::sc_time host_write_delay;
  bool host_back = false, weight_back = false, program_back = false, copied = false;
  uint64_t state_before = 99, state_after = 99, fed = 0, instructions = 0, status = 99,
           array_dim = 0;
  unsigned debug_bytes = 0;
  uint8_t debug_first = 0;
};

TEST(TpuSystemTest, LoadRunAndReadBackThroughTheTlmSocket) {
  TpuSystemConfig config;
  config.chip.array_dim = 4;
  config.chip.host_mem_bytes = 1 << 20;
  config.chip.host_mem_latency_cycles = 10;
  config.chip.host_mem_bytes_per_cycle = 4;
  auto system = MakeTpuSystem("tpu_system", config);
  Host host("host", *system);
  host.socket.bind(system->socket);
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                          sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  EXPECT_EQ(host.host_write, tlm::TLM_OK_RESPONSE);
  // 10 cycles of latency + 100 / 4 cycles of data, at 10 ns a cycle.
  EXPECT_EQ(host.host_write_delay, sc_core::sc_time(350, sc_core::SC_NS));
  EXPECT_TRUE(host.host_back);
  EXPECT_TRUE(host.weight_back);
  EXPECT_TRUE(host.program_back);
  EXPECT_EQ(host.state_before, static_cast<uint64_t>(RunState::kIdle));
  EXPECT_EQ(host.start_too_many, tlm::TLM_GENERIC_ERROR_RESPONSE);
  EXPECT_EQ(host.start, tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(host.state_after, static_cast<uint64_t>(RunState::kHalted));
  EXPECT_EQ(host.fed, 3u);
  EXPECT_EQ(host.instructions, 3u);
  EXPECT_EQ(host.status, 0u);
  EXPECT_EQ(host.array_dim, 4u);
  EXPECT_TRUE(host.copied);
  EXPECT_EQ(host.unmapped, tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(host.csr_short, tlm::TLM_BURST_ERROR_RESPONSE);
  EXPECT_EQ(host.past_end, tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(host.debug_bytes, 4u);
  EXPECT_EQ(host.debug_first, 1);
}

}  // namespace
}  // namespace tpu::sim
