// The energy model: every event the RTL counted, times its energy from a table (by default
// configs/energy/horowitz45.json, Horowitz ISSCC 2014, 45 nm). docs/energy.md explains
// every number and the limits of such estimates.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/config/tpu_config.h"

namespace tpu::report {

struct EnergyTable {
  std::string name, description;
  double mult_int8_pj = 0.2;
  double add_int32_pj = 0.1;
  double mult_bf16_pj = 1.1;  // a bf16 chip's MAC: this multiply and a float32 add
  double add_fp32_pj = 0.9;
  double weight_register_write_pj = 0.03;  // per byte of weight register
  double vpu_lane_pj = 3.3;
  double vpu_lane_bf16_pj = 1.1;                                // a bf16 chip's float32 vector unit
  std::vector<std::pair<double, double>> sram_64bit_access_pj;  // (bytes, pJ) by memory size
  double dram_64bit_access_pj = 1300.0;

  // pJ of one 64-bit access to an SRAM of `bytes` (log-log interpolation between the
  // table's sizes, extrapolated beyond them).
  double SramAccessPj(double bytes) const;
  nlohmann::json ToJson() const;
};

// configs/energy/horowitz45.json.
std::string DefaultEnergyTablePath();
// Throws UsageError naming the file and the field for a missing file, bad JSON, unknown
// keys or a negative energy.
EnergyTable LoadEnergyTable(const std::string& path);
// The same from a JSON object (ToJson's form); `where` names its origin in messages.
EnergyTable EnergyTableFromJson(const nlohmann::json& j, const std::string& where);

// Energy of counted activity, by component, in pJ.
struct EnergyBreakdown {
  std::vector<std::pair<std::string, double>> components;  // mac, weight_load, ...
  double Total() const;
  nlohmann::json ToJson() const;  // {"mac": pJ, ...}
};

// The energy of the events in the chip's counters.
EnergyBreakdown ComputeEnergy(const hw::ChipCounters& counters, const config::TpuConfig& config,
                              const EnergyTable& table);

}  // namespace tpu::report
