// External memories (sim/memory_model.cc) and their TLM-2.0 target socket
// (sim/tlm_memory.h): load and read back through the socket, latency and bandwidth as
// annotated delay, and the TLM error responses.
#include "sim/tlm_memory.h"

#include <gtest/gtest.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <numeric>
#include <vector>

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

// Host software as a TLM initiator. The SystemC kernel runs once per process, so all the
// socket checks run in one simulation.
struct Host : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Host> socket{"socket"};
  explicit Host(sc_core::sc_module_name n) : sc_core::sc_module(n) { SC_THREAD(Run); }
  SC_HAS_PROCESS(Host);

  tlm::tlm_response_status Transport(tlm::tlm_command cmd, uint64_t addr, uint8_t* data,
                                     unsigned len, sc_core::sc_time* delay,
                                     unsigned char* byte_enable = nullptr) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(data);
    t.set_data_length(len);
    t.set_streaming_width(len);
    t.set_byte_enable_ptr(byte_enable);
    t.set_byte_enable_length(byte_enable ? len : 0);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    socket->b_transport(t, *delay);
    return t.get_response_status();
  }

  void Run() {
    std::vector<uint8_t> program(1000);
    std::iota(program.begin(), program.end(), 7);
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    write_status = Transport(tlm::TLM_WRITE_COMMAND, 0x100, program.data(), 1000, &delay);
    write_delay = delay;
    std::vector<uint8_t> back(1000);
    delay = sc_core::SC_ZERO_TIME;
    read_status = Transport(tlm::TLM_READ_COMMAND, 0x100, back.data(), 1000, &delay);
    read_back_matches = back == program;
    delay = sc_core::SC_ZERO_TIME;
    out_of_range = Transport(tlm::TLM_READ_COMMAND, 4090, back.data(), 16, &delay);
    unsigned char enables[4] = {0xff, 0, 0xff, 0};
    byte_enable = Transport(tlm::TLM_WRITE_COMMAND, 0, back.data(), 4, &delay, enables);
    tlm::tlm_generic_payload dbg;
    uint8_t peek[4] = {};
    dbg.set_command(tlm::TLM_READ_COMMAND);
    dbg.set_address(0x100);
    dbg.set_data_ptr(peek);
    dbg.set_data_length(4);
    debug_bytes = socket->transport_dbg(dbg);
    debug_first = peek[0];
  }

  tlm::tlm_response_status write_status{}, read_status{}, out_of_range{}, byte_enable{};
  sc_core::sc_time write_delay;
  bool read_back_matches = false;
  unsigned debug_bytes = 0;
  uint8_t debug_first = 0;
};

TEST(TlmMemoryTest, LoadAndReadBackThroughTheSocket) {
  MemoryModel memory("host memory", 4096, {100, 8});
  TlmMemory target("host_memory", memory, sc_core::sc_time(10, sc_core::SC_NS));
  Host host("host");
  host.socket.bind(target.socket);
  sc_core::sc_start();
  EXPECT_EQ(host.write_status, tlm::TLM_OK_RESPONSE);
  EXPECT_EQ(host.read_status, tlm::TLM_OK_RESPONSE);
  EXPECT_TRUE(host.read_back_matches);
  // 100 cycles of latency + 1000 / 8 = 125 cycles of data, at 10 ns a cycle.
  EXPECT_EQ(host.write_delay, sc_core::sc_time(2250, sc_core::SC_NS));
  EXPECT_EQ(host.out_of_range, tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(host.byte_enable, tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
  EXPECT_EQ(host.debug_bytes, 4u);
  EXPECT_EQ(host.debug_first, 7);
  EXPECT_EQ(memory.BytesWritten(), 1000u);
  EXPECT_EQ(memory.BytesRead(), 1000u) << "debug reads and failed reads do not count";
}

}  // namespace
}  // namespace tpu::sim
