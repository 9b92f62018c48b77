// Binary TPU programs (tpusim exec, disasm): host/isa/isa.h. What reads must disassemble
// to text that assembles to the same words.
#include "host/isa/assembler.h"
#include "host/isa/isa.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "input.bin");
  fuzz::ExpectNormalErrors([&] {
    const isa::Program p = isa::ReadProgram(path);
    const isa::Program again = isa::Assemble(isa::Disassemble(p), "disassembled");
    fuzz::Check(again.words == p.words, "a program read from binary does not round-trip");
  });
  return 0;
}
