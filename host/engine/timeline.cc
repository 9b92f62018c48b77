// Chrome trace-event timeline of chip runs (see timeline.h).
#include "host/engine/timeline.h"

#include <sstream>

#include "contract/tpu_contract.h"
#include "host/common/atomic_file.h"
#include "host/isa/assembler.h"

namespace tpu::engine {
namespace {

constexpr int kControllerTrack = 0;
// Unit u is on track u + 1; the layers come after the units.
int UnitTrack(int unit) { return unit + 1; }
constexpr int kLayerTrack = hw::kNumUnits + 1;

}  // namespace

void Timeline::BeginRun(const isa::Program& program, const std::string& label) {
  text_.clear();
  opcodes_.clear();
  std::istringstream lines(isa::Disassemble(program));
  for (std::string line; std::getline(lines, line);) text_.push_back(line);
  for (const isa::Word& w : program.words) opcodes_.push_back(w[hw::kOpcodeOffset]);
  fired_ = 0;
  units_.assign(hw::kNumUnits, Open());
  issue_state_ = -1;
  runs_.push_back(
      {{"label", label}, {"first_cycle", base_}, {"instructions", program.words.size()}});
}

void Timeline::Slice(int track, const std::string& name, uint64_t start, uint64_t end,
                     nlohmann::json args) {
  args["cycle"] = base_ + start;
  args["cycles"] = end - start;
  events_.push_back({{"name", name},
                     {"ph", "X"},
                     {"pid", 1},
                     {"tid", track},
                     {"ts", static_cast<double>(base_ + start) / clock_mhz_},
                     {"dur", static_cast<double>(end - start) / clock_mhz_},
                     {"args", std::move(args)}});
}

void Timeline::CloseUnit(int unit, uint64_t end) {
  Open& o = units_[static_cast<size_t>(unit)];
  if (!o.open) return;
  o.open = false;
  const std::string& text = o.pc < text_.size() ? text_[o.pc] : std::string("?");
  const uint8_t op = opcodes_[o.pc];
  Slice(UnitTrack(unit), op < hw::kMnemonics.size() ? hw::kMnemonics[op] : "?", o.start, end,
        {{"pc", o.pc}, {"instruction", text}});
}

void Timeline::CloseIssueRun(uint64_t end) {
  if (issue_state_ < 0 || end <= issue_start_) return;
  const auto s = static_cast<size_t>(issue_state_);
  Slice(kControllerTrack, hw::kIssueNames[s], issue_start_, end,
        {{"pc", fired_}, {"why", hw::kIssueText[s]}});
  issue_state_ = -1;
}

void Timeline::Cycles(uint64_t first, uint64_t count, const CycleObs& obs) {
  const uint8_t issue = obs.issue, busy = obs.busy;
  // A unit that has no more work ends its instruction.
  for (int u = 0; u < hw::kNumUnits; ++u) {
    const Open& o = units_[static_cast<size_t>(u)];
    if (o.open && !(busy & (1u << u)) && first >= o.start) CloseUnit(u, first);
  }
  if (issue != static_cast<uint8_t>(hw::Issue::kFire)) {
    if (issue != issue_state_) {
      CloseIssueRun(first);
      issue_state_ = issue;
      issue_start_ = first;
    }
    return;
  }
  for (uint64_t c = first; c < first + count; ++c) {
    CloseIssueRun(c);
    const uint64_t pc = fired_++;
    const uint8_t op = pc < opcodes_.size() ? opcodes_[pc] : 0;
    const std::string text = pc < text_.size() ? text_[pc] : std::string("?");
    Slice(kControllerTrack,
          std::string("issue ") + (op < hw::kMnemonics.size() ? hw::kMnemonics[op] : "?"), c, c + 1,
          {{"pc", pc}, {"instruction", text}});
    const int unit = op < hw::kOpcodeUnit.size() ? hw::kOpcodeUnit[op] : -1;
    if (unit >= 0) {
      // The unit starts on the clock edge that ends the issue cycle.
      CloseUnit(unit, c + 1);
      units_[static_cast<size_t>(unit)] = {true, pc, c + 1};
    }
  }
}

void Timeline::EndRun(uint64_t cycles) {
  for (int u = 0; u < hw::kNumUnits; ++u) CloseUnit(u, cycles);
  CloseIssueRun(cycles);
  if (!runs_.empty()) runs_.back()["cycles"] = cycles;
  last_base_ = base_;
  base_ += cycles;
}

void Timeline::LayerSlice(const std::string& layer, uint64_t start, uint64_t end) {
  const uint64_t base = base_;
  base_ = last_base_;  // Slice() places cycles on the current run's axis
  Slice(kLayerTrack, layer, start, end, {{"layer", layer}});
  base_ = base;
}

nlohmann::json Timeline::ToJson(const std::vector<const Timeline*>& other_cores) const {
  nlohmann::json events = nlohmann::json::array();
  std::vector<std::string> tracks = {"controller (issue)"};
  for (int u = 0; u < hw::kNumUnits; ++u) tracks.push_back(hw::kUnitText[static_cast<size_t>(u)]);
  tracks.push_back("layers (whole-network programs)");
  std::vector<const Timeline*> cores = {this};
  cores.insert(cores.end(), other_cores.begin(), other_cores.end());
  for (size_t c = 0; c < cores.size(); ++c) {
    const int pid = static_cast<int>(c) + 1;
    const std::string name =
        cores.size() == 1 ? "tpusim chip" : "tpusim chip, core " + std::to_string(c);
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    for (size_t t = 0; t < tracks.size(); ++t) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", t},
                        {"args", {{"name", tracks[t]}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", t},
                        {"args", {{"sort_index", t}}}});
    }
  }
  for (size_t c = 0; c < cores.size(); ++c) {
    for (nlohmann::json e : cores[c]->events_) {
      e["pid"] = static_cast<int>(c) + 1;
      events.push_back(std::move(e));
    }
  }
  nlohmann::json other = {
      {"generator", "tpusim"},
      {"time_unit", "microseconds at clock_mhz; args.cycle and args.cycles count cycles"},
      {"clock_mhz", clock_mhz_},
      {"runs", runs_}};
  for (const auto& [k, v] : notes_.items()) other[k] = v;
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", other}};
}

void Timeline::Write(const std::string& path,
                     const std::vector<const Timeline*>& other_cores) const {
  WriteFileAtomically(path, ToJson(other_cores).dump() + "\n");
}

}  // namespace tpu::engine
