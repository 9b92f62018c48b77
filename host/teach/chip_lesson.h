// `tpusim teach --chip LESSON`: one instruction of the Cloud TPU core followed cycle by cycle
// on the whole chip's RTL (teach-4 as a bf16 chip: 4 x 4, one sublane), from the waveform of
// its run (sim/wave/vcd_signals.h reads the signals back):
//   transpose  load_weights ... transpose: four unified-buffer rows read into the weight
//              DMA's tile buffer, one a cycle, then its four columns pushed into the weight
//              FIFO, so that FIFO row k is lane k of every row (K becomes Kᵀ on the way);
//   vector     one `vector op=NAME` over four rows: each row read on the unit's ports, computed
//              the next cycle, carried down the delay line for the operation's latency and
//              written back.
// Each frame shows what the RTL's own registers and ports hold in that cycle (docs/teaching.md,
// "The Cloud TPU core, cycle by cycle").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::teach {

enum class ChipLesson { kTranspose, kVector };

struct ChipFrame {
  uint64_t cycle = 0;
  std::string text;  // the frame, several lines
};

struct ChipLessonRun {
  std::string instruction;        // the instruction followed, as assembly
  std::string program;            // the whole program it runs in
  std::string data;               // its operands, as they are in the unified buffer
  std::vector<ChipFrame> frames;  // from the cycle it issues to its unit's last busy cycle
  std::string result;             // what it produced (the FIFO's rows, the rows written)
  uint64_t busy_cycles = 0;       // its unit's busy cycles, from the trace
  uint64_t rule_cycles = 0;       // the timing rule's (docs/timing.md)
};

// The vector operations a lesson can show (the contract's table).
std::vector<std::string> LessonOps();
// Runs the lesson (`op`: a vector operation's name, for kVector) with operands drawn from
// `seed`, its waveform written in `work_dir`. Throws UsageError for an unknown operation or
// when the chip's RTL model is not built, RuntimeError when the run fails.
ChipLessonRun RecordChipLesson(ChipLesson lesson, const std::string& op, uint64_t seed,
                               const std::string& work_dir);
// For the terminal: the program and its operands; frame i; what it produced and its cycles.
std::string ChipLessonIntro(const ChipLessonRun& run);
std::string ChipLessonFrame(const ChipLessonRun& run, size_t i);
std::string ChipLessonEnd(const ChipLessonRun& run);
// All three, every frame.
std::string FormatChipLesson(const ChipLessonRun& run);

}  // namespace tpu::teach
