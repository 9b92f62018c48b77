// `tpusim asm` and `tpusim disasm`: the assembler and disassembler (docs/isa.md).
#include "host/cli/isa_commands.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "host/common/errors.h"
#include "host/isa/assembler.h"

namespace tpu::cli {

void AddIsaCommands(CLI::App& app) {
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* as = app.add_subcommand("asm", "Assemble a TPU program (text) into a binary.");
  as->footer("\nExample:\n  tpusim asm examples/gemm.asm -o gemm.bin\n\nSyntax: docs/isa.md.");
  as->add_option("FILE", *in, "assembly source")->required();
  as->add_option("-o,--out", *out, "binary program to write")->required();
  as->callback([in, out] {
    std::ifstream f(*in);
    if (!f) throw UsageError(*in + ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    const isa::Program p = isa::Assemble(ss.str(), *in);
    isa::WriteProgram(*out, p);
    std::cout << fmt::format("{}: {} instructions -> {}\n", *in, p.words.size(), *out);
  });

  auto bin = std::make_shared<std::string>();
  CLI::App* dis = app.add_subcommand("disasm", "Print a binary TPU program as assembly.");
  dis->footer("\nExample:\n  tpusim disasm gemm.bin > gemm.asm");
  dis->add_option("FILE", *bin, "binary program")->required();
  dis->callback([bin] { std::cout << isa::Disassemble(isa::ReadProgram(*bin)); });
}

}  // namespace tpu::cli
