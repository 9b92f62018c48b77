// TPU assembly (tpusim asm, exec): host/isa/assembler.h. What assembles must disassemble
// to text that assembles to the same program.
#include <string>

#include "host/isa/assembler.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::ExpectNormalErrors([&] {
    const isa::Program p = isa::Assemble(text, "fuzz.asm");
    const isa::Program again = isa::Assemble(isa::Disassemble(p), "disassembled");
    fuzz::Check(again.words == p.words, "disassembly does not assemble to the same program");
  });
  return 0;
}
