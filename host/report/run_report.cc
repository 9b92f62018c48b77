// Reports of a model run on the chip (see run_report.h).
#include "host/report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"
#include "host/common/revision.h"
#include "host/common/text.h"
#include "host/report/exec_report.h"

namespace tpu::report {
namespace {

nlohmann::json StallsJson(const hw::ChipCounters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < hw::kNumCounters; ++i) {
    if (hw::kCounterIsStall[static_cast<size_t>(i)])
      j[hw::kCounterNames[static_cast<size_t>(i)]] = c[i];
  }
  return j;
}

hw::ChipCounters CountersFromJson(const nlohmann::json& j) {
  hw::ChipCounters c;
  for (int i = 0; i < hw::kNumCounters; ++i)
    c[i] = j.at(hw::kCounterNames[static_cast<size_t>(i)]).get<uint64_t>();
  return c;
}

// A core's cycles shared out: how much of them its array was active (useful or not) and it
// waited for host and for weight memory.
struct CoreShares {
  double active, host_stall, weight_stall;
};
CoreShares SharesOf(const hw::ChipCounters& c) {
  const double cycles = c.cycles ? static_cast<double>(c.cycles) : 1.0;
  return {static_cast<double>(c.mxu_stream_cycles) / cycles,
          static_cast<double>(c.host_mem_stall) / cycles,
          static_cast<double>(c.weight_mem_stall) / cycles};
}

// The rows' energies from their counters (their cores' too, and the core rows' names), the
// total as their sum, and each core's counters as the sums of its rows.
void FinishRows(RunReport* rep) {
  rep->total = RunRow();
  rep->total.name = "total";
  rep->cores.clear();
  for (RunRow& row : rep->layers) {
    row.energy = ComputeEnergy(row.counters, rep->config, rep->table);
    rep->cores.resize(std::max(rep->cores.size(), row.cores.size()));
    for (size_t c = 0; c < row.cores.size(); ++c) {
      row.cores[c].name = fmt::format("  core {}", c);
      row.cores[c].energy = ComputeEnergy(row.cores[c].counters, rep->config, rep->table);
      rep->cores[c] += row.cores[c].counters;
    }
    rep->total.macs += row.macs;
    rep->total.counters += row.counters;
    rep->total.mxu_busy.resize(std::max(rep->total.mxu_busy.size(), row.mxu_busy.size()));
    for (size_t m = 0; m < row.mxu_busy.size(); ++m) rep->total.mxu_busy[m] += row.mxu_busy[m];
    rep->total.bound += row.bound;
  }
  rep->total.bound.network = true;  // the largest of the sums, the pipeline's included
  // The total's energy is the sum of the layers', component by component.
  if (!rep->layers.empty()) {
    rep->total.energy.components = rep->layers.front().energy.components;
    for (auto& [k, v] : rep->total.energy.components) v = 0;
    for (const RunRow& row : rep->layers) {
      for (size_t i = 0; i < row.energy.components.size(); ++i) {
        rep->total.energy.components[i].second += row.energy.components[i].second;
      }
    }
  }
}

}  // namespace

double RunRow::OpsPerCycle() const {
  return counters.cycles ? 2.0 * static_cast<double>(macs) / static_cast<double>(counters.cycles)
                         : 0.0;
}

double RunRow::MappingEfficiency() const {
  return counters.macs ? static_cast<double>(macs) / static_cast<double>(counters.macs) : 0.0;
}

std::vector<std::pair<std::string, double>> RunRow::Categories(int64_t n, int64_t units) const {
  const hw::ChipCounters& c = counters;
  const double cycles = c.cycles ? static_cast<double>(c.cycles) : 1.0;
  // Useful MACs in cycles of every array of the core (a cycle in which some matrix unit
  // streams counts as streaming); the rest of the streaming cycles is unused.
  const double useful = static_cast<double>(macs) / static_cast<double>(n * n * units);
  return {{"active_useful", useful / cycles},
          {"active_unused", (static_cast<double>(c.mxu_stream_cycles) - useful) / cycles},
          {"weight_stall", static_cast<double>(c.mxu_stall_weights) / cycles},
          {"weight_shift", static_cast<double>(c.mxu_load_cycles) / cycles},
          {"non_matrix", static_cast<double>(c.wait_non_matrix) / cycles},
          {"vector_unit", static_cast<double>(c.wait_vector) / cycles},
          {"raw_stall", static_cast<double>(c.wait_raw) / cycles},
          {"input_stall", static_cast<double>(c.wait_input) / cycles}};
}

