// Helpers for the whole-chip tests: running a program given as assembly text on either
// engine (each test runs in its own process, so the rtl engine's one SystemC system per
// process is no constraint).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/compiler/gemm_program.h"
#include "host/compiler/packing.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/isa/assembler.h"
#include "sim/system/tpu_registry.h"

namespace tpu::test {

using compiler::GemmParams;
using compiler::GemmProgram;
using compiler::MakeGemmProgram;
using compiler::RandomGemmParams;
using engine::EngineKind;

// Loads GEMM program `g` on `engine` and runs it with A.
template <class T>
compiler::GemmRun<T> LoadAndRun(engine::ChipEngine& engine, const compiler::GemmProgramOf<T>& g,
                                const Matrix<T>& a) {
  engine.Load(g.exe);
  return g.Run(engine, a);
}

// Copies `bytes` into `image` at `addr`, growing it as needed.
inline void Put(std::vector<uint8_t>* image, uint64_t addr, const std::vector<uint8_t>& bytes) {
  if (image->size() < addr + bytes.size()) image->resize(addr + bytes.size());
  std::copy(bytes.begin(), bytes.end(), image->begin() + static_cast<std::ptrdiff_t>(addr));
}

// One parameter set for n lanes, as the chip reads it.
inline std::vector<uint8_t> ParamBytes(const GemmParams& p, int n) {
  return compiler::PackParamSets<arith::Int8Format>(p.Channels(), n);
}

inline engine::ExecJob Job(const std::string& asm_text, std::vector<uint8_t> host_image = {},
                           std::vector<uint8_t> weight_image = {}, uint64_t out_addr = 0,
                           uint64_t out_bytes = 0) {
  engine::ExecJob job;
  job.program = isa::Assemble(asm_text, "test.asm");
  job.host_image = std::move(host_image);
  job.weight_image = std::move(weight_image);
  job.host_out_addr = out_addr;
  job.host_out_bytes = out_bytes;
  return job;
}

inline engine::ExecResult RunChip(EngineKind kind, const std::string& preset,
                                  const std::string& asm_text, std::vector<uint8_t> host_image = {},
                                  std::vector<uint8_t> weight_image = {}, uint64_t out_addr = 0,
                                  uint64_t out_bytes = 0, engine::EngineOptions options = {}) {
  const auto chip = engine::MakeChipEngine(kind, config::LoadConfig(preset), options);
  return chip->Run(
      Job(asm_text, std::move(host_image), std::move(weight_image), out_addr, out_bytes));
}

// The engines of a chip of several cores or matrix units: the rtl engine where the chip
// `built` (an entry of CMake TPUSIM_TPU_CHIPS, as "2x4") is built, and the fast engine.
inline std::vector<std::unique_ptr<engine::ChipEngine>> ChipEngines(const config::TpuConfig& config,
                                                                    const std::string& built) {
  std::vector<std::unique_ptr<engine::ChipEngine>> e;
  const std::vector<std::string> chips = sim::BuiltTpuChips();
  if (std::find(chips.begin(), chips.end(), built) != chips.end())
    e.push_back(engine::MakeChipEngine(EngineKind::kRtl, config, {}));
  e.push_back(engine::MakeChipEngine(EngineKind::kFast, config, {}));
  return e;
}

// Where the rtl engine's chip `built` is not in this build, says so in the current test,
// which then reports SKIPPED (after its checks of the fast engine, which still run and can
// still fail it).
inline void SayWhereTheRtlIsMissing(const std::vector<std::unique_ptr<engine::ChipEngine>>& e,
                                    const std::string& built) {
  if (e.size() >= 2) return;
  [&] {
    GTEST_SKIP() << "no RTL of the " << built
                 << " chip in this build (CMake TPUSIM_TPU_CHIPS): the fast engine alone ran";
  }();
}

// Names the engine in parameterized test names: .../rtl, .../fast.
inline std::string EngineParamName(const ::testing::TestParamInfo<EngineKind>& info) {
  return engine::EngineKindName(info.param);
}

}  // namespace tpu::test
