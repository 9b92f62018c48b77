// A GEMM recorded cycle by cycle on a teaching array, whatever its dataflow: what every
// dataflow answers the same way (the cycles the RTL counted, the MACs, the data moved, C)
// and what each shows its own way (the frames, the introduction, the phases). The two
// dataflows are ws_recording.h and os_recording.h; everything that compares, checks or
// draws them (teach.h) works on this interface, so a third dataflow is one more type.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"
#include "host/common/errors.h"
#include "host/common/npy.h"

namespace tpu::teach {

// The two dataflows tpusim teaches: weight-stationary (the chip's: B stays in the PEs) and
// output-stationary (C stays in the PEs).
enum class Dataflow { kWeightStationary, kOutputStationary };
inline constexpr Dataflow kDataflows[] = {Dataflow::kWeightStationary, Dataflow::kOutputStationary};
// "ws" and "os": the names on the command line, in answers (ws.cycles) and in the JSON.
inline const char* DataflowName(Dataflow d) {
  return d == Dataflow::kWeightStationary ? "ws" : "os";
}
// "weight-stationary" and "output-stationary": the names in prose and tables.
inline const char* DataflowTitle(Dataflow d) {
  return d == Dataflow::kWeightStationary ? "weight-stationary" : "output-stationary";
}

// The data a dataflow moves, counted over the run from the RTL's signals (docs/teaching.md
// "Two dataflows" says how each is counted).
struct Movement {
  uint64_t reads_in = 0;        // operand values entering the array at its edges
  uint64_t operand_writes = 0;  // PE registers written with an A or B value
  uint64_t sum_writes = 0;      // partial-sum / accumulator registers written
  uint64_t passes = 0;          // values handed from one PE to its neighbour
  uint64_t writes_out = 0;      // result values leaving the array
};

// How a recording's values are written: int8 operands and int32 sums as numbers; bfloat16
// operands and float32 sums (held as bit patterns) as the shortest decimal that reads back
// as the same float32.
struct Values {
  hw::Dtype dtype = hw::Dtype::kInt8;
  std::string Operand(int32_t raw) const;
  std::string Sum(int32_t raw) const;
  nlohmann::json OperandJson(int32_t raw) const;
  nlohmann::json SumJson(int32_t raw) const;
};

// C as it fills in: each element's value so far (what has left the array for it), and
// whether it is final.
struct CProgress {
  std::vector<int32_t> value;  // m x n: int32 values, or float32 bit patterns
  std::vector<uint8_t> seen;   // 0 nothing yet, 1 partial, 2 final
  Values values;

  CProgress() = default;
  CProgress(int64_t m, int64_t n, Values v = {});  // nothing yet
  // Adds a value that left the array to element `at`'s running sum as the accumulators do
  // (int32: wrapping; float32: Fp32Add, the first value taken as it is).
  void Add(size_t at, int32_t v, bool final);
  // null where nothing has left the array yet, else [value, final].
  nlohmann::json Json() const;
};

// The lines of a recording's summary that each dataflow writes its own way.
struct SummaryParts {
  std::string formula;  // how the formula's cycles are made up
  std::string phases;   // the phases the RTL counted
  std::string macs;     // the MACs the array issued or did
};

// An operand matrix with its values (int8) or bit patterns (bfloat16) as int32.
template <class T>
Matrix<int32_t> Widen(const Matrix<T>& m) {
  return {m.rows, m.cols, std::vector<int32_t>(m.data.begin(), m.data.end())};
}

struct Recording {
  template <class T>
  Recording(Dataflow d, const Matrix<T>& a_in, const Matrix<T>& b_in, int array, hw::Dtype dt)
      : dataflow(d), dim(array), values{dt}, a(Widen(a_in)), b(Widen(b_in)) {}
  virtual ~Recording() = default;
  // One frame per cycle: Frames() == rtl_cycles.
  virtual size_t Frames() const = 0;
  // The terminal text: the problem, the mapping and how to read a frame; one cycle.
  virtual std::string Intro(bool color) const = 0;
  virtual std::string Frame(size_t index, bool color) const = 0;
  virtual SummaryParts Summary() const = 0;
  // Every cycle as data, for the HTML page.
  virtual nlohmann::json FramesJson() const = 0;

  int64_t UsefulMacs() const { return a.rows * a.cols * b.cols; }  // M x K x N

  Dataflow dataflow;
  int dim;
  Values values;         // the number format and how its values are written
  Matrix<int32_t> a, b;  // int8 values, or bfloat16 bit patterns
  Matrix<int32_t> c;     // what the RTL computed: int32 values, or float32 bit patterns
  bool matches_reference = false;
  uint64_t rtl_cycles = 0;      // counted by the RTL
  uint64_t formula_cycles = 0;  // by the dataflow's formula (docs/teaching.md)
  Movement moved;
};

// The teaching model `make` builds; UsageError where none of that size is built.
template <class Make>
auto TeachingModel(const Make& make) {
  try {
    return make();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace tpu::teach
