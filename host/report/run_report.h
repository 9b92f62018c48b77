// What `tpusim run` reports about a model run on the chip: a row per layer job and the
// total (MACs, cycles, rates, mapping efficiency, stalls by reason, traffic, energy), as a
// text table, JSON and CSV. The rows are built once here; the CLI only prints them. The
// JSON keeps every raw counter, so reports of slices of the inputs (run --shard) merge
// into the report of the whole run (MergeRunReports).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/report/energy.h"
#include "host/run/tpu_runner.h"

namespace tpu::report {

struct RunRow {
  std::string name;
  int64_t macs = 0;  // useful MACs
  hw::ChipCounters counters;
  EnergyBreakdown energy;
  // The attainable bound (host/compiler/graph_bound.h; zero where none was computed) and the
  // layer as a GEMM (m rows over the run, k, n; 0 where it is not one).
  compiler::Bound bound;
  int64_t m = 0, k = 0, n = 0;
  bool HasBound() const { return bound.Cycles() > 0; }
  // On a chip of several cores, the row per core (its MACs, counters and energy; no bound):
  // they add up to this row. Empty on one core, and in the total.
  std::vector<RunRow> cores;
  // On a core of several matrix units, the cycles each had work on the row's matmuls, over
  // every core (empty otherwise, and where no per-layer attribution ran).
  std::vector<uint64_t> mxu_busy;
  int mxus = 0;  // there, the most units the row's operation went to (0: not recorded)

  uint64_t Cycles() const { return counters.cycles; }
  // Cycles in which the matrix unit did not stream a row.
  uint64_t NotStreaming() const { return counters.cycles - counters.mxu_stream_cycles; }
  uint64_t UbAccesses() const { return counters.ub_reads + counters.ub_writes; }
  uint64_t AccAccesses() const { return counters.acc_reads + counters.acc_writes; }
  uint64_t DramBytes() const {
    return counters.host_bytes_read + counters.host_bytes_written + counters.weight_bytes_read +
           counters.weight_bytes_written;
  }
  double OpsPerCycle() const;
  // Useful MACs over the MACs the array issued.
  double MappingEfficiency() const;
  // TPU v1's cycle categories (Jouppi et al., ISCA 2017, Table 3; docs/timing.md) as
  // shares of the row's cycles, adding up to 1: array active with useful MACs, array active
  // with unused MACs, weight stall, weight shift, non-matrix, RAW stall, input stall; `n`
  // the array size, `units` the matrix units of a core.
  std::vector<std::pair<std::string, double>> Categories(int64_t n, int64_t units) const;
};

struct RunReport {
  std::string model, engine;
  config::TpuConfig config;
  EnergyTable table;
  int64_t images = 0;
  int batch = 0;
  std::string inputs;       // where the inputs came from ("test images", a file, synthetic)
  bool labelled = true;     // the inputs had labels: accuracy is known
  std::string shard;        // "I/K" for a slice of the inputs (run --shard); empty: all
  int64_t first_input = 0;  // the slice's first input
  int64_t run_inputs = 0;   // a slice's: the inputs of the whole run it is a slice of
  std::string plan;         // how the model was lowered (run::TpuRunResult::plan)
  std::vector<compiler::SpilledTensor> spilled;  // tensors the plan keeps in host memory
  int64_t ub_rows = 0;                           // unified-buffer rows the whole-network plan uses
  bool checked = true;                           // values checked against the CPU int8 reference
  // A topology file's layers with random data (run/topology.h), not a model: no
  // accuracy; `mismatches` counts layers whose outputs differ from the CPU reference.
  bool topology = false;
  // A list of GEMMs (compiler/topology_csv.h): each runs on its own batch, its M; the list
  // runs once, so "per image" is per run of the list.
  bool gemm_list = false;
  int64_t correct = 0, mismatches = 0;
  std::string non_finite;          // bf16: where the first NaN or infinity appeared (empty: none)
  int64_t non_finite_outputs = 0;  // bf16: inputs whose outputs hold a NaN or an infinity
  double wall_seconds = 0;
  std::vector<RunRow> layers;
  RunRow total;
  // The chip's cycles (run::TpuRunResult::chip_cycles; 0: the total's), the run's time: on a
  // chip of several cores the rows count each core's cycles.
  uint64_t chip_cycles = 0;
  // Each core's counters over the run: the sums of the layers' core rows (empty on one core).
  std::vector<hw::ChipCounters> cores;
  uint64_t ElapsedCycles() const { return chip_cycles ? chip_cycles : total.counters.cycles; }

  // A core's peak ops per cycle: 2 N^2 per matrix unit.
  double Peak() const { return 2.0 * config.array_dim * config.array_dim * config.mxus_per_core; }
  double Accuracy() const;
  double UsPerImage() const;
};

RunReport BuildRunReport(const run::TpuRunResult& r, const std::string& model,
                         const std::string& engine, const config::TpuConfig& config,
                         const EnergyTable& table, int batch);
// A report back from its JSON (RunReportJson's); throws UsageError naming `where` and the
// field when something is missing or of the wrong type.
RunReport RunReportFromJson(const nlohmann::json& j, const std::string& where);
// The report of slices of one run (run --shard I/K of the same model, inputs, chip, batch
// and engine), in input order, as the single run would give it: counters, MACs, images,
// correct inputs and mismatches summed layer by layer. Throws UsageError when the slices do
// not belong together (naming what differs), overlap or leave inputs out.
RunReport MergeRunReports(const std::vector<RunReport>& shards);
std::string FormatRunText(const RunReport& r);
nlohmann::json RunReportJson(const RunReport& r);
std::string RunReportCsv(const RunReport& r);

}  // namespace tpu::report
