// Instruction encoding and program files (see isa.h, docs/isa.md).
#include "host/isa/isa.h"

#include <cstring>
#include <fstream>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"

namespace tpu::isa {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'S', 'I', 'M', 'P', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxWords = 1u << 24;

void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

bool IsKnownOpcode(uint8_t op) { return op <= hw::kLastOpcode; }

const char* Mnemonic(Opcode op) {
  const auto i = static_cast<size_t>(op);
  return i < hw::kMnemonics.size() ? hw::kMnemonics[i] : "?";
}

Word Encode(const Instruction& in) {
  Word w{};
  w[hw::kOpcodeOffset] = static_cast<uint8_t>(in.opcode);
  w[hw::kFlagsOffset] = in.flags;
  w[hw::kLengthOffset] = static_cast<uint8_t>(in.length);
  w[hw::kLengthOffset + 1] = static_cast<uint8_t>(in.length >> 8);
  Put32(&w[hw::kSrcOffset], in.src);
  Put32(&w[hw::kDstOffset], in.dst);
  Put32(&w[hw::kAuxOffset], in.aux);
  return w;
}

Instruction Decode(const Word& w) {
  Instruction in;
  in.opcode = static_cast<Opcode>(w[hw::kOpcodeOffset]);
  in.flags = w[hw::kFlagsOffset];
  in.length = static_cast<uint16_t>(w[hw::kLengthOffset] | (w[hw::kLengthOffset + 1] << 8));
  in.src = Get32(&w[hw::kSrcOffset]);
  in.dst = Get32(&w[hw::kDstOffset]);
  in.aux = Get32(&w[hw::kAuxOffset]);
  return in;
}

std::string ProgramBytes(const Program& p) {
  std::string bytes(kMagic, 8);
  uint8_t header[8];
  Put32(header, kVersion);
  Put32(header + 4, static_cast<uint32_t>(p.words.size()));
  bytes.append(reinterpret_cast<const char*>(header), 8);
  for (const Word& w : p.words) bytes.append(reinterpret_cast<const char*>(w.data()), w.size());
  return bytes;
}

void WriteProgram(const std::string& path, const Program& p) {
  WriteFileAtomically(path, ProgramBytes(p));
}

Program ReadProgram(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    throw UsageError(path +
                     ": not a tpusim program (no TPUSIMP1 header); assemble it with "
                     "'tpusim asm'");
  }
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (Get32(b + 8) != kVersion) {
    throw UsageError(path + ": program format version " + std::to_string(Get32(b + 8)) +
                     " is not supported (this tpusim reads version 1)");
  }
  const uint32_t count = Get32(b + 12);
  if (count > kMaxWords || bytes.size() != 16 + size_t{count} * 16) {
    throw UsageError(path + ": header says " + std::to_string(count) + " instructions but the " +
                     "file holds " + std::to_string((bytes.size() - 16) / 16.0) +
                     " (truncated or corrupted)");
  }
  Program p;
  p.words.resize(count);
  for (uint32_t i = 0; i < count; ++i) std::memcpy(p.words[i].data(), b + 16 + 16 * i, 16);
  return p;
}

int64_t ReadRows(const Instruction& in, int element_bytes) {
  return int64_t{in.length} * ((in.flags & hw::kFlagParams) ? hw::ParamRows(element_bytes) : 1);
}

}  // namespace tpu::isa