double RunReport::Accuracy() const {
  return images ? static_cast<double>(correct) / static_cast<double>(images) : 0.0;
}

double RunReport::UsPerImage() const {
  return static_cast<double>(ElapsedCycles()) / config.clock_mhz / static_cast<double>(images);
}

RunReport BuildRunReport(const run::TpuRunResult& r, const std::string& model,
                         const std::string& engine, const config::TpuConfig& config,
                         const EnergyTable& table, int batch) {
  RunReport rep;
  rep.model = model;
  rep.engine = engine;
  rep.config = config;
  rep.table = table;
  rep.images = r.images;
  rep.plan = r.plan;
  rep.batch = batch;
  rep.checked = r.checked;
  rep.labelled = r.labelled;
  rep.correct = r.correct;
  rep.mismatches = r.mismatches;
  rep.non_finite = r.non_finite;
  rep.non_finite_outputs = r.non_finite_outputs;
  rep.wall_seconds = r.wall_seconds;
  rep.chip_cycles = r.chip_cycles;
  rep.spilled = r.spilled;
  rep.ub_rows = r.ub_rows;
  for (const run::LayerStats& l : r.layers) {
    RunRow row;
    row.name = l.name;
    row.macs = l.macs;
    row.counters = l.counters;
    row.bound = l.bound;
    row.m = l.m;
    row.k = l.k;
    row.n = l.n;
    row.mxu_busy = l.mxu_busy;
    row.mxus = l.mxus;
    for (size_t c = 0; c < l.cores.size(); ++c) {
      RunRow core;
      core.macs = l.cores[c].macs;
      core.counters = l.cores[c].counters;
      row.cores.push_back(core);
    }
    rep.layers.push_back(row);
  }
  FinishRows(&rep);
  return rep;
}

