// Cycle-level driver policy of the matrix subsystem (see mxu_sequencer.h).
#include "sim/mxu/mxu_sequencer.h"

#include <stdexcept>
#include <string>

namespace tpu::sim {

MxuSequencer::MxuSequencer(MxuWorkload& workload, uint64_t watchdog_cycles)
    : workload_(workload),
      dim_(workload.ArrayDim()),
      row_bytes_(workload.ArrayDim() * workload.OperandBytes()),
      num_tiles_(workload.NumTiles()),
      watchdog_cycles_(watchdog_cycles) {}

void MxuSequencer::Present(const MxuRegisteredOutputs& out, MxuInputs* in) {
  progressed_ = false;
  if (out.error) {
    throw std::runtime_error(
        "the matrix unit raised its error flag (accumulator address out of range) near tile " +
        std::to_string(a_tile_));
  }
  if (out.rd_valid) {
    if (reading_ids_.empty()) throw std::logic_error("accumulator read data without a read");
    workload_.TakeResult(reading_ids_.front(), out.rd_data);
    reading_ids_.pop_front();
    ++results_taken_;
    progressed_ = true;
  }
  // A row became final at the last edge: read it now (one read port, one row a cycle).
  in->rd_en = out.final_valid;
  in->rd_addr = out.final_addr;
  if (out.final_valid) {
    if (in_flight_ids_.empty()) throw std::logic_error("final row that was never issued");
    reading_ids_.push_back(in_flight_ids_.front());
    in_flight_ids_.pop_front();
    progressed_ = true;
  }

  in->w_data.resize(static_cast<size_t>(row_bytes_));
  in->a_data.resize(static_cast<size_t>(row_bytes_));
  in->w_valid = w_tile_ < num_tiles_;
  if (in->w_valid) workload_.WeightRow(w_tile_, w_row_, in->w_data.data());
  in->a_valid = a_tile_ < num_tiles_;
  if (in->a_valid) {
    if (a_row_ == 0 && workload_.RowsInTile(a_tile_) < 1) {
      throw std::logic_error("workload tile without activation rows");
    }
    workload_.ActRow(a_tile_, a_row_, in->a_data.data(), &in->a_tag);
    in->a_switch = (a_row_ == 0);
  } else {
    in->a_switch = false;
  }
}

void MxuSequencer::Commit(const MxuInputs& in, bool w_ready, bool a_ready) {
  if (in.w_valid && w_ready) {
    progressed_ = true;
    if (++w_row_ == dim_) {
      w_row_ = 0;
      ++w_tile_;
    }
  }
  if (in.a_valid && a_ready) {
    progressed_ = true;
    if (in.a_tag.final_fold) in_flight_ids_.push_back(in.a_tag.result_id);
    if (++a_row_ == workload_.RowsInTile(a_tile_)) {
      a_row_ = 0;
      ++a_tile_;
    }
  }
  ++cycle_;
  quiet_cycles_ = progressed_ ? 0 : quiet_cycles_ + 1;
  if (quiet_cycles_ > watchdog_cycles_) Stuck(in);
}

void MxuSequencer::Stuck(const MxuInputs& in) const {
  std::string what;
  if (in.a_valid) {
    what = "activation row " + std::to_string(a_row_) + " of tile " + std::to_string(a_tile_) +
           " was never accepted (a_ready low)";
  } else if (in.w_valid) {
    what = "weight row " + std::to_string(w_row_) + " of tile " + std::to_string(w_tile_) +
           " was never accepted (w_ready low)";
  } else {
    what = std::to_string(workload_.NumResults() - results_taken_) +
           " result row(s) never came out of the accumulators";
  }
  throw std::runtime_error("watchdog: the matrix unit made no progress for " +
                           std::to_string(watchdog_cycles_) + " cycles (cycle " +
                           std::to_string(cycle_) + "): " + what);
}

double MxuSequencer::Progress() const {
  const int64_t total = workload_.NumResults();
  return total == 0 ? 1.0 : static_cast<double>(results_taken_) / static_cast<double>(total);
}

}  // namespace tpu::sim
