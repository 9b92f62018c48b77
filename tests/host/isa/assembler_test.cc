// The ISA encoding, assembler and disassembler (host/isa/): round trips, exact encodings,
// program files, and assembler errors that name the line.
#include "host/isa/assembler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/common/errors.h"
#include "host/isa/program_builder.h"
#include "tests/host/cli/cli_fixture.h"

namespace tpu::isa {
namespace {

std::string ExampleProgram() {
  std::ifstream in(TPUSIM_SOURCE_DIR "/examples/dense_layer.asm");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ErrorOf(const std::string& text) {
  try {
    Assemble(text, "t.asm");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(IsaTest, EncodesFieldsLittleEndian) {
  const Program p = Assemble("matmul ub=3 acc=0x102 rows=7 switch accumulate", "t.asm");
  ASSERT_EQ(p.words.size(), 1u);
  const Word& w = p.words[0];
  EXPECT_EQ(w[0], 0x03);                           // opcode
  EXPECT_EQ(w[1], kFlagSwitch | kFlagAccumulate);  // flags
  EXPECT_EQ(w[2], 7);                              // length
  EXPECT_EQ(w[4], 3);                              // src = ub row
  EXPECT_EQ(w[8], 0x02);                           // dst = accumulator row 0x102
  EXPECT_EQ(w[9], 0x01);
  const Instruction in = Decode(w);
  EXPECT_EQ(in.opcode, Opcode::kMatmul);
  EXPECT_EQ(in.dst, 0x102u);
}

TEST(IsaTest, ExampleRoundTripsThroughTheDisassembler) {
  const Program first = Assemble(ExampleProgram(), "dense_layer.asm");
  EXPECT_EQ(first.words.size(), 9u);
  const std::string text = Disassemble(first);
  const Program second = Assemble(text, "disassembled");
  EXPECT_EQ(second.words, first.words) << text;
  EXPECT_EQ(Disassemble(second), text);
  EXPECT_NE(text.find("read_host host=0x1000 params=0 rows=1"), std::string::npos) << text;
  EXPECT_NE(text.find("activate acc=0 ub=128 rows=64 params=0 relu"), std::string::npos) << text;
}

TEST(IsaTest, EveryFlagAndOperandRoundTrips) {
  const std::string text =
      "nop\nread_host host=0xffffffff ub=65535 rows=65535\nread_weights addr=0x10 tiles=1\n"
      "matmul ub=1 acc=2 rows=3\nactivate acc=1 ub=2 rows=4 params=9 pool=max\n"
      "activate acc=1 ub=2 rows=4 params=9 relu pool=avg\nwrite_host ub=5 host=0x40 rows=2\n"
      "sync\nhalt\n"
      "matmul ub=1 acc=2 rows=3 stride=36 switch\n"
      "activate acc=1 ub=2 rows=4 params=9 stride=3 pool=max\n"
      "set_window in_h=28 in_w=27 kh=5 kw=3 out_h=12 out_w=14 stride_y=2 stride_x=1 "
      "channels=6 pad_top=2 pad_left=1 pixel_bytes=16 pooled\n"
      "matmul ub=7 acc=8 rows=9 first=4 ktile=3 window accumulate\n"
      "activate acc=1 ub=2 rows=4 params=9 fn=sigmoid residual\n"
      "activate acc=1 ub=2 rows=4 params=9 relu fn=tanh pool=avg\n"
      "activate acc=1 ub=2 rows=5 params=9 relu pool=lanes\n"
      "set_residual ub=3 mul_a=7 mul_b=0 shift=40 product relu\n"
      "write_hbm ub=16777215 addr=0xfedcba987654 rows=65535\n"
      "read_hbm addr=0xffffffffffff ub=16777215 rows=65535\n";
  const Program p = Assemble(text, "t.asm");
  // write_hbm's: bits 0-31 in dst, 32-47 in aux.
  const Instruction whbm = Decode(p.words[p.words.size() - 2]);
  EXPECT_EQ(whbm.opcode, hw::Opcode::kWriteHbm);
  EXPECT_EQ(whbm.dst, 0xba987654u);
  EXPECT_EQ(whbm.aux, 0xfedcu);
  EXPECT_EQ(whbm.src, 0xffffffu);
  // read_hbm's 48-bit address: bits 0-31 in src, 32-47 in aux (docs/isa.md).
  const Instruction hbm = Decode(p.words.back());
  EXPECT_EQ(hbm.opcode, hw::Opcode::kReadHbm);
  EXPECT_EQ(hbm.src, 0xffffffffu);
  EXPECT_EQ(hbm.aux, 0xffffu);
  EXPECT_EQ(hbm.dst, 0xffffffu);
  EXPECT_EQ(Assemble(Disassemble(p), "again").words, p.words) << Disassemble(p);
}

// The packed operands land in their bits (docs/isa.md).
TEST(IsaTest, WindowOperandsAreEncodedInTheirBits) {
  const Program p = Assemble(
      "set_window in_h=28 in_w=27 kh=5 kw=3 out_h=12 out_w=14 stride_y=2 stride_x=1 "
      "channels=6 pad_top=2 pad_left=1 pixel_bytes=16 pooled\n"
      "matmul ub=7 acc=8 rows=9 first=4 ktile=3 window\nmatmul ub=7 acc=8 rows=9 stride=5\n"
      "activate acc=0 ub=0 rows=4 params=2 stride=3\n",
      "t.asm");
  const Instruction w = Decode(p.words[0]);
  EXPECT_EQ(w.opcode, Opcode::kSetWindow);
  EXPECT_EQ(w.flags, kFlagPooled);
  EXPECT_EQ(w.length, 16);
  EXPECT_EQ(w.src, 28u | 27u << 12 | 5u << 24 | 3u << 28);
  EXPECT_EQ(w.dst, 12u | 14u << 12 | 2u << 24 | 1u << 28);
  EXPECT_EQ(w.aux, 6u | 2u << 16 | 1u << 20);
  EXPECT_EQ(Decode(p.words[1]).aux, 4u | 3u << 16);
  EXPECT_EQ(Decode(p.words[1]).flags, kFlagWindow);
  EXPECT_EQ(Decode(p.words[2]).aux, 5u);
  EXPECT_EQ(Decode(p.words[3]).aux, 2u | 3u << 16);
}

// The compilers' read_hbm and write_hbm are the assembler's, addresses above 4 GiB too.
TEST(IsaTest, BuilderHbmTransfersEqualTheAssemblers) {
  ProgramBuilder b;
  b.WriteHbm(7, 0x123456789aULL, 300);
  b.ReadHbm(0xfffffffffffULL, 9, 2);
  b.ReadHbmParams(0x1234567890ULL, 3, 4);
  const Program want = Assemble(
      "write_hbm ub=7 addr=0x123456789a rows=300\nread_hbm addr=0xfffffffffff ub=9 rows=2\n"
      "read_hbm addr=0x1234567890 params=3 rows=4",
      "t.asm");
  EXPECT_EQ(b.program().words, want.words) << Disassemble(b.program());
  EXPECT_THROW(b.WriteHbm(0, uint64_t{1} << 48, 1), std::invalid_argument);
  EXPECT_THROW(b.ReadHbm(uint64_t{1} << 48, 0, 1), std::invalid_argument);
  EXPECT_THROW(b.ReadHbmParams(uint64_t{1} << 48, 0, 1), std::invalid_argument);
  EXPECT_EQ(Decode(want.words[2]).flags, kFlagParams);
}

TEST(IsaTest, UnknownOpcodesAndReservedBitsBecomeRaw) {
  const Program p = Assemble("raw 0xfe\nraw 0x80000000000000000000000000000007\n", "t.asm");
  EXPECT_EQ(p.words[0][0], 0xfe);
  const std::string text = Disassemble(p);
  EXPECT_EQ(text,
            "raw 0x000000000000000000000000000000fe\nraw 0x80000000000000000000000000000007\n");
  EXPECT_EQ(Assemble(text, "again").words, p.words);
}

TEST(IsaTest, AssemblerErrorsNameTheLine) {
  EXPECT_EQ(
      ErrorOf("nop\n\nmatmull ub=1"),
      "t.asm:3: unknown instruction 'matmull' (known: nop, read_host, read_weights, "
      "read_hbm, write_hbm, matmul, activate, write_host, sync, halt, set_window, set_residual, "
      "set_format, barrier, load_weights, vector, raw)");
  EXPECT_EQ(ErrorOf("matmul ub=1 rows=2"), "t.asm:1: matmul needs acc=");
  EXPECT_NE(ErrorOf("matmul ub=1 acc=0 rows=2 fast").find("'fast' is not an operand of matmul"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("matmul ub=1 acc=0 rows=70000"),
            "t.asm:1: rows=70000 is out of range (1..65535)");
  EXPECT_EQ(ErrorOf("matmul ub=1 acc=0 rows=0"), "t.asm:1: rows=0 is out of range (1..65535)");
  EXPECT_EQ(ErrorOf("read_host host=0 rows=1"),
            "t.asm:1: read_host needs exactly one of ub= or params=");
  EXPECT_EQ(ErrorOf("read_host host=0 ub=1 params=2 rows=1"),
            "t.asm:1: read_host needs exactly one of ub= or params=");
  EXPECT_EQ(ErrorOf("halt ub=1"), "t.asm:1: 'ub=1' is not an operand of halt (it takes none)");
  EXPECT_EQ(ErrorOf("read_weights addr=0x1g tiles=1"),
            "t.asm:1: '0x1g' is not a number (decimal or 0x hex) for addr=");
  EXPECT_EQ(ErrorOf("read_weights addr=1 addr=2 tiles=1"), "t.asm:1: addr= given twice");
  EXPECT_EQ(ErrorOf("activate acc=0 ub=0 rows=4 params=0 pool=avg pool=max"),
            "t.asm:1: more than one pool=");
  EXPECT_EQ(ErrorOf("activate acc=0 ub=0 rows=4 params=0 fn=sigmoid fn=tanh"),
            "t.asm:1: fn=sigmoid and fn=tanh together");
  EXPECT_EQ(ErrorOf("set_residual ub=0 mul_a=1 mul_b=2 shift=3 product"),
            "t.asm:1: set_residual product takes mul_b=0 (a product has one multiplier, mul_a=)");
  EXPECT_EQ(ErrorOf("matmul ub=1 acc=0 rows=2 first=3"), "t.asm:1: first= needs the flag window");
  EXPECT_EQ(ErrorOf("matmul ub=1 acc=0 rows=2 stride=3 window"),
            "t.asm:1: stride= does not go with the flag window");
  EXPECT_EQ(ErrorOf("set_window in_h=4 in_w=4 kh=16 kw=3 out_h=2 out_w=2 stride_y=1 stride_x=1 "
                    "channels=1 pixel_bytes=1"),
            "t.asm:1: kh=16 is out of range (1..15)");
  EXPECT_EQ(ErrorOf("raw 12"),
            "t.asm:1: raw needs one hex value of up to 32 digits, like raw 0x07");
  EXPECT_EQ(ErrorOf("; only a comment\n  # another\n"), "");
}

class IsaCliTest : public test::CliFixture {};

TEST_F(IsaCliTest, AsmThenDisasm) {
  const test::Outcome a =
      Run("asm " TPUSIM_SOURCE_DIR "/examples/dense_layer.asm -o " + P("p.bin"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const test::Outcome d = Run("disasm " + P("p.bin"));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, Disassemble(Assemble(ExampleProgram(), "x")));
  EXPECT_EQ(std::filesystem::file_size(P("p.bin")), 16u + 9 * 16);
}

TEST_F(IsaCliTest, BadFiles) {
  std::ofstream(P("bad.asm")) << "halt\nfoo\n";
  ExpectError("asm " + P("bad.asm") + " -o " + P("x.bin"), 2,
              "bad.asm:2: unknown instruction 'foo'");
  EXPECT_FALSE(std::filesystem::exists(P("x.bin")));
  ExpectError("asm " + P("none.asm") + " -o " + P("x.bin"), 2, "cannot open");
  std::ofstream(P("junk.bin")) << "not a program at all";
  ExpectError("disasm " + P("junk.bin"), 2, "not a tpusim program");
  Program p = Assemble("halt\nhalt", "t");
  WriteProgram(P("ok.bin"), p);
  std::filesystem::resize_file(P("ok.bin"), 16 + 20);
  ExpectError("disasm " + P("ok.bin"), 2, "truncated or corrupted");
}

}  // namespace
}  // namespace tpu::isa
