// Assembly text <-> instructions for the tpusim ISA (docs/isa.md). Assembling,
// disassembling and assembling again gives the same binary.
#pragma once

#include <string>

#include "host/isa/isa.h"

namespace tpu::isa {

// Assembles `text`; `name` is used in error messages ("prog.asm:3: ..."). Throws
// UsageError naming the line and what is wrong (unknown instruction, missing or unknown
// operand, value out of range).
Program Assemble(const std::string& text, const std::string& name);

// One line of canonical assembly per word; words that no instruction form produces (an
// unknown opcode, reserved bits set) come out as `raw 0x...` so nothing is lost.
std::string Disassemble(const Program& program);

}  // namespace tpu::isa
