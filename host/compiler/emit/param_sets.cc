// See param_sets.h.
#include "host/compiler/emit/param_sets.h"

namespace tpu::compiler::emit {

void ParamSets::Begin() {
  const int64_t sets = static_cast<int64_t>(s_.g.params.size()) / s_.set_bytes;
  all_params_ = sets <= s_.c.param_sets;
  if (all_params_) {
    s_.p.ReadParams(s_.plan.params_addr, 0, static_cast<uint64_t>(sets));
    s_.Rec(-1);
  }
}

uint64_t ParamSets::Slot(int64_t set, int op) {
  if (all_params_) return static_cast<uint64_t>(set);
  if (slot_of_.count(set) == 0) Load(set, 1, op);
  return static_cast<uint64_t>(slot_of_.at(set));
}

void ParamSets::Preload(const std::vector<int64_t>& sets, int op,
                        const std::vector<uint64_t>& keep) {
  if (all_params_) return;
  std::vector<int64_t> missing;
  for (const int64_t set : sets)
    if (slot_of_.count(set) == 0) missing.push_back(set);
  for (size_t k = 1; k < missing.size(); ++k)
    if (missing[k] != missing[0] + static_cast<int64_t>(k)) return;
  const auto n = static_cast<int64_t>(missing.size());
  for (const uint64_t slot : keep)
    if (static_cast<int64_t>(slot) >= next_slot_ && static_cast<int64_t>(slot) < next_slot_ + n)
      return;
  if (n > 1 && next_slot_ + n <= s_.c.param_sets) Load(missing[0], n, op);
}

void ParamSets::Load(int64_t first, int64_t n, int op) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t slot = next_slot_ + k;
    if (const auto old = set_in_.find(slot); old != set_in_.end()) slot_of_.erase(old->second);
    acts_.Touch({}, {}, {}, slot);
    slot_of_[first + k] = slot;
    set_in_[slot] = first + k;
  }
  s_.p.ReadParams(s_.plan.params_addr + static_cast<uint64_t>(first * s_.set_bytes),
                  static_cast<uint64_t>(next_slot_), static_cast<uint64_t>(n));
  s_.Rec(op);
  next_slot_ = (next_slot_ + n) % s_.c.param_sets;
}

int64_t ParamSets::FirstSets(int i) const {
  return std::min<int64_t>(s_.g.ops[static_cast<size_t>(i)].nt, costs_.SpreadUnits(i));
}

void ParamSets::LoadNext(int op) {
  if (all_params_ || op + 1 >= s_.seg_end) return;
  const GraphOp& next = s_.g.ops[static_cast<size_t>(op + 1)];
  std::vector<int64_t> sets;
  for (int64_t j = 0; j < FirstSets(op + 1); ++j) sets.push_back(next.first_param + j);
  Preload(sets, op + 1);
  for (const int64_t set : sets) Slot(set, op + 1);
}

}  // namespace tpu::compiler::emit
