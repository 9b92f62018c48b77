// The fast engine's values on a second thread. The cycle loop (fast_chip.cc) decides when
// each instruction issues and when host memory takes each write_host row; what they do to
// the memories (ChipValues) never feeds back into the timing (chip_values.h). So the loop
// hands them over in the order they happen, and a worker thread applies them in that order
// while the loop goes on: every value is what applying them in the loop gives, and a run
// of a whole network takes about the loop's time rather than the loop's plus the values'
// (docs/performance.md, "The two engines").
//
// Steps go over in batches; a run whose steps never fill one (a short program) applies them
// on the caller's thread in Finish, without starting the worker.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "fast/chip_values.h"
#include "fast/decode.h"

namespace tpu::fast {

class ValueWorker {
 public:
  ValueWorker() = default;
  ~ValueWorker();
  ValueWorker(const ValueWorker&) = delete;
  ValueWorker& operator=(const ValueWorker&) = delete;

  // Instruction d issues on the core of `values` (d stays valid until Finish returns).
  void Issue(ChipValues* values, const Decoded* d) { Add({values, d, 0, 0, false}); }
  // Host memory takes a write_host row: unified-buffer row `ub_row` lands at `host_addr`.
  void HostWrite(ChipValues* values, uint64_t host_addr, uint32_t ub_row) {
    Add({values, nullptr, host_addr, ub_row, false});
  }
  // Weight memory takes a write_hbm row: unified-buffer row `ub_row` lands at `weight_addr`.
  void HbmWrite(ChipValues* values, uint64_t weight_addr, uint32_t ub_row) {
    Add({values, nullptr, weight_addr, ub_row, true});
  }
  // Returns once every step handed over is applied; rethrows what a step threw (the steps
  // after it are dropped).
  void Finish();

 private:
  struct Step {
    ChipValues* values;
    const Decoded* d;  // null: a write_host row (or write_hbm's, with hbm)
    uint64_t addr;
    uint32_t ub_row;
    bool hbm;
  };
  static constexpr size_t kBatch = 64;
  void Add(const Step& s) {
    pending_.push_back(s);
    if (pending_.size() >= kBatch) Hand();
  }
  static void Apply(const std::vector<Step>& steps);
  void Hand();      // pending_ onto the worker's queue
  void WaitIdle();  // until the worker has applied everything queued; rethrows its error
  void Loop();

  std::vector<Step> pending_;  // the cycle loop's, not yet handed over
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<Step> queued_;          // handed over, not yet taken by the worker (guarded by m_)
  bool busy_ = false, stop_ = false;  // the worker applies what it took; it is to end
  std::exception_ptr error_;
  std::thread thread_;  // started by the first batch handed over
};

}  // namespace tpu::fast
