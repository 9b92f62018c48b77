// A chip of two cores (rtl/tpu_chip.sv) in the SystemC system: each core runs its own
// program from its own program region, both share the host memory's port. Host software
// drives it through the TLM socket, as for one core (tests/sim/tpu_system_test.cc).
#include <gtest/gtest.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "fast/fast_chip.h"
#include "sim/system/tpu_registry.h"
#include "tests/sim/tlm_transport.h"

namespace tpu::sim {
namespace {

struct Host : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Host> socket{"socket"};
  TpuSystemBase& system;
  Host(sc_core::sc_module_name n, TpuSystemBase& s) : sc_core::sc_module(n), system(s) {
    SC_THREAD(Run);
  }
  SC_HAS_PROCESS(Host);

  tlm::tlm_response_status Transport(tlm::tlm_command cmd, uint64_t addr, void* data,
                                     unsigned len) {
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    return TlmTransport(socket, cmd, addr, data, len, &delay);
  }
  uint64_t Csr(uint64_t off) {
    uint64_t v = ~uint64_t{0};
    Transport(tlm::TLM_READ_COMMAND, kCsrBase + off, &v, 8);
    return v;
  }
  tlm::tlm_response_status SetCsr(uint64_t off, uint64_t v) {
    return Transport(tlm::TLM_WRITE_COMMAND, kCsrBase + off, &v, 8);
  }
  static uint64_t CoreCsr(int core, uint64_t field) {
    return kCsrCoreBase + kCsrCoreStride * static_cast<uint64_t>(core) + field;
  }
  static uint64_t CoreReg(int core, int reg) {
    return kCsrRegBase + kCsrCoreRegStride * static_cast<uint64_t>(core) +
           8 * static_cast<uint64_t>(reg);
  }

  // A program that copies `rows` rows of 4 bytes from host address `from` to `to` through
  // the unified buffer, then halts.
  static std::vector<uint8_t> Copy(uint8_t rows, uint8_t from, uint8_t to) {
    std::vector<uint8_t> p(48, 0);
    p[0] = 0x01, p[2] = rows, p[4] = from;   // read_host
    p[16] = 0x05, p[18] = rows, p[24] = to;  // write_host
    p[32] = 0x07;                            // halt
    return p;
  }

  struct RunResult {
    uint64_t state = 99, cycles = 0, fed = 0;
    std::vector<uint64_t> counters[2];
    uint64_t core_state[2] = {99, 99}, core_cycles[2] = {}, instructions[2] = {},
             host_stalls[2] = {};
    bool copied[2] = {false, false};
  };

  RunResult RunBoth(bool second) {
    std::vector<uint8_t> data(64);
    std::iota(data.begin(), data.end(), 1);
    Transport(tlm::TLM_WRITE_COMMAND, kHostMemBase + 0x40, data.data(), 64);
    std::vector<uint8_t> zeros(48, 0);
    Transport(tlm::TLM_WRITE_COMMAND, kHostMemBase + 0x80, zeros.data(), 48);
    std::vector<uint8_t> p0 = Copy(4, 0x40, 0x80), p1 = Copy(4, 0x60, 0xa0);
    Transport(tlm::TLM_WRITE_COMMAND, kProgramBase, p0.data(), 48);
    Transport(tlm::TLM_WRITE_COMMAND, kProgramBase + kCoreProgramStride, p1.data(), 48);
    SetCsr(CoreCsr(1, kCsrCoreWords), second ? 3 : 0);
    SetCsr(kCsrStart, 3);
    sc_core::wait(system.DoneEvent());
    RunResult r;
    r.state = Csr(kCsrState);
    r.cycles = Csr(kCsrCycles);
    r.fed = Csr(kCsrFed);
    for (int c = 0; c < 2; ++c) {
      r.core_state[c] = Csr(CoreCsr(c, kCsrCoreState));
      r.core_cycles[c] = Csr(CoreCsr(c, kCsrCoreCycles));
      r.instructions[c] = Csr(CoreReg(c, hw::kRegFirstCounter + hw::kCounterInstructions));
      r.host_stalls[c] = Csr(CoreReg(c, hw::kRegFirstCounter + hw::kCounterHostMemStall));
      for (int i = 0; i < hw::kNumCounters; ++i) {
        r.counters[c].push_back(Csr(CoreReg(c, hw::kRegFirstCounter + i)));
      }
    }
    // Core 0 copied 0x40.. to 0x80.., core 1 0x60.. to 0xa0..
    std::vector<uint8_t> back(48);
    Transport(tlm::TLM_READ_COMMAND, kHostMemBase + 0x80, back.data(), 48);
    r.copied[0] = std::equal(back.begin(), back.begin() + 16, data.begin());
    r.copied[1] = std::equal(back.begin() + 32, back.end(), data.begin() + 32);
    return r;
  }

  void Run() {
    alone = RunBoth(false);
    both = RunBoth(true);
    // A program region past the last core, and a core's WORDS past its program, are refused.
    uint8_t word[16] = {};
    past_cores = Transport(tlm::TLM_WRITE_COMMAND, kProgramBase + 2 * kCoreProgramStride, word, 16);
    too_many_words = SetCsr(CoreCsr(1, kCsrCoreWords), 4);
    sc_core::sc_stop();
  }

