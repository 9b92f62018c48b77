// The tpusim instruction set (docs/isa.md): TPU v1-style CISC instructions, each a
// 128-bit word, and the binary program file that holds them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "contract/tpu_contract.h"

namespace tpu::isa {

// Opcodes and flag bits come from the chip's contract (contract/tpu_contract.toml).
using hw::kFlagAccumulate;
using hw::kFlagParams;
using hw::kFlagPoolAvg;
using hw::kFlagPooled;
using hw::kFlagPoolMax;
using hw::kFlagRelu;
using hw::kFlagSwitch;
using hw::kFlagWindow;
using hw::Opcode;

// One decoded instruction. Field use per opcode is in docs/isa.md.
struct Instruction {
  Opcode opcode = Opcode::kNop;
  uint8_t flags = 0;
  uint16_t length = 0;  // rows or tiles
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t aux = 0;
};

using Word = std::array<uint8_t, hw::kInstructionBytes>;  // little-endian 128-bit instruction word

Word Encode(const Instruction& in);
// Decodes the fields of any word; IsKnownOpcode() says whether the opcode exists.
Instruction Decode(const Word& w);
bool IsKnownOpcode(uint8_t opcode);
const char* Mnemonic(Opcode op);
// The memory rows a read_host or read_hbm moves (`element_bytes` an operand's): its rows, or
// with `params` its parameter sets' (hw::ParamRows each).
int64_t ReadRows(const Instruction& in, int element_bytes);

// A program: words in order. The file holds an 8-byte magic "TPUSIMP1", a little-endian
// uint32 version (1), a uint32 word count, then the words.
struct Program {
  std::vector<Word> words;
};

// The file's bytes.
std::string ProgramBytes(const Program& p);
// Throws RuntimeError when the file cannot be written (atomically, see atomic_file.h).
void WriteProgram(const std::string& path, const Program& p);
// Throws UsageError naming the file when it is missing, not a program, or truncated.
Program ReadProgram(const std::string& path);

}  // namespace tpu::isa
