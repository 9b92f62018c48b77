// See unit_costs.h.
#include "host/compiler/emit/unit_costs.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tpu::compiler::emit {

namespace {

constexpr size_t kRunTiles = 2;  // tiles a spread unit's read_weights takes where it can

}  // namespace

int UnitCosts::SpreadUnits(int i) const {
  const int m = s_.c.mxus_per_core;
  if (m == 1) return 1;
  const Bound& b = bounds_[static_cast<size_t>(i)];
  int best = 1;
  const double tiles = b.weights / (static_cast<double>(s_.n) * s_.c.CoreWeightRowCycles());
  const double fifo = s_.c.weight_fifo_tiles;
  const double run =  // a tile's share of a read
      static_cast<double>(ReadCycles(RunTiles())) / static_cast<double>(RunTiles());
  double least =  // one unit: its weight DMA reads every tile
      std::max({b.array * m, tiles * static_cast<double>(s_.n) * s_.c.WeightRowCycles(),
                b.activation, b.host});
  for (int u = 2; u <= m; ++u) {
    const double fill = std::min(tiles, u * fifo);
    const double share =  // a tile's, where the u weight DMAs read side by side
        std::max(run, static_cast<double>(ChannelCycles(u))) / u;
    const double t =
        fill * share + std::max({b.array * m / u, (tiles - fill) * share, b.activation, b.host});
    if (t < least) best = u, least = t;
  }
  return best;
}

bool UnitCosts::Spreads(int i) const { return SpreadUnits(i) > 1; }

int64_t UnitCosts::RowUnits(int i, int64_t rows) const {
  const int64_t load = TileLoadCycles(), most = SpreadUnits(i);
  int64_t best = 1, least = INT64_MAX;
  for (int64_t u = 1; u <= most; ++u) {
    const int64_t t = std::max(SideBySide(u, load), std::max((rows + u - 1) / u, s_.n));
    if (t < least) best = u, least = t;
  }
  return best;
}

int64_t UnitCosts::TileLoadCycles() const { return ReadCycles(1); }

int64_t UnitCosts::SideBySide(int64_t u, int64_t per) const {
  return std::max(per, ChannelCycles(u));
}

int64_t UnitCosts::ChannelCycles(int64_t tiles) const {
  const int64_t bytes = tiles * s_.n * s_.row, bw = s_.c.weight_mem_bytes_per_cycle;
  return (bytes + bw - 1) / bw;
}

int64_t UnitCosts::TileReadCycles() const {
  const auto run = static_cast<int64_t>(RunTiles());
  return (ReadCycles(run) + run - 1) / run;
}

int64_t UnitCosts::ReadCycles(int64_t tiles) const {
  return s_.c.weight_mem_latency_cycles +
         static_cast<int64_t>(
             std::ceil(static_cast<double>(tiles * s_.n) * s_.c.WeightRowCycles()));
}

size_t UnitCosts::RunTiles() const {
  return std::max<size_t>(1, std::min(kRunTiles, static_cast<size_t>(s_.c.weight_fifo_tiles) / 2));
}

}  // namespace tpu::compiler::emit
