// What `tpusim exec` prints and writes: status, cycles, derived rates and every counter.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "host/config/tpu_config.h"
#include "host/driver/tpu_driver.h"

namespace tpu::host {

std::string FormatExecReport(const ExecResult& r, const TpuConfig& config,
                             const std::string& program_name, size_t instructions);
nlohmann::json ExecReportJson(const ExecResult& r, const TpuConfig& config,
                              const std::string& program_name, size_t instructions);

}  // namespace tpu::host
