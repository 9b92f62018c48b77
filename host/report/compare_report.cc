#include "host/report/compare_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "host/common/revision.h"

namespace tpu::report {
namespace {

std::string Cell(const std::optional<double>& v, const char* f) {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("n/a");
}

std::optional<double> Percent(const std::optional<double>& v) {
  return v ? std::optional<double>(100 * *v) : std::nullopt;
}

nlohmann::json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string FormatCompareText(const CompareReport& r) {
  std::string text =
      fmt::format("tpusim compare: {} on the first {} {}\n", r.model, r.images, r.inputs);
  text += fmt::format("  {:<20}{:>9}{:>12}{:>14}{:>16}{:>10}  {}\n", "backend", "accuracy",
                      "images/s", "latency/img", "energy/img", "ops/cyc", "notes");
  for (const CompareRow& row : r.rows) {
    text += fmt::format("  {:<20}{:>9}{:>12.0f}{:>11.1f} us{:>16}{:>10}  {}; energy {}\n",
                        row.backend, Cell(Percent(row.accuracy), "{:.2f}%"), row.images_per_s,
                        row.latency_us, Cell(row.energy_uj, "{:.2f} uJ"),
                        Cell(row.ops_per_cycle, "{:.1f}"), row.note, row.energy_source);
  }
  return text + "  " + r.gpu_note + "\n";
}

std::string FormatCompareMarkdown(const CompareReport& r) {
  std::string md =
      "| backend | accuracy | images/s | latency per image | energy per image | ops/cycle | "
      "energy source | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const CompareRow& row : r.rows) {
    md += fmt::format("| {} | {} | {:.0f} | {:.1f} us | {} | {} | {} | {} |\n", row.backend,
                      Cell(Percent(row.accuracy), "{:.2f} %"), row.images_per_s, row.latency_us,
                      Cell(row.energy_uj, "{:.2f} uJ"), Cell(row.ops_per_cycle, "{:.1f}"),
                      row.energy_source, row.note);
  }
  return md + "\n" + r.gpu_note + "\n";
}

nlohmann::json CompareReportJson(const CompareReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CompareRow& row : r.rows) {
    rows.push_back({{"backend", row.backend},
                    {"accuracy", OrNull(row.accuracy)},
                    {"images_per_second", row.images_per_s},
                    {"latency_us", row.latency_us},
                    {"energy_per_image_uj", OrNull(row.energy_uj)},
                    {"energy_source", row.energy_source},
                    {"ops_per_cycle", OrNull(row.ops_per_cycle)},
                    {"notes", row.note}});
  }
  return {{"model", r.model}, {"images", r.images}, {"inputs", r.inputs},
          {"rows", rows},     {"gpu", r.gpu_note},  {"revision", kGitRevision}};
}

}  // namespace tpu::report
