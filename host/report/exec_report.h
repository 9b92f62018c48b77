// What `tpusim exec` prints and writes: status, cycles, derived rates and every counter.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/report/program_bound.h"

namespace tpu::report {

// `bound`, where given, is the programs' attainable bound (program_bound.h): reported, with
// the run's cycles over it, when the run reached HALT.
std::string FormatExecReport(const engine::ExecResult& r, const config::TpuConfig& config,
                             const std::string& program_name, size_t instructions,
                             const ProgramBound* bound = nullptr);
nlohmann::json ExecReportJson(const engine::ExecResult& r, const config::TpuConfig& config,
                              const std::string& program_name, size_t instructions,
                              const ProgramBound* bound = nullptr);
// Every counter by name (register order).
nlohmann::json CountersJson(const hw::ChipCounters& c);

}  // namespace tpu::report
