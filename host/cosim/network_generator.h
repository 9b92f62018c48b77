// Random networks for differential testing of the compiler (docs/reliability.md, "Random
// networks"): each a small fp32 model drawn from every layer kind and option the compiler
// takes (convolutions of any kernel, stride and padding, depthwise ones, max and average
// pooling, global pooling, residual adds, concats, flatten and dense layers, each activation),
// a random input shape and batch, quantized on seeded synthetic inputs. The compiled program
// runs on the fast engine against the CPU int8 reference (bit-exact), and a sample on the
// RTL as well, every counter equal (RunNetworkCosim).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "host/engine/chip_engine.h"
#include "host/nn/model.h"
#include "host/run/tpu_runner.h"

namespace tpu::cosim {

struct NetworkCase {
  nn::Model model;  // quantized
  // Config fields drawn for the network ("" when it runs on the config as given), as
  // `tpusim run` takes them: "--set host_mem_bytes_per_cycle=3 --set ...".
  std::string sets;
  int images = 1;     // synthetic inputs (seeded with the case's seed)
  int batch = 1;      // inputs per program
  uint64_t seed = 0;  // of the inputs: `tpusim run --synthetic images --seed seed`
  std::string shape;  // for people: "8x8x3 conv3x3/2 same relu -> maxpool2 -> dense 10"
};

// Network `index` of `seed`'s sequence: the same case on every machine.
NetworkCase RandomNetwork(uint64_t seed, uint64_t index);

struct NetworkCosimOptions {
  uint64_t networks = 100;
  uint64_t first = 0;  // runs networks first .. first + networks - 1
  uint64_t seed = 1;
  uint64_t rtl_every = 10;  // every k-th network also on the RTL (0: none)
  // The other networks run on a fast engine of their own whose memories (bandwidths of 1 to
  // 2N bytes per cycle, latencies of 0 to 400 cycles) and weight FIFO (1 to 8 tiles) are
  // drawn for the network: timing must never change a value.
  bool random_fields = true;
  std::string mismatch_dir = "cosim-mismatches";  // where failing networks are written
  std::function<void(double)> progress;
};

// The most work a network due on the RTL may take there: its cycles (which the fast engine's
// run of it gives, the two being cycle-equal) times the N x N cells of each core's array.
// The RTL simulates about 1.0e8 cell-cycles per second on one core (408 k cycles/s at 16 x
// 16, 1,500 at 256 x 256: docs/performance.md), so 3e9 is about 30 s: 11.7 M cycles at 16 x
// 16, 46 k at 256 x 256. A network beyond it (a long LSTM on tpu-v1: 510 k cycles, about 6
// minutes) is counted, not run.
inline constexpr double kRtlBudget = 3e9;

struct NetworkCosimSummary {
  std::string config;
  int array_dim = 0;
  std::string dtype = "int8";  // the chip's number format
  uint64_t networks = 0, mismatches = 0, rtl_networks = 0, layers = 0;
  // Networks due on the RTL that it did not run: more work than kRtlBudget.
  uint64_t rtl_over_budget = 0;
  // Networks the compiler refuses with a clear error (a UsageError: a limitation it states),
  // by reason, names and numbers masked; shown so the reach is visible. A refusal for a
  // limit docs/compiler.md does not state, or that the network does not reach, is also a
  // mismatch.
  std::map<std::string, uint64_t> unsupported;
  double fast_seconds = 0, rtl_seconds = 0;
  std::string first_mismatch;  // what differed, the folder and the command that replays it
};

// "" when two runs of a network (the rtl engine's, the fast engine's) agree on every output,
// the plan, the chip's cycles, and each layer row's counters, each core's share of them and
// the matrix units' busy cycles; else the first difference.
std::string CompareRuns(const run::TpuRunResult& rtl, const run::TpuRunResult& fast);
// Runs the networks on `fast` (values, against the CPU int8 reference) and every
// rtl_every-th on `rtl` too (may be null), whose report must equal the fast engine's in
// every counter and output. A failing network is saved as a model folder under
// mismatch_dir with the `tpusim run` command that replays it.
NetworkCosimSummary RunNetworkCosim(engine::ChipEngine* rtl, engine::ChipEngine& fast,
                                    const NetworkCosimOptions& o);

}  // namespace tpu::cosim
