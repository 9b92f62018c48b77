// What `tpusim exec` prints and writes: status, cycles, derived rates and every counter.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"

namespace tpu::report {

std::string FormatExecReport(const engine::ExecResult& r, const config::TpuConfig& config,
                             const std::string& program_name, size_t instructions);
nlohmann::json ExecReportJson(const engine::ExecResult& r, const config::TpuConfig& config,
                              const std::string& program_name, size_t instructions);
// Every counter by name (register order).
nlohmann::json CountersJson(const hw::ChipCounters& c);

}  // namespace tpu::report
