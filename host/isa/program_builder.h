// Builds a TPU program from typed instructions, the way compilers emit one (the layer
// compiler, the GEMM program): no text is printed and parsed again. Assembly for people
// comes from the disassembler (isa::Disassemble).
#pragma once

#include <cstdint>

#include "host/isa/isa.h"

namespace tpu::isa {

enum class Pool { kNone, kAvg, kMax };

class ProgramBuilder {
 public:
  void ReadHost(uint64_t host_addr, uint64_t ub_row, uint64_t rows);
  void ReadParams(uint64_t host_addr, uint64_t first_set, uint64_t sets);
  void ReadWeights(uint64_t weight_addr, uint64_t tiles);
  void Matmul(uint64_t ub_row, uint64_t acc_row, uint64_t rows, bool switch_tile, bool accumulate);
  void Activate(uint64_t acc_row, uint64_t ub_row, uint64_t rows, uint64_t param_set, bool relu,
                Pool pool);
  void WriteHost(uint64_t ub_row, uint64_t host_addr, uint64_t rows);
  void Sync();
  void Halt();

  const Program& program() const { return program_; }
  Program Take() { return std::move(program_); }

 private:
  // Throws std::invalid_argument when a field does not fit its bits (a compiler bug).
  void Add(Opcode op, uint8_t flags, uint64_t length, uint64_t src, uint64_t dst, uint64_t aux);

  Program program_;
};

}  // namespace tpu::isa
