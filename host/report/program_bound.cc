// The attainable bound of chip programs (see program_bound.h).
#include "host/report/program_bound.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "host/common/text.h"

namespace tpu::report {
namespace {

// One core's resources; the matrix units' and weight DMAs' by unit.
struct CoreTime {
  double issue = 0, host_rows = 0, host_dma = 0, weight_rows = 0, activate = 0, vector = 0;
  std::vector<double> weight_dma, array;
  std::vector<double> run_rows;  // the rows of each unit's current run through one tile
};

int MxuOf(const isa::Instruction& in) {
  return static_cast<int>(hw::kOpdMatmulMxu.Get(in.flags));  // the same bits for every opcode
}

// A run through one tile ends: it held the array max(rows, N) cycles.
void EndRun(CoreTime* t, int mxu, double n) {
  double& rows = t->run_rows[static_cast<size_t>(mxu)];
  if (rows > 0) t->array[static_cast<size_t>(mxu)] += std::max(rows, n);
  rows = 0;
}

void AddHost(const isa::Instruction& in, const config::TpuConfig& c, CoreTime* t) {
  const double rows = in.opcode == hw::Opcode::kReadHost
                          ? static_cast<double>(isa::ReadRows(in, hw::ElementBytes(c.dtype)))
                          : in.length;
  const double link = rows * c.HostRowCycles();
  t->host_rows += rows;
  t->host_dma += link + (in.opcode == hw::Opcode::kReadHost ? c.host_mem_latency_cycles : 0);
}

// read_hbm: the host DMA's rows (a parameter set's rows with `params`) through the weight
// memory's channel, then its latency; write_hbm: the same without the latency (posted
// writes).
void AddHbm(const isa::Instruction& in, const config::TpuConfig& c, CoreTime* t) {
  const double rows = in.opcode == hw::Opcode::kReadHbm
                          ? static_cast<double>(isa::ReadRows(in, hw::ElementBytes(c.dtype)))
                          : in.length;
  t->weight_rows += rows;
  t->host_dma += rows * c.WeightRowCycles() +
                 (in.opcode == hw::Opcode::kReadHbm ? c.weight_mem_latency_cycles : 0);
}

void AddWeights(const isa::Instruction& in, const config::TpuConfig& c, CoreTime* t) {
  const double n = c.array_dim;
  double& dma = t->weight_dma[static_cast<size_t>(MxuOf(in))];
  if (in.opcode == hw::Opcode::kReadWeights) {
    const double rows = static_cast<double>(in.length) * n;
    t->weight_rows += rows;
    dma += rows * c.WeightRowCycles() + c.weight_mem_latency_cycles;
  } else {
    const double tiles = in.length;
    dma += (in.flags & hw::kFlagTranspose) ? tiles * (2 * n + 1) : tiles * n + 1;
  }
}

void AddVector(const isa::Instruction& in, const config::TpuConfig& c, CoreTime* t) {
  const auto op = static_cast<hw::VectorOp>(hw::kOpdVectorOp.Get(in.aux));
  t->vector += c.VectorCycles(op, static_cast<int64_t>(in.length));
}

CoreTime TimeOf(const isa::Program& p, const config::TpuConfig& c) {
  CoreTime t;
  const auto mxus = static_cast<size_t>(std::max(1, c.mxus_per_core));
  t.weight_dma.assign(mxus, 0);
  t.array.assign(mxus, 0);
  t.run_rows.assign(mxus, 0);
  for (const isa::Word& w : p.words) {
    const isa::Instruction in = isa::Decode(w);
    t.issue += 1;
    switch (in.opcode) {
      case hw::Opcode::kReadHost:
      case hw::Opcode::kWriteHost:
        AddHost(in, c, &t);
        break;
      case hw::Opcode::kReadHbm:
      case hw::Opcode::kWriteHbm:
        AddHbm(in, c, &t);
        break;
      case hw::Opcode::kReadWeights:
      case hw::Opcode::kLoadWeights:
        AddWeights(in, c, &t);
        break;
      case hw::Opcode::kMatmul:
        if (in.flags & hw::kFlagSwitch) EndRun(&t, MxuOf(in), c.array_dim);
        t.run_rows[static_cast<size_t>(MxuOf(in))] += in.length;
        break;
      case hw::Opcode::kActivate:
        t.activate += in.length;
        break;
      case hw::Opcode::kVector:
        AddVector(in, c, &t);
        break;
      default:
        break;
    }
  }
  for (size_t m = 0; m < mxus; ++m) EndRun(&t, static_cast<int>(m), c.array_dim);
  return t;
}

double Largest(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

ProgramBound BoundPrograms(const std::vector<isa::Program>& programs,
                           const config::TpuConfig& config) {
  double issue = 0, host_rows = 0, host_dma = 0, weight_rows = 0, weight_dma = 0, array = 0,
         activate = 0, vector = 0;
  for (const isa::Program& p : programs) {
    const CoreTime t = TimeOf(p, config);
    issue = std::max(issue, t.issue);
    host_rows += t.host_rows;
    host_dma = std::max(host_dma, t.host_dma);
    weight_rows += t.weight_rows;
    weight_dma = std::max(weight_dma, Largest(t.weight_dma));
    array = std::max(array, Largest(t.array));
    activate = std::max(activate, t.activate);
    vector = std::max(vector, t.vector);
  }
  return {{{"issue", issue},
           {"host link", host_rows * config.HostRowCycles()},
           {"host DMA", host_dma},
           // The channel's time: the cores' ports take turns at it, together moving up to its
           // bytes a cycle (contract/memory_channel.h), each at most a row a cycle (the DMA
           // terms above).
           {"weight memory", weight_rows * static_cast<double>(hw::RowBytes(config)) /
                                 static_cast<double>(config.weight_mem_bytes_per_cycle)},
           {"weight DMA", weight_dma},
           {"matrix unit", array},
           {"activation unit", activate},
           {"vector unit", vector}}};
}

namespace {

// The largest term (the first of equals), or none.
const BoundTerm* Binding(const std::vector<BoundTerm>& terms) {
  const auto it =
      std::max_element(terms.begin(), terms.end(),
                       [](const BoundTerm& a, const BoundTerm& b) { return a.cycles < b.cycles; });
  return it == terms.end() ? nullptr : &*it;
}

}  // namespace

double ProgramBound::Cycles() const {
  const BoundTerm* t = Binding(terms);
  return t == nullptr ? 0.0 : std::max(0.0, t->cycles);
}

std::string ProgramBound::Binds() const {
  const BoundTerm* t = Binding(terms);
  return t == nullptr ? std::string() : t->resource;
}

std::string ProgramBound::Text() const {
  std::string s = fmt::format("{} cycles ({} binds)", Grouped(std::llround(Cycles())), Binds());
  const char* sep = ": ";
  for (const BoundTerm& t : terms) {
    if (t.cycles <= 0) continue;
    s += fmt::format("{}{} {}", sep, t.resource, Grouped(std::llround(t.cycles)));
    sep = ", ";
  }
  return s;
}

nlohmann::json ProgramBound::ToJson() const {
  nlohmann::json j = {{"cycles", Cycles()}, {"binds", Binds()}};
  for (const BoundTerm& t : terms) j["terms"][t.resource] = t.cycles;
  return j;
}

}  // namespace tpu::report
