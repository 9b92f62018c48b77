// See weight_staging.h.
#include "host/compiler/emit/weight_staging.h"

#include <algorithm>
#include <array>
#include <deque>
#include <stdexcept>
#include <utility>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/engine/cycle_observer.h"
#include "host/isa/isa.h"

namespace tpu::compiler::emit {

namespace {

struct Item {
  isa::Instruction in;
  int32_t op = -1;
};

// A piece of a read still to be placed: before the switch that takes tile `anchor`.
struct Piece {
  int64_t anchor = 0;
  Item read;
};

size_t UnitOf(const isa::Instruction& in) {
  return in.opcode == isa::Opcode::kReadWeights ? hw::kOpdReadWeightsMxu.Get(in.flags)
                                                : hw::kOpdMatmulMxu.Get(in.flags);
}

uint64_t WeightAddr(const isa::Instruction& in) {
  return uint64_t{hw::kOpdReadWeightsAddrHi.Get(in.aux)} << 32 | in.src;
}

isa::Instruction ReadOf(const isa::Instruction& model, uint64_t addr, int64_t tiles) {
  isa::Instruction in = model;
  in.length = static_cast<uint16_t>(tiles);
  in.src = static_cast<uint32_t>(addr);
  in.aux = hw::kOpdReadWeightsAddrHi.Put(addr >> 32);
  return in;
}

// Cuts every read_weights of more than `most` tiles into reads of at most `most`, each
// after the first placed just before the switch that takes the first tile of the piece
// before it (or before the unit's next read, whichever comes first), so tiles still reach
// each FIFO in the order they did.
std::vector<Item> CutReads(const std::vector<Item>& in, int64_t most, int64_t n, int64_t row) {
  std::vector<Item> out;
  out.reserve(in.size());
  std::array<int64_t, engine::kMaxMxus> pushed{}, taken{};
  std::array<std::deque<Piece>, engine::kMaxMxus> pending;
  auto flush = [&](size_t m, bool all) {
    while (!pending[m].empty() && (all || pending[m].front().anchor <= taken[m])) {
      out.push_back(pending[m].front().read);
      pending[m].pop_front();
    }
  };
  for (const Item& it : in) {
    const isa::Instruction& x = it.in;
    if (x.opcode == isa::Opcode::kReadWeights) {
      const size_t m = UnitOf(x);
      flush(m, true);
      const int64_t first = pushed[m];
      pushed[m] += x.length;
      for (int64_t k = 0; k * most < x.length; ++k) {
        const Item piece{ReadOf(x, WeightAddr(x) + static_cast<uint64_t>(k * most * n * row),
                                std::min<int64_t>(most, x.length - k * most)),
                         it.op};
        if (k == 0)
          out.push_back(piece);
        else
          pending[m].push_back({first + (k - 1) * most, piece});
      }
      continue;
    }
    if (x.opcode == isa::Opcode::kMatmul && (x.flags & isa::kFlagSwitch) != 0) {
      const size_t m = UnitOf(x);
      flush(m, false);
      ++taken[m];
    } else if (x.opcode == isa::Opcode::kHalt) {
      for (size_t m = 0; m < pending.size(); ++m) flush(m, true);
    }
    out.push_back(it);
  }
  for (size_t m = 0; m < pending.size(); ++m)
    if (!pending[m].empty()) throw std::logic_error("StageWeights: a read's tiles never taken");
  return out;
}

// The read_hbm that brings read_weights `read`'s rows into staging row `ub`, and the
// load_weights that takes them from there into unit m's FIFO.
std::pair<isa::Instruction, isa::Instruction> HbmAndLoad(const isa::Instruction& read, uint64_t ub,
                                                         size_t m, int64_t n) {
  const uint64_t addr = WeightAddr(read);
  isa::Instruction hbm;
  hbm.opcode = isa::Opcode::kReadHbm;
  hbm.length = static_cast<uint16_t>(read.length * n);
  hbm.src = static_cast<uint32_t>(addr);
  hbm.dst = static_cast<uint32_t>(ub);
  hbm.aux = hw::kOpdReadHbmAddrHi.Put(addr >> 32);
  isa::Instruction load;
  load.opcode = isa::Opcode::kLoadWeights;
  load.flags = static_cast<uint8_t>(hw::kOpdLoadWeightsMxu.Put(m));
  load.length = read.length;
  load.src = static_cast<uint32_t>(ub);
  return {hbm, load};
}

}  // namespace

void StageWeights(EmittedProgram* e, const WeightStaging& st, int64_t n, int64_t row) {
  if (st.ub < 0) return;
  std::vector<Item> items;
  items.reserve(e->program.words.size());
  for (size_t i = 0; i < e->program.words.size(); ++i)
    items.push_back({isa::Decode(e->program.words[i]), e->op_of[i]});
  items = CutReads(items, st.slot_tiles, n, row);
  // Each item, then what goes right after it (a unit's next read_hbm after its load).
  std::vector<std::vector<Item>> after;
  std::array<int64_t, engine::kMaxMxus> reads{};
  std::array<int64_t, engine::kMaxMxus> last_load;
  last_load.fill(-1);
  std::vector<Item> out;
  out.reserve(items.size());
  for (const Item& it : items) {
    if (it.in.opcode != isa::Opcode::kReadWeights) {
      out.push_back(it);
      continue;
    }
    const size_t m = UnitOf(it.in);
    const int64_t slot = reads[m]++ % st.slots;
    const auto ub = static_cast<uint64_t>(st.ub + (static_cast<int64_t>(m) * st.slots + slot) *
                                                      st.slot_tiles * n);
    const auto [hbm, load] = HbmAndLoad(it.in, ub, m, n);
    if (last_load[m] < 0) {
      out.push_back({hbm, it.op});
    } else {
      after.resize(std::max(after.size(), static_cast<size_t>(last_load[m]) + 1));
      after[static_cast<size_t>(last_load[m])].push_back({hbm, it.op});
    }
    last_load[m] = static_cast<int64_t>(out.size());
    out.push_back({load, it.op});
  }
  e->program.words.clear();
  e->op_of.clear();
  after.resize(out.size());
  auto put = [&](const Item& x) {
    e->program.words.push_back(isa::Encode(x.in));
    e->op_of.push_back(x.op);
  };
  for (size_t i = 0; i < out.size(); ++i) {
    put(out[i]);
    for (const Item& x : after[i]) put(x);
  }
}

}  // namespace tpu::compiler::emit