RunReport RunReportFromJson(const nlohmann::json& j, const std::string& where) {
  RunReport r;
  try {
    r.model = j.at("model").get<std::string>();
    r.engine = j.at("engine").get<std::string>();
    r.images = j.at("images").get<int64_t>();
    r.batch = j.at("batch").get<int>();
    r.inputs = j.value("inputs", "");
    r.labelled = j.value("labelled", true);
    r.shard = j.value("shard", "");
    r.first_input = j.value("first_input", int64_t{0});
    r.run_inputs = j.value("run_inputs", int64_t{0});
    r.plan = j.at("plan").get<std::string>();
    r.checked = j.at("checked").get<bool>();
    r.topology = j.value("topology", false);
    r.gemm_list = j.value("gemm_list", false);
    r.correct = j.value("correct", int64_t{0});
    if (j.contains("non_finite") && j["non_finite"].is_string())
      r.non_finite = j["non_finite"].get<std::string>();
    r.non_finite_outputs = j.value("non_finite_outputs", int64_t{0});
    r.mismatches = j.at("mismatches").is_null() ? 0 : j.at("mismatches").get<int64_t>();
    r.wall_seconds = j.at("wall_seconds").get<double>();
    r.ub_rows = j.value("ub_rows", int64_t{0});
    r.chip_cycles = j.value("chip_cycles", uint64_t{0});
    for (const auto& s : j.value("spilled", nlohmann::json::array()))
      r.spilled.push_back({s.at("name").get<std::string>(), s.at("bytes_per_image").get<int64_t>(),
                           s.at("readers").get<int64_t>()});
    r.config = config::FromJson(j.at("config"), "run", where + ": config");
    r.table = EnergyTableFromJson(j.at("energy_table"), where + ": energy_table");
    for (const auto& l : j.at("layers")) {
      RunRow row;
      row.name = l.at("name").get<std::string>();
      row.macs = l.at("macs").get<int64_t>();
      row.counters = CountersFromJson(l.at("counters"));
      row.mxu_busy = l.value("mxu_busy_cycles", std::vector<uint64_t>{});
      row.mxus = l.value("mxus", 0);
      for (const auto& c : l.value("cores", nlohmann::json::array())) {
        RunRow core;
        core.macs = c.at("macs").get<int64_t>();
        core.counters = CountersFromJson(c.at("counters"));
        row.cores.push_back(core);
      }
      if (l.contains("bound")) {
        const auto& b = l.at("bound");
        row.bound.array = b.at("array").get<double>();
        row.bound.weights = b.at("weights").get<double>();
        row.bound.hbm_dma = b.value("hbm_dma", 0.0);
        row.bound.host = b.at("host").get<double>() - row.bound.hbm_dma;
        // "vector": the activation unit's term in the reports of stops before 88
        row.bound.activation = b.value("activation", b.value("vector", 0.0));
        row.bound.vector_unit = b.value("vector_unit", 0.0);
        row.bound.pipeline = b.at("pipeline").get<double>();
        row.bound.staged_host = b.value("staged_host", 0.0);
        row.m = l.at("m").get<int64_t>();
        row.k = l.at("k").get<int64_t>();
        row.n = l.at("n").get<int64_t>();
      }
      r.layers.push_back(row);
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(where + ": not a tpusim run report with counters (" + e.what() + ")");
  }
  FinishRows(&r);
  return r;
}

RunReport MergeRunReports(const std::vector<RunReport>& shards) {
  if (shards.empty()) throw UsageError("no run reports to merge");
  RunReport m = shards.front();
  m.chip_cycles = m.ElapsedCycles();
  auto same = [&](const RunReport& s, const std::string& what, bool ok) {
    if (!ok) {
      throw UsageError(
          fmt::format("slice {} differs from slice {} in its {}; merge only the "
                      "slices of one run",
                      s.shard, m.shard, what));
    }
  };
  for (size_t k = 1; k < shards.size(); ++k) {
    const RunReport& s = shards[k];
    same(s, "model", s.model == m.model);
    same(s, "engine", s.engine == m.engine);
    same(s, "inputs", s.inputs == m.inputs);
    same(s, "chip", s.config.ToJson() == m.config.ToJson());
    same(s, "batch", s.batch == m.batch);
    same(s, "checking", s.checked == m.checked && s.labelled == m.labelled);
    same(s, "whole run's number of inputs", s.run_inputs == m.run_inputs);
    if (s.first_input != m.first_input + m.images) {
      throw UsageError(fmt::format(
          "slice {} starts at input {}, but the slices before it end at input {}; merge the "
          "slices of one run, each once",
          s.shard, s.first_input, m.first_input + m.images));
    }
    same(s, "layers", s.layers.size() == m.layers.size());
    for (size_t i = 0; i < s.layers.size(); ++i) {
      same(s, "layers", s.layers[i].name == m.layers[i].name);
      m.layers[i].macs += s.layers[i].macs;
      m.layers[i].counters += s.layers[i].counters;
      m.layers[i].bound += s.layers[i].bound;
      m.layers[i].m += s.layers[i].m;
      same(s, "matrix units", s.layers[i].mxu_busy.size() == m.layers[i].mxu_busy.size());
      for (size_t u = 0; u < s.layers[i].mxu_busy.size(); ++u)
        m.layers[i].mxu_busy[u] += s.layers[i].mxu_busy[u];
      m.layers[i].mxus = std::max(m.layers[i].mxus, s.layers[i].mxus);
      same(s, "cores", s.layers[i].cores.size() == m.layers[i].cores.size());
      for (size_t c = 0; c < s.layers[i].cores.size(); ++c) {
        m.layers[i].cores[c].macs += s.layers[i].cores[c].macs;
        m.layers[i].cores[c].counters += s.layers[i].cores[c].counters;
      }
    }
    m.images += s.images;
    m.correct += s.correct;
    m.mismatches += s.mismatches;
    m.non_finite_outputs += s.non_finite_outputs;
    if (m.non_finite.empty()) m.non_finite = s.non_finite;
    m.wall_seconds += s.wall_seconds;
    m.chip_cycles += s.ElapsedCycles();
  }
  if (m.first_input != 0 || (m.run_inputs > 0 && m.images != m.run_inputs)) {
    throw UsageError(
        fmt::format("the slices hold inputs {} to {} of a run of {}; merge every slice of one run",
                    m.first_input, m.first_input + m.images - 1, m.run_inputs));
  }
  m.shard.clear();
  m.first_input = 0;
  FinishRows(&m);
  return m;
}

namespace {

nlohmann::json CategoriesJson(const RunRow& row, const config::TpuConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : row.Categories(c.array_dim, c.mxus_per_core)) j[k] = v;
  return j;
}

// The bound's fields of a row (none where no bound was computed).
void AddBound(const RunRow& row, nlohmann::json* j) {
  if (!row.HasBound()) return;
  const compiler::Bound& b = row.bound;
  (*j)["bound"] = {{"array", b.array},           {"weights", b.weights},
                   {"host", b.Host()},           {"staged_host", b.staged_host},
                   {"activation", b.activation}, {"vector_unit", b.vector_unit},
                   {"pipeline", b.pipeline}};
  if (b.hbm_dma > 0) (*j)["bound"]["hbm_dma"] = b.hbm_dma;  // within "host"
  (*j)["bound_cycles"] = b.Cycles();
  (*j)["cycles_over_bound"] = static_cast<double>(row.Cycles()) / b.Cycles();
  (*j)["binds"] = b.Binds();
}

// One row of the per-layer table, as RunReportJson writes it.
nlohmann::json LayerJson(const RunRow& row, const RunReport& r) {
  const double peak = r.Peak();
  nlohmann::json j = {{"name", row.name},
                      {"counters", CountersJson(row.counters)},
                      {"macs", row.macs},
                      {"cycles", row.Cycles()},
                      {"ops_per_cycle", row.OpsPerCycle()},
                      {"utilization", row.OpsPerCycle() / peak},
                      {"mapping_efficiency", row.MappingEfficiency()},
                      {"mxu_stream_cycles", row.counters.mxu_stream_cycles},
                      {"mxu_not_streaming_cycles", row.NotStreaming()},
                      {"stall_cycles", StallsJson(row.counters)},
                      {"ub_accesses", row.UbAccesses()},
                      {"acc_accesses", row.AccAccesses()},
                      {"dram_bytes", row.DramBytes()},
                      {"energy_pj", row.energy.Total()},
                      {"energy_components_pj", row.energy.ToJson()},
                      {"tpu_v1_categories", CategoriesJson(row, r.config)}};
  if (row.HasBound()) {
    j["m"] = row.m;
    j["k"] = row.k;
    j["n"] = row.n;
  }
  AddBound(row, &j);
  if (!row.mxu_busy.empty()) j["mxu_busy_cycles"] = row.mxu_busy;
  if (row.mxus > 0) j["mxus"] = row.mxus;
  for (const RunRow& core : row.cores) {  // on a chip of several cores
    j["cores"].push_back({{"macs", core.macs},
                          {"counters", CountersJson(core.counters)},
                          {"cycles", core.Cycles()},
                          {"ops_per_cycle", core.OpsPerCycle()},
                          {"utilization", core.OpsPerCycle() / peak},
                          {"energy_pj", core.energy.Total()}});
  }
  return j;
}

// What the run's check found: accuracy, bit-exactness and mismatches (null where not checked).
void AddCheck(const RunReport& r, nlohmann::json* j) {
  const bool labels = r.checked && !r.topology && r.labelled;
  (*j)["accuracy"] = labels ? nlohmann::json(r.Accuracy()) : nlohmann::json(nullptr);
  (*j)["bit_exact"] = r.checked ? nlohmann::json(r.mismatches == 0) : nlohmann::json(nullptr);
  (*j)["mismatches"] = r.checked ? nlohmann::json(r.mismatches) : nlohmann::json(nullptr);
  if (r.checked && !r.topology && r.config.dtype == hw::Dtype::kBf16) {  // the first NaN or inf
    (*j)["non_finite"] =
        r.non_finite.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.non_finite);
    (*j)["non_finite_outputs"] = r.non_finite_outputs;
  }
}

}  // namespace

