// The energy model (see energy.h, docs/energy.md).
#include "host/report/energy.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"

namespace tpu::report {

double EnergyTable::SramAccessPj(double bytes) const {
  const auto& t = sram_64bit_access_pj;
  if (t.empty()) return 0.0;
  if (t.size() == 1) return t[0].second;
  size_t i = 0;
  while (i + 2 < t.size() && bytes > t[i + 1].first) ++i;
  const double x0 = std::log(t[i].first), x1 = std::log(t[i + 1].first);
  const double y0 = std::log(t[i].second), y1 = std::log(t[i + 1].second);
  return std::exp(y0 + (y1 - y0) * (std::log(bytes) - x0) / (x1 - x0));
}

nlohmann::json EnergyTable::ToJson() const {
  nlohmann::json sram = nlohmann::json::array();
  for (const auto& [b, pj] : sram_64bit_access_pj) sram.push_back({b, pj});
  return {{"name", name},
          {"description", description},
          {"mult_int8_pj", mult_int8_pj},
          {"add_int32_pj", add_int32_pj},
          {"mult_bf16_pj", mult_bf16_pj},
          {"add_fp32_pj", add_fp32_pj},
          {"weight_register_write_pj", weight_register_write_pj},
          {"vpu_lane_pj", vpu_lane_pj},
          {"vpu_lane_bf16_pj", vpu_lane_bf16_pj},
          {"sram_64bit_access_pj", sram},
          {"dram_64bit_access_pj", dram_64bit_access_pj}};
}

std::string DefaultEnergyTablePath() { return TPUSIM_SOURCE_DIR "/configs/energy/horowitz45.json"; }

EnergyTable LoadEnergyTable(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("energy table '" + path + "' cannot be opened");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("energy table '" + path + "' is not valid JSON: " + e.what());
  }
  EnergyTable t = EnergyTableFromJson(j, path);
  if (!j.contains("name")) t.name = path;
  return t;
}

EnergyTable EnergyTableFromJson(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw UsageError("energy table '" + path + "' must be a JSON object");
  const nlohmann::json known = EnergyTable().ToJson();
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) {
      std::string list;
      for (const auto& item : known.items()) list += (list.empty() ? "" : ", ") + item.key();
      throw UsageError("energy table '" + path + "': unknown key '" + key + "' (known: " + list +
                       ")");
    }
  }
  EnergyTable t;
  try {
    t.name = j.value("name", "");
    t.description = j.value("description", "");
    t.mult_int8_pj = j.value("mult_int8_pj", t.mult_int8_pj);
    t.add_int32_pj = j.value("add_int32_pj", t.add_int32_pj);
    t.mult_bf16_pj = j.value("mult_bf16_pj", t.mult_bf16_pj);
    t.add_fp32_pj = j.value("add_fp32_pj", t.add_fp32_pj);
    t.weight_register_write_pj = j.value("weight_register_write_pj", t.weight_register_write_pj);
    t.vpu_lane_pj = j.value("vpu_lane_pj", t.vpu_lane_pj);
    t.vpu_lane_bf16_pj = j.value("vpu_lane_bf16_pj", t.vpu_lane_bf16_pj);
    t.dram_64bit_access_pj = j.value("dram_64bit_access_pj", t.dram_64bit_access_pj);
    if (j.contains("sram_64bit_access_pj")) {
      for (const auto& p : j["sram_64bit_access_pj"]) {
        t.sram_64bit_access_pj.emplace_back(p.at(0).get<double>(), p.at(1).get<double>());
      }
    } else {
      t.sram_64bit_access_pj = {{8192, 10.0}, {32768, 20.0}, {1048576, 100.0}};
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("energy table '" + path + "': a field has the wrong type: " + e.what());
  }
  for (double v :
       {t.mult_int8_pj, t.add_int32_pj, t.mult_bf16_pj, t.add_fp32_pj, t.weight_register_write_pj,
        t.vpu_lane_pj, t.vpu_lane_bf16_pj, t.dram_64bit_access_pj}) {
    if (!(v >= 0)) throw UsageError("energy table '" + path + "': energies must be >= 0 pJ");
  }
  for (const auto& [b, pj] : t.sram_64bit_access_pj) {
    if (!(b > 0 && pj >= 0)) {
      throw UsageError("energy table '" + path +
                       "': sram_64bit_access_pj needs [bytes > 0, pJ >= 0] pairs");
    }
  }
  return t;
}

nlohmann::json EnergyBreakdown::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : components) j[k] = v;
  return j;
}

double EnergyBreakdown::Total() const {
  double s = 0;
  for (const auto& [k, v] : components) s += v;
  return s;
}

EnergyBreakdown ComputeEnergy(const hw::ChipCounters& k, const config::TpuConfig& config,
                              const EnergyTable& t) {
  const double n = config.array_dim;
  const bool bf16 = config.dtype == hw::Dtype::kBf16;
  const double eb = hw::ElementBytes(config.dtype), row = n * eb;  // an operand's, a row's bytes
  auto c = [&](uint64_t hw::ChipCounters::*field) { return static_cast<double>(k.*field); };
  using C = hw::ChipCounters;
  // SRAM energy per byte of each on-chip memory, from its size.
  const double ub_bytes = static_cast<double>(config.ub_depth_rows) * row;
  const double acc_bytes = static_cast<double>(config.acc_depth_rows) * n * 4;
  const double fifo_bytes = static_cast<double>(config.weight_fifo_tiles) * n * row;
  const double ub_pj_b = t.SramAccessPj(ub_bytes) / 8, acc_pj_b = t.SramAccessPj(acc_bytes) / 8,
               fifo_pj_b = t.SramAccessPj(fifo_bytes) / 8;
  const double mac_pj = bf16 ? t.mult_bf16_pj + t.add_fp32_pj : t.mult_int8_pj + t.add_int32_pj;
  EnergyBreakdown e;
  e.components = {
      {"mac", c(&C::macs) * mac_pj},
      {"weight_load", c(&C::weight_fifo_pops) * row * t.weight_register_write_pj},
      {"unified_buffer", (c(&C::ub_reads) + c(&C::ub_writes)) * row * ub_pj_b},
      {"accumulators", (c(&C::acc_reads) + c(&C::acc_writes)) * n * 4 * acc_pj_b},
      {"weight_fifo", (c(&C::weight_fifo_pushes) + c(&C::weight_fifo_pops)) * row * fifo_pj_b},
      {"vpu", c(&C::vpu_rows_in) * n * (bf16 ? t.vpu_lane_bf16_pj : t.vpu_lane_pj)},
      {"dram", (c(&C::host_bytes_read) + c(&C::host_bytes_written) + c(&C::weight_bytes_read) +
                c(&C::weight_bytes_written)) *
                   t.dram_64bit_access_pj / 8},
  };
  return e;
}

}  // namespace tpu::report