  RunResult alone, both;
  tlm::tlm_response_status past_cores{}, too_many_words{};
};

TEST(TpuChipSystemTest, TwoCoresRunTheirProgramsAndShareTheHostMemory) {
  const std::vector<std::string> built = BuiltTpuChips();
  if (std::find(built.begin(), built.end(), "2x4") == built.end()) {
    GTEST_SKIP() << "no 2 x 4 chip in this build (TPUSIM_TPU_CHIPS)";
  }
  TpuSystemConfig config;
  config.chip.cores = 2;
  config.chip.array_dim = 4;
  config.chip.host_mem_bytes = 1 << 20;
  config.chip.host_mem_latency_cycles = 10;
  config.chip.host_mem_bytes_per_cycle = 4;  // one 4-byte row per cycle
  auto system = MakeTpuSystem("tpu_system", config);
  ASSERT_EQ(system->Cores(), 2);
  Host host("host", *system);
  host.socket.bind(system->socket);
  sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO,
                                          sc_core::SC_DO_NOTHING);
  sc_core::sc_start();
  const auto halted = static_cast<uint64_t>(RunState::kHalted);

  // Core 1 not started: it stays idle, core 0 has the memory to itself.
  EXPECT_EQ(host.alone.state, halted);
  EXPECT_EQ(host.alone.core_state[0], halted);
  EXPECT_EQ(host.alone.core_state[1], static_cast<uint64_t>(RunState::kIdle));
  EXPECT_EQ(host.alone.fed, 3u);
  EXPECT_EQ(host.alone.instructions[0], 3u);
  EXPECT_EQ(host.alone.instructions[1], 0u);
  EXPECT_EQ(host.alone.host_stalls[0], 0u);
  EXPECT_TRUE(host.alone.copied[0]);
  EXPECT_EQ(host.alone.cycles, host.alone.core_cycles[0]);

  // Both: each copies its rows; they take turns on the memory, so each waits for the other
  // and the run takes longer than one core alone.
  EXPECT_EQ(host.both.state, halted);
  EXPECT_EQ(host.both.core_state[0], halted);
  EXPECT_EQ(host.both.core_state[1], halted);
  EXPECT_EQ(host.both.fed, 6u);
  EXPECT_EQ(host.both.instructions[0], 3u);
  EXPECT_EQ(host.both.instructions[1], 3u);
  EXPECT_TRUE(host.both.copied[0]);
  EXPECT_TRUE(host.both.copied[1]);
  EXPECT_GT(host.both.host_stalls[0] + host.both.host_stalls[1], 0u);
  EXPECT_GT(host.both.cycles, host.alone.cycles);
  EXPECT_EQ(host.both.cycles, std::max(host.both.core_cycles[0], host.both.core_cycles[1]));

  std::printf("alone %lu cycles; both %lu (%lu, %lu), host stalls %lu, %lu\n", host.alone.cycles,
              host.both.cycles, host.both.core_cycles[0], host.both.core_cycles[1],
              host.both.host_stalls[0], host.both.host_stalls[1]);
  // The fast engine's chip of two cores: the same cycles and every counter of each core.
  fast::ChipParams params;
  static_cast<hw::ChipParams&>(params) = config.chip;
  fast::FastChip chip(params);
  std::vector<uint8_t> data(64);
  std::iota(data.begin(), data.end(), 1);
  std::copy(data.begin(), data.end(), chip.HostMemory() + 0x40);
  const std::vector<uint8_t> p0 = Host::Copy(4, 0x40, 0x80), p1 = Host::Copy(4, 0x60, 0xa0);
  for (const bool second : {false, true}) {
    const Host::RunResult& rtl = second ? host.both : host.alone;
    std::vector<fast::CoreProgram> programs = {{p0.data(), 3}};
    if (second) programs.push_back({p1.data(), 3});
    const fast::ChipRunResult f = chip.RunCores(programs, {});
    SCOPED_TRACE(second ? "both cores" : "core 0 alone");
    EXPECT_EQ(f.end, fast::RunEnd::kHalted);
    EXPECT_EQ(f.cycles, rtl.cycles);
    for (size_t c = 0; c < f.cores.size(); ++c) {
      EXPECT_EQ(f.cores[c].cycles, rtl.core_cycles[c]) << "core " << c;
      for (int i = 0; i < hw::kNumCounters; ++i) {
        EXPECT_EQ(f.cores[c].counters[i], rtl.counters[c][static_cast<size_t>(i)])
            << "core " << c << ", counter " << hw::kCounterNames[i];
      }
    }
    EXPECT_TRUE(std::equal(data.begin(), data.begin() + 16, chip.HostMemory() + 0x80));
    if (second) {
      EXPECT_TRUE(std::equal(data.begin() + 32, data.begin() + 48, chip.HostMemory() + 0xa0));
    }
  }

  EXPECT_EQ(host.past_cores, tlm::TLM_ADDRESS_ERROR_RESPONSE);
  EXPECT_EQ(host.too_many_words, tlm::TLM_GENERIC_ERROR_RESPONSE);
}

}  // namespace
}  // namespace tpu::sim