nlohmann::json RunReportJson(const RunReport& r) {
  const double images = static_cast<double>(r.images);
  const double peak = r.Peak();
  nlohmann::json layers = nlohmann::json::array();
  for (const RunRow& row : r.layers) layers.push_back(LayerJson(row, r));
  const RunRow& t = r.total;
  nlohmann::json j = {
      {"model", r.model},
      {"engine", r.engine},
      {"images", r.images},
      {"batch", r.batch},
      {"inputs", r.inputs},
      {"labelled", r.labelled},
      {"plan", r.plan},
      {"ub_rows", r.ub_rows},
      {"checked", r.checked},
      {"cycles", r.ElapsedCycles()},  // the chip's time; on several cores, not their sum
      {"chip_cycles", r.ElapsedCycles()},
      {"macs", t.macs},
      {"mapping_efficiency", t.MappingEfficiency()},
      {"mxu_stream_cycles_per_image", static_cast<double>(t.counters.mxu_stream_cycles) / images},
      {"stall_cycles", StallsJson(t.counters)},
      {"ops_per_cycle", t.OpsPerCycle()},
      {"utilization", t.OpsPerCycle() / peak},
      {"us_per_image", r.UsPerImage()},
      {"images_per_second", 1e6 / r.UsPerImage()},
      {"energy_pj", t.energy.Total()},
      {"energy_per_image_pj", t.energy.Total() / images},
      {"energy_components_pj", t.energy.ToJson()},
      {"tops_per_watt", 2.0 * static_cast<double>(t.macs) / t.energy.Total()},
      {"energy_table", r.table.ToJson()},
      {"layers", layers},
      {"config", r.config.ToJson()},
      {"wall_seconds", r.wall_seconds},
      {"revision", kGitRevision}};
  if (!t.mxu_busy.empty()) j["mxu_busy_cycles"] = t.mxu_busy;
  if (!r.cores.empty()) j["core_cycles"] = t.Cycles();  // every core's cycles, summed
  j["topology"] = r.topology;
  if (r.topology) j["gemm_list"] = r.gemm_list;
  j["counters"] = CountersJson(t.counters);
  for (const hw::ChipCounters& c : r.cores) {  // each core's, on a chip of several cores
    const CoreShares k = SharesOf(c);
    j["cores"].push_back({{"counters", CountersJson(c)},
                          {"array_active", k.active},
                          {"host_mem_stall_share", k.host_stall},
                          {"weight_mem_stall_share", k.weight_stall}});
  }
  j["tpu_v1_categories"] = CategoriesJson(t, r.config);
  AddBound(t, &j);
  j["correct"] = r.correct;
  j["spilled"] = nlohmann::json::array();
  for (const compiler::SpilledTensor& s : r.spilled)
    j["spilled"].push_back(
        {{"name", s.name}, {"bytes_per_image", s.bytes_per_image}, {"readers", s.readers}});
  if (!r.shard.empty()) {
    j["shard"] = r.shard;
    j["first_input"] = r.first_input;
    j["run_inputs"] = r.run_inputs;
  }
  AddCheck(r, &j);
  return j;
}

