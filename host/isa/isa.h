// The tpusim instruction set (docs/isa.md): TPU v1-style CISC instructions, each a
// 128-bit word, and the binary program file that holds them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tpu::isa {

enum class Opcode : uint8_t {
  kNop = 0x00,
  kReadHostMemory = 0x01,   // host memory -> unified buffer (or VPU parameter sets)
  kReadWeights = 0x02,      // weight memory -> weight FIFO
  kMatMul = 0x03,           // unified buffer rows -> matrix unit -> accumulators
  kActivate = 0x04,         // accumulators -> VPU -> unified buffer
  kWriteHostMemory = 0x05,  // unified buffer -> host memory
  kSync = 0x06,             // wait until every unit is idle
  kHalt = 0x07,             // stop
};

// Flag bits (byte 1 of a word); which apply depends on the opcode.
inline constexpr uint8_t kFlagParams = 1u << 0;      // read_host: into VPU parameter sets
inline constexpr uint8_t kFlagAccumulate = 1u << 0;  // matmul: add into the accumulators
inline constexpr uint8_t kFlagSwitch = 1u << 1;   // matmul: first row starts the next weight tile
inline constexpr uint8_t kFlagRelu = 1u << 0;     // activate
inline constexpr uint8_t kFlagPoolAvg = 1u << 1;  // activate: 2 x 2 average pooling
inline constexpr uint8_t kFlagPoolMax = 1u << 2;  // activate: 2 x 2 max pooling

// One decoded instruction. Field use per opcode is in docs/isa.md.
struct Instruction {
  Opcode opcode = Opcode::kNop;
  uint8_t flags = 0;
  uint16_t length = 0;  // rows or tiles
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t aux = 0;
};

using Word = std::array<uint8_t, 16>;  // little-endian 128-bit instruction word

Word Encode(const Instruction& in);
// Decodes the fields of any word; IsKnownOpcode() says whether the opcode exists.
Instruction Decode(const Word& w);
bool IsKnownOpcode(uint8_t opcode);
const char* Mnemonic(Opcode op);

// A program: words in order. The file holds an 8-byte magic "TPUSIMP1", a little-endian
// uint32 version (1), a uint32 word count, then the words.
struct Program {
  std::vector<Word> words;
};

// Throws RuntimeError when the file cannot be written (atomically, see atomic_file.h).
void WriteProgram(const std::string& path, const Program& p);
// Throws UsageError naming the file when it is missing, not a program, or truncated.
Program ReadProgram(const std::string& path);

}  // namespace tpu::isa
