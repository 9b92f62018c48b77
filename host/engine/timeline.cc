// Chrome trace-event timeline of chip runs (see timeline.h).
#include "host/engine/timeline.h"

#include <algorithm>
#include <sstream>

#include "contract/tpu_contract.h"
#include "host/common/atomic_file.h"
#include "host/isa/assembler.h"

namespace tpu::engine {
namespace {

constexpr int kControllerTrack = 0;
// Unit u is on track u + 1 (matrix unit 0 the matrix unit's); the layers come after the
// units, then matrix units 1, 2, ... (shown beside matrix unit 0: TrackNames' order).
int UnitTrack(int unit) { return unit + 1; }
constexpr int kLayerTrack = hw::kNumUnits + 1;
int MxuTrack(int mxu) { return mxu == 0 ? UnitTrack(hw::kUnitMatrix) : kLayerTrack + mxu; }

}  // namespace

void Timeline::BeginRun(const isa::Program& program, const std::string& label) {
  text_.clear();
  std::istringstream lines(isa::Disassemble(program));
  for (std::string line; std::getline(lines, line);) text_.push_back(line);
  OpcodesAndUnits(program, &opcodes_, &units_of_);
  fired_ = 0;
  units_.assign(hw::kNumUnits, Open());
  mxu_.assign(static_cast<size_t>(std::max(mxus_, 1)), Open());
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

void Timeline::CloseSlice(Open* o, int track, uint64_t end) {
  if (!o->open) return;
  o->open = false;
  const std::string& text = o->pc < text_.size() ? text_[o->pc] : std::string("?");
  const uint8_t op = opcodes_[o->pc];
  Slice(track, op < hw::kMnemonics.size() ? hw::kMnemonics[op] : "?", o->start, end,
        {{"pc", o->pc}, {"instruction", text}});
}

void Timeline::CloseUnit(int unit, uint64_t end) {
  if (unit == hw::kUnitMatrix) {
    for (int m = 0; m < static_cast<int>(mxu_.size()); ++m) CloseMxu(m, end);
    return;
  }
  CloseSlice(&units_[static_cast<size_t>(unit)], UnitTrack(unit), end);
}

void Timeline::CloseMxu(int mxu, uint64_t end) {
  CloseSlice(&mxu_[static_cast<size_t>(mxu)], MxuTrack(mxu), end);
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
  // A unit that has no more work ends its instruction; so does a matrix unit.
  for (int u = 0; u < hw::kNumUnits; ++u) {
    const Open& o = units_[static_cast<size_t>(u)];
    if (o.open && !(busy & (1u << u)) && first >= o.start) CloseUnit(u, first);
  }
  for (int m = 0; m < static_cast<int>(mxu_.size()); ++m) {
    const Open& o = mxu_[static_cast<size_t>(m)];
    if (o.open && !(obs.mxus & (1u << m)) && first >= o.start) CloseMxu(m, first);
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
    if (unit == hw::kUnitMatrix) {  // the matmul's matrix unit (mxu=)
      const int m = std::min<int>(units_of_[pc], static_cast<int>(mxu_.size()) - 1);
      CloseMxu(m, c + 1);
      mxu_[static_cast<size_t>(m)] = {true, pc, c + 1};
    } else if (unit >= 0) {
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
  const std::vector<std::string> tracks = TrackNames();
  std::vector<const Timeline*> cores = {this};
  cores.insert(cores.end(), other_cores.begin(), other_cores.end());
  for (size_t c = 0; c < cores.size(); ++c) {
    const int pid = static_cast<int>(c) + 1;
    const std::string name =
        cores.size() == 1 ? "tpusim chip" : "tpusim chip, core " + std::to_string(c);
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    for (size_t t = 0; t < tracks.size(); ++t) {
      if (!vector_unit_ && t == static_cast<size_t>(UnitTrack(hw::kUnitVector))) continue;
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", t},
                        {"args", {{"name", tracks[t]}}}});
      // Matrix units 1, 2, ... (after the layers' track) beside matrix unit 0.
      const auto matrix = static_cast<size_t>(UnitTrack(hw::kUnitMatrix));
      const auto layers = static_cast<size_t>(kLayerTrack);
      const size_t extra = tracks.size() - layers - 1;
      const size_t sort = t > layers ? matrix + t - layers : t > matrix ? t + extra : t;
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", t},
                        {"args", {{"sort_index", sort}}}});
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

// By track: the controller, the units (matrix unit 0 as the matrix unit's), the layers,
// then matrix units 1, 2, ...
std::vector<std::string> Timeline::TrackNames() const {
  std::vector<std::string> tracks = {"controller (issue)"};
  for (int u = 0; u < hw::kNumUnits; ++u) {
    tracks.push_back(hw::kUnitText[static_cast<size_t>(u)]);
    if (u == hw::kUnitMatrix && mxus_ > 1) tracks.back() += " 0";
  }
  tracks.push_back(layer_track_);
  for (int m = 1; m < mxus_; ++m)
    tracks.push_back(std::string(hw::kUnitText[hw::kUnitMatrix]) + " " + std::to_string(m));
  return tracks;
}

void Timeline::Write(const std::string& path,
                     const std::vector<const Timeline*>& other_cores) const {
  WriteFileAtomically(path, ToJson(other_cores).dump() + "\n");
}

}  // namespace tpu::engine