// On a core of several matrix units, the compiler's choice per operation in one line: how
// many went to several units (their rows say to how many); empty otherwise.
std::string UnitsPlanText(const RunReport& r) {
  int recorded = 0, spread = 0, most = 0;
  for (const RunRow& row : r.layers) {
    recorded += row.mxus > 0;
    spread += row.mxus > 1;
    most = std::max(most, row.mxus);
  }
  if (recorded == 0) return "";
  if (spread == 0) {
    return fmt::format(
        "  units      every operation on one of the core's {} matrix units (none is bound by the "
        "array with two: docs/compiler.md, \"Several matrix units\")\n",
        r.config.mxus_per_core);
  }
  return fmt::format(
      "  units      {} of {} operations spread over {} of the core's {} matrix units, the "
      "others on one (each row's units busy line says which)\n",
      spread, recorded, most > 2 ? fmt::format("2 to {}", most) : std::to_string(most),
      r.config.mxus_per_core);
}

namespace {

// The run's first line: what ran, on which chip and engine.
std::string RunHeaderText(const RunReport& r) {
  return r.topology
             ? fmt::format("tpusim run: {} ({} {}) on {} ({}, {} MHz), {} engine\n", r.model,
                           r.layers.size(),
                           r.gemm_list ? "GEMMs, each on a batch of its M"
                                       : fmt::format("layers, batch {}", r.batch),
                           r.config.name, config::ShapeText(r.config), r.config.clock_mhz, r.engine)
             : fmt::format(
                   "tpusim run: {} on {} ({}, {} MHz), {} engine, {} {}{} in batches of {}\n",
                   r.model, r.config.name, config::ShapeText(r.config), r.config.clock_mhz,
                   r.engine, r.images, r.inputs,
                   r.shard.empty()
                       ? ""
                       : fmt::format(" (slice {} from input {})", r.shard, r.first_input),
                   std::min<int64_t>(r.batch, std::max<int64_t>(r.images, 1)));  // as they ran
}

// Whether the values were checked, and how they came out.
std::string CheckText(const RunReport& r) {
  std::string s;
  if (r.topology && r.checked) {
    s += fmt::format(
        "  bit-exact  {} (every layer's {} outputs, random data, against the CPU {} reference; "
        "{} layers differ)\n",
        r.mismatches == 0 ? "yes" : "NO", hw::Name(r.config.dtype), hw::Name(r.config.dtype),
        r.mismatches);
  } else if (r.checked) {
    if (r.labelled) {
      s += fmt::format("  accuracy   {:.2f} % ({} of {})\n", 100 * r.Accuracy(), r.correct,
                       r.images);
    }
    if (r.config.dtype == hw::Dtype::kBf16) {
      s += fmt::format(
          "  bit-exact  {} (bf16 outputs of every input against the CPU bf16 reference, "
          "docs/bf16.md; {} differ)\n",
          r.mismatches == 0 ? "yes" : "NO", r.mismatches);
      if (!r.non_finite.empty()) {
        s += fmt::format(
            "  NaN/inf    {}; the outputs of {} of {} inputs are not finite: equal "
            "to the reference, but no result\n",
            r.non_finite, r.non_finite_outputs, r.images);
      }
    } else {
      s += fmt::format(
          "  bit-exact  {} (int8 outputs of every input against the CPU int8 "
          "reference; {} differ)\n",
          r.mismatches == 0 ? "yes" : "NO", r.mismatches);
    }
  } else {
    s += "  values     not computed (timing only): cycles, traffic and energy only\n";
  }
  return s;
}

// The per-layer table, with each row's units busy and core rows, and the total.
std::string LayerTableText(const RunReport& r, const char* unit) {
  const double images = static_cast<double>(r.images);
  const double peak = r.Peak();
  std::string s;
  const bool bounds = r.total.HasBound();
  // The name column: 14 wide, or one more than the longest name (conv1+maxpool1 is 14).
  size_t name_w = 14;
  for (const RunRow& row : r.layers) {
    name_w = std::max(name_w, row.name.size() + 1);
    for (const RunRow& core : row.cores) name_w = std::max(name_w, core.name.size() + 1);
  }
  s += fmt::format("  {:<{}}{:>14}{:>10}{:>9}{:>7}{:>7}{:>10}{:>10}{:>10}{:>11}{:>11}{}\n",
                   std::string("per ") + unit, name_w, "MACs", "cycles", "ops/cyc", "util", "map",
                   "MXU idle", "UB rd+wr", "acc rd+wr", "DRAM B", "energy nJ",
                   bounds ? fmt::format("{:>10}{:>8}  {}", "bound", "x bound", "binds") : "");
  auto line = [&](const RunRow& row) {
    auto per = [&](double v) { return Grouped(static_cast<int64_t>(v / images + 0.5)); };
    s += fmt::format(
        "  {:<{}}{:>14}{:>10}{:>9.1f}{:>6.1f}%{:>6.0f}%{:>10}{:>10}{:>10}{:>11}{:>11.1f}\n",
        row.name, name_w, per(static_cast<double>(row.macs)),
        per(static_cast<double>(row.Cycles())), row.OpsPerCycle(), 100 * row.OpsPerCycle() / peak,
        100 * row.MappingEfficiency(), per(static_cast<double>(row.NotStreaming())),
        per(static_cast<double>(row.UbAccesses())), per(static_cast<double>(row.AccAccesses())),
        per(static_cast<double>(row.DramBytes())), row.energy.Total() / images / 1000);
    if (bounds && row.HasBound()) {
      s.pop_back();
      s += fmt::format("{:>10}{:>8.2f}  {}\n", per(row.bound.Cycles()),
                       static_cast<double>(row.Cycles()) / row.bound.Cycles(), row.bound.Binds());
    }
  };
  // On a core of several matrix units, each unit's busy cycles, a share of the row's.
  auto units = [&](const RunRow& row) {
    if (row.mxu_busy.empty()) return;
    s += "    units busy";
    for (const uint64_t b : row.mxu_busy)
      s += fmt::format("{:>7.1f}%", 100.0 * static_cast<double>(b) /
                                        static_cast<double>(std::max<uint64_t>(row.Cycles(), 1)));
    if (row.mxus > 0)
      s += row.mxus > 1 ? fmt::format("  (spread over {})", row.mxus) : "  (on one)";
    s += "\n";
  };
  for (const RunRow& row : r.layers) {
    line(row);
    units(row);
    for (const RunRow& core : row.cores) line(core);  // on a chip of several cores
  }
  line(r.total);
  units(r.total);
  return s;
}

// The network's stalls, cycle categories, energy and efficiency.
std::string TotalsText(const RunReport& r, const char* unit) {
  const double images = static_cast<double>(r.images);
  std::string s;
  std::string waits;
  for (int i = 0; i < hw::kNumCounters; ++i) {
    const uint64_t v = r.total.counters[i];
    if (hw::kCounterIsStall[static_cast<size_t>(i)] && v > 0) {
      waits += fmt::format("{} {}  ", hw::kCounterNames[static_cast<size_t>(i)],
                           Grouped(static_cast<int64_t>(static_cast<double>(v) / images + 0.5)));
    }
  }
  s += fmt::format("  stalls     per {} (counters of docs/architecture.md): {}\n", unit, waits);
  std::string shares;
  for (const auto& [k, v] : r.total.Categories(r.config.array_dim, r.config.mxus_per_core)) {
    shares += fmt::format("{} {:.1f}%  ", k, 100 * v);
  }
  s += "  cycles     TPU v1's categories (docs/timing.md): " + shares + "\n";
  std::string parts;
  for (const auto& [k, v] : r.total.energy.components) {
    parts += fmt::format("{} {:.1f}  ", k, v / images / 1000);
  }
  s += fmt::format("  energy     {:.1f} nJ per {} (table {}): {}\n",
                   r.total.energy.Total() / images / 1000, unit, r.table.name, parts);
  s += fmt::format("  efficiency {:.2f} TOPS/W (2 x MACs / energy)\n",
                   2.0 * static_cast<double>(r.total.macs) / r.total.energy.Total());
  return s;
}

// On a chip of several cores, how the work was shared and each core's cycles.
std::string CoresText(const RunReport& r) {
  if (r.config.cores <= 1) return "";
  std::string s;
  bool columns = false;  // a layer split by output channels (topology.h, model_parallel.h)
  for (const RunRow& l : r.layers)
    columns = columns || l.name.find(run::kOutputChannelsSplit) != std::string::npos;
  // One image of a whole network: the layers not split run whole on every core.
  const bool whole = r.plan.find(run::kModelParallel) != std::string::npos;
  s += fmt::format(
      "  cores      {} cores, {}: {} chip cycles; a layer's row "
      "counts each core's cycles ({} in all), its core rows each core's own\n",
      r.config.cores,
      whole     ? "each a share of the output channels where a layer says so, else the whole "
                  "layer (one image)"
      : columns ? "each a share of every batch (of the output channels where a layer says so)"
                : "each a share of every batch",
      Grouped(static_cast<int64_t>(r.ElapsedCycles())),
      Grouped(static_cast<int64_t>(r.total.Cycles())));
  for (size_t c = 0; c < r.cores.size(); ++c) {
    const CoreShares k = SharesOf(r.cores[c]);
    s += fmt::format(
        "    core {}   {} cycles, array active {:.1f}% (useful or not), {:.1f}% host-memory and "
        "{:.1f}% weight-memory stall\n",
        c, Grouped(static_cast<int64_t>(r.cores[c].cycles)), 100.0 * k.active, 100.0 * k.host_stall,
        100.0 * k.weight_stall);
  }
  return s;
}

}  // namespace

