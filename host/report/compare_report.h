// What `tpusim compare` prints and writes: one row per backend (CPU, simulated TPU, GPU)
// with accuracy, throughput, latency, energy and where each number came from.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tpu::report {

struct CompareRow {
  std::string backend;
  std::optional<double> accuracy;  // where the inputs have labels
  double images_per_s = 0, latency_us = 0;
  std::optional<double> energy_uj;  // per image
  std::string energy_source;        // measured (RAPL), modelled, unavailable
  std::optional<double> ops_per_cycle;
  std::string note;
};

struct CompareReport {
  std::string model;
  int64_t images = 0;
  std::string inputs = "test images";  // where they came from
  std::vector<CompareRow> rows;
  std::string gpu_note;  // why there are (no) GPU rows
};

std::string FormatCompareText(const CompareReport& r);
std::string FormatCompareMarkdown(const CompareReport& r);
nlohmann::json CompareReportJson(const CompareReport& r);

}  // namespace tpu::report
