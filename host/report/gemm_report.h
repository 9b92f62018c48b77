// The report of a `tpusim gemm` run: a table for people and JSON for machines, both with
// the resolved configuration and the git revision.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "host/config/tpu_config.h"
#include "host/gemm/gemm_runner.h"

namespace tpu::report {

// Derived figures, computed once for both formats.
struct GemmFigures {
  double ops_per_cycle = 0;       // 2 * useful MACs / cycles
  double peak_ops_per_cycle = 0;  // 2 * N * N
  double utilization = 0;         // ops_per_cycle / peak
  double mapping_efficiency = 0;  // useful MACs / issued MACs
  double time_us = 0;             // cycles at the configured clock
  double sim_cycles_per_second = 0;
};
GemmFigures ComputeFigures(const gemm::GemmRunResult& r, const config::TpuConfig& config);

std::string FormatGemmReport(const gemm::GemmRunResult& r, const config::TpuConfig& config);
nlohmann::json GemmReportJson(const gemm::GemmRunResult& r, const config::TpuConfig& config);

}  // namespace tpu::report