std::string FormatRunText(const RunReport& r) {
  const char* unit = r.gemm_list ? "run" : "image";  // a GEMM list runs once
  std::string s = RunHeaderText(r);
  if (!r.plan.empty()) s += "  plan       " + r.plan + "\n";
  s += UnitsPlanText(r);
  s += CheckText(r);
  s += LayerTableText(r, unit);
  s += TotalsText(r, unit);
  s += CoresText(r);
  s += fmt::format(
      "  time       {:.1f} us per {} at {} MHz = {:.0f} {}s/s "
      "(simulated); {:.1f} s wall\n",
      r.UsPerImage(), unit, r.config.clock_mhz, 1e6 / r.UsPerImage(), unit, r.wall_seconds);
  return s;
}

std::string RunReportCsv(const RunReport& r) {
  const double peak = r.Peak();
  std::string csv =
      "layer,macs,cycles,ops_per_cycle,utilization,mapping_efficiency,"
      "mxu_not_streaming_cycles,ub_accesses,acc_accesses,dram_bytes,energy_pj,"
      "m,k,n,bound_cycles,cycles_over_bound,binds";
  for (const auto& [k, v] : r.total.Categories(r.config.array_dim, r.config.mxus_per_core))
    csv += "," + k;
  csv += ",core\n";
  // A layer's row (core: empty), or one core's part of it (the layer's name, its number).
  auto line = [&](const std::string& name, const RunRow& row, const std::string& core) {
    csv += fmt::format("{},{},{},{:.4f},{:.6f},{:.6f},{},{},{},{},{:.1f}", CsvQuoted(name),
                       row.macs, row.Cycles(), row.OpsPerCycle(), row.OpsPerCycle() / peak,
                       row.MappingEfficiency(), row.NotStreaming(), row.UbAccesses(),
                       row.AccAccesses(), row.DramBytes(), row.energy.Total());
    if (row.HasBound()) {
      csv += fmt::format(",{},{},{},{:.1f},{:.4f},{}", row.m, row.k, row.n, row.bound.Cycles(),
                         static_cast<double>(row.Cycles()) / row.bound.Cycles(), row.bound.Binds());
    } else {
      csv += ",,,,,,";
    }
    for (const auto& [k, v] : row.Categories(r.config.array_dim, r.config.mxus_per_core))
      csv += fmt::format(",{:.6f}", v);
    csv += "," + core + "\n";
  };
  for (const RunRow& row : r.layers) {
    line(row.name, row, "");
    for (size_t c = 0; c < row.cores.size(); ++c) line(row.name, row.cores[c], std::to_string(c));
  }
  return csv;
}

}  // namespace tpu::report
