// Helpers for the whole-chip tests: running a program given as assembly text.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/common/npy.h"
#include "host/config/tpu_config.h"
#include "host/driver/tpu_driver.h"
#include "host/isa/assembler.h"
#include "host/driver/gemm_program.h"

namespace tpu::test {

using host::GemmProgram;
using host::MakeGemmProgram;
using host::ParamSet;
using host::Put;
using host::RandomParams;

inline host::ExecResult RunChip(const std::string& preset, const std::string& asm_text,
                                std::vector<uint8_t> host_image = {},
                                std::vector<uint8_t> weight_image = {},
                                uint64_t out_addr = 0, uint64_t out_bytes = 0,
                                host::DriverOptions options = {}) {
  host::TpuDriver driver(host::LoadConfig(preset), options);
  host::ExecJob job;
  job.program = isa::Assemble(asm_text, "test.asm");
  job.host_image = std::move(host_image);
  job.weight_image = std::move(weight_image);
  job.host_out_addr = out_addr;
  job.host_out_bytes = out_bytes;
  return driver.Run(job);
}

}  // namespace tpu::test
