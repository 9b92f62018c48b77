// The assembler and disassembler (see assembler.h). The operand table below is the one
// description of each instruction's syntax; both directions use it.
#include "host/isa/assembler.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <sstream>

#include "host/common/errors.h"

namespace tpu::isa {
namespace {

// kWide: a 48-bit address, bits 0-31 in src and 32-47 in aux (read_weights and read_hbm addr=);
// kWideDst: the same with bits 0-31 in dst (write_hbm addr=); kFlags: bits of the flags byte
// (mxu=).
enum class Field { kSrc, kDst, kAux, kLength, kWide, kWideDst, kFlags };

struct OperandSpec {
  const char* key;
  Field field;
  uint64_t min, max;
  uint8_t sets_flag = 0;        // present -> this flag bit is set (read_host params=)
  const char* group = nullptr;  // exactly one operand of a group is given
  int shift = 0;                // the operand's lowest bit in its field (packed operands)
  bool optional = false;        // may be left out (zero); printed only when not zero
  uint8_t when_flag = 0;        // only with this flag (matmul window: first=, ktile=)
  uint8_t unless_flag = 0;      // only without this flag (matmul stride=)
};

struct FlagSpec {
  const char* word;  // a bare word, or "key=value" for enumerations (pool=avg)
  uint8_t bit;
};

struct OpSpec {
  Opcode op;
  std::vector<OperandSpec> operands;
  std::vector<FlagSpec> flags;
  // An operand written as a name (vector op=NAME): its key and bits; names from the
  // contract's vector operation table.
  const char* named = nullptr;
  hw::Operand named_bits = {0, 0};
};

constexpr uint64_t kU32 = 0xffffffffull;
constexpr uint64_t kU31 = 0x7fffffffull;
// Unified-buffer and accumulator rows: the RTL's buffers hold up to 2^24 rows.
constexpr uint64_t kRows = 0xffffffull;
constexpr uint64_t kWeightAddr = (uint64_t{1} << (32 + hw::kOpdReadWeightsAddrHi.bits)) - 1;
static_assert(hw::kOpdReadHbmAddrHi.lsb == hw::kOpdReadWeightsAddrHi.lsb &&
              hw::kOpdReadHbmAddrHi.bits == hw::kOpdReadWeightsAddrHi.bits &&
              hw::kOpdWriteHbmAddrHi.lsb == hw::kOpdReadWeightsAddrHi.lsb &&
              hw::kOpdWriteHbmAddrHi.bits == hw::kOpdReadWeightsAddrHi.bits);

// An operand that is a bit range of its field (contract/tpu_contract.toml, [[operand]]).
OperandSpec Packed(const char* key, Field field, uint64_t min, const hw::Operand& o,
                   bool optional = false, uint8_t when_flag = 0, uint8_t unless_flag = 0) {
  return {key, field, min, o.Max(), 0, nullptr, o.lsb, optional, when_flag, unless_flag};
}
constexpr uint64_t kU16 = 0xffff;

const std::vector<OpSpec>& Specs() {
  static const std::vector<OpSpec> specs = {
      {Opcode::kNop, {}, {}},
      {Opcode::kReadHost,
       {{"host", Field::kSrc, 0, kU32},
        {"ub", Field::kDst, 0, kRows, 0, "destination"},
        {"params", Field::kDst, 0, kU16, kFlagParams, "destination"},
        {"rows", Field::kLength, 1, kU16}},
       {}},
      {Opcode::kReadWeights,
       {{"addr", Field::kWide, 0, kWeightAddr},
        {"tiles", Field::kLength, 1, kU16},
        Packed("mxu", Field::kFlags, 0, hw::kOpdReadWeightsMxu, true)},
       {}},
      {Opcode::kReadHbm,
       {{"addr", Field::kWide, 0, kWeightAddr},
        {"ub", Field::kDst, 0, kRows, 0, "destination"},
        {"params", Field::kDst, 0, kU16, kFlagParams, "destination"},
        {"rows", Field::kLength, 1, kU16}},
       {}},
      {Opcode::kWriteHbm,
       {{"ub", Field::kSrc, 0, kRows},
        {"addr", Field::kWideDst, 0, kWeightAddr},
        {"rows", Field::kLength, 1, kU16}},
       {}},
      {Opcode::kMatmul,
       {{"ub", Field::kSrc, 0, kRows},
        {"acc", Field::kDst, 0, kRows},
        {"rows", Field::kLength, 1, kU16},
        Packed("stride", Field::kAux, 0, hw::kOpdMatmulStride, true, 0, kFlagWindow),
        Packed("first", Field::kAux, 0, hw::kOpdMatmulFirst, true, kFlagWindow),
        Packed("ktile", Field::kAux, 0, hw::kOpdMatmulKtile, true, kFlagWindow),
        Packed("mxu", Field::kFlags, 0, hw::kOpdMatmulMxu, true)},
       {{"window", kFlagWindow},
        {"switch", kFlagSwitch},
        {"accumulate", kFlagAccumulate},
        {"max", hw::kFlagMax}}},
      {Opcode::kActivate,
       {{"acc", Field::kSrc, 0, kRows},
        {"ub", Field::kDst, 0, kRows},
        {"rows", Field::kLength, 1, kU16},
        Packed("params", Field::kAux, 0, hw::kOpdActivateParams),
        Packed("stride", Field::kAux, 0, hw::kOpdActivateStride, true),
        Packed("mxu", Field::kFlags, 0, hw::kOpdActivateMxu, true)},
       {{"relu", kFlagRelu},
        {"pool=lanes", kFlagPoolAvg | kFlagPoolMax},  // before its bits' words (Disassemble)
        {"pool=avg", kFlagPoolAvg},
        {"pool=max", kFlagPoolMax},
        {"fn=sigmoid", hw::kFlagSigmoid},
        {"fn=tanh", hw::kFlagTanh},
        {"residual", hw::kFlagResidual}}},
      {Opcode::kWriteHost,
       {{"ub", Field::kSrc, 0, kRows},
        {"host", Field::kDst, 0, kU32},
        {"rows", Field::kLength, 1, kU16}},
       {}},
      {Opcode::kSync, {}, {}},
      {Opcode::kHalt, {}, {}},
      {Opcode::kSetWindow,
       {Packed("in_h", Field::kSrc, 1, hw::kOpdSetWindowInH),
        Packed("in_w", Field::kSrc, 1, hw::kOpdSetWindowInW),
        Packed("kh", Field::kSrc, 1, hw::kOpdSetWindowKh),
        Packed("kw", Field::kSrc, 1, hw::kOpdSetWindowKw),
        Packed("out_h", Field::kDst, 1, hw::kOpdSetWindowOutH),
        Packed("out_w", Field::kDst, 1, hw::kOpdSetWindowOutW),
        Packed("stride_y", Field::kDst, 1, hw::kOpdSetWindowStrideY),
        Packed("stride_x", Field::kDst, 1, hw::kOpdSetWindowStrideX),
        Packed("channels", Field::kAux, 1, hw::kOpdSetWindowChannels),
        Packed("pad_top", Field::kAux, 0, hw::kOpdSetWindowPadTop, true),
        Packed("pad_left", Field::kAux, 0, hw::kOpdSetWindowPadLeft, true),
        Packed("pixel_bytes", Field::kLength, 1, hw::kOpdSetWindowPixelBytes)},
       {{"pooled", kFlagPooled}, {"pad_min", hw::kFlagPadMin}, {"dilated", hw::kFlagDilated}}},
      {Opcode::kSetResidual,
       {{"ub", Field::kDst, 0, kRows},
        {"mul_a", Field::kSrc, 0, kU31},
        {"mul_b", Field::kAux, 0, kU31},
        {"shift", Field::kLength, 1, 62}},
       {{"relu", hw::kFlagResidualRelu}, {"product", hw::kFlagProduct}}},
      {Opcode::kSetFormat, {}, {{"dtype=bf16", hw::kFlagBf16}}},
      {Opcode::kBarrier, {{"cores", Field::kSrc, 0, kU16}}, {}},
      {Opcode::kLoadWeights,
       {{"ub", Field::kSrc, 0, kRows},
        {"tiles", Field::kLength, 1, kU16},
        Packed("mxu", Field::kFlags, 0, hw::kOpdLoadWeightsMxu, true)},
       {{"transpose", hw::kFlagTranspose}}},
      {Opcode::kVector,
       {{"a", Field::kSrc, 0, kRows},
        {"out", Field::kDst, 0, kRows},
        {"rows", Field::kLength, 1, kU16},
        Packed("b", Field::kAux, 0, hw::kOpdVectorB, true)},
       {{"a32", hw::kFlagA32},
        {"b32", hw::kFlagB32},
        {"o32", hw::kFlagO32},
        {"bcast", hw::kFlagBcast}},
       "op",
       hw::kOpdVectorOp},
  };
  return specs;
}

const OpSpec* FindSpec(Opcode op) {
  for (const OpSpec& s : Specs())
    if (s.op == op) return &s;
  return nullptr;
}

uint64_t WholeField(const Instruction& in, Field f) {
  switch (f) {
    case Field::kSrc:
      return in.src;
    case Field::kDst:
      return in.dst;
    case Field::kAux:
      return in.aux;
    case Field::kLength:
      return in.length;
    case Field::kWide:
      return in.src | uint64_t{in.aux} << 32;
    case Field::kWideDst:
      return in.dst | uint64_t{in.aux} << 32;
    case Field::kFlags:
      return in.flags;
  }
  return 0;
}

// Operands are bit ranges of a field: [shift, shift + bits of max).
void SetField(Instruction& in, const OperandSpec& o, uint64_t v) {
  const uint64_t whole = WholeField(in, o.field) | v << o.shift;
  switch (o.field) {
    case Field::kSrc:
      in.src = static_cast<uint32_t>(whole);
      break;
    case Field::kDst:
      in.dst = static_cast<uint32_t>(whole);
      break;
    case Field::kAux:
      in.aux = static_cast<uint32_t>(whole);
      break;
    case Field::kLength:
      in.length = static_cast<uint16_t>(whole);
      break;
    case Field::kWide:
      in.src = static_cast<uint32_t>(whole);
      in.aux = static_cast<uint32_t>(whole >> 32);
      break;
    case Field::kWideDst:
      in.dst = static_cast<uint32_t>(whole);
      in.aux = static_cast<uint32_t>(whole >> 32);
      break;
    case Field::kFlags:
      in.flags = static_cast<uint8_t>(whole);
      break;
  }
}

uint64_t GetField(const Instruction& in, const OperandSpec& o) {
  uint64_t mask = 1;
  while (mask <= o.max) mask <<= 1;
  return WholeField(in, o.field) >> o.shift & (mask - 1);
}

// Whether an operand belongs to the instruction with these flags.
bool Applies(const OperandSpec& o, uint8_t flags) {
  return (!o.when_flag || (flags & o.when_flag)) && !(flags & o.unless_flag);
}

std::string Known() {
  std::string s;
  for (const OpSpec& spec : Specs()) s += (s.empty() ? "" : ", ") + std::string(Mnemonic(spec.op));
  return s + ", raw";
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw UsageError(where + ": " + what);
}

bool ParseNumber(const std::string& s, uint64_t* v) {
  if (s.empty()) return false;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const std::string digits = hex ? s.substr(2) : s;
  if (digits.empty() || digits.size() > (hex ? 16u : 19u)) return false;
  for (char c : digits)
    if (!(hex ? std::isxdigit(static_cast<unsigned char>(c))
              : std::isdigit(static_cast<unsigned char>(c))))
      return false;
  *v = std::stoull(digits, nullptr, hex ? 16 : 10);
  return true;
}

Word ParseRaw(const std::string& s, const std::string& where) {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || s.size() > 34) {
    Fail(where, "raw needs one hex value of up to 32 digits, like raw 0x07");
  }
  Word w{};
  const std::string hex = s.substr(2);
  for (size_t i = 0; i < hex.size(); ++i) {
    const char c = hex[hex.size() - 1 - i];
    if (!std::isxdigit(static_cast<unsigned char>(c)))
      Fail(where, "'" + s + "' is not a hex number");
    const int v =
        std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
    w[i / 2] |= static_cast<uint8_t>(v << (4 * (i % 2)));
  }
  return w;
}

// The operands and flags spec takes, for an error message ("" where none).
std::string Expected(const OpSpec& spec) {
  std::string expected;
  for (const OperandSpec& o : spec.operands)
    expected += std::string(expected.empty() ? "" : " ") + o.key + "=N";
  for (const FlagSpec& f : spec.flags)
    expected += std::string(expected.empty() ? "" : " ") + f.word;
  if (spec.named) expected += std::string(" ") + spec.named + "=NAME";
  return expected;
}

// The words of one instruction's text as they are read: its flags and its operands.
struct Reading {
  Instruction in;
  std::map<std::string, bool> seen;  // operand keys given
  int pools = 0;                     // pool= words
};

// The vector operation's name (op=NAME) into r.
void TakeNamed(const OpSpec& spec, const std::string& name, const std::string& where, Reading* r) {
  if (r->seen[spec.named]) Fail(where, std::string(spec.named) + "= given twice");
  r->seen[spec.named] = true;
  for (int i = 0; i < hw::kNumVectorOps; ++i) {
    if (name == hw::kVectorOps[static_cast<size_t>(i)].name) {
      r->in.aux |= spec.named_bits.Put(static_cast<uint64_t>(i));
      return;
    }
  }
  std::string known;
  for (const hw::VectorOpInfo& v : hw::kVectorOps)
    known += (known.empty() ? "" : ", ") + std::string(v.name);
  Fail(where, "'" + name + "' is not an operation of " + std::string(Mnemonic(spec.op)) + " (" +
                  spec.named + "= takes: " + known + ")");
}

// One argument of the instruction, a flag word or key=value, into r.
void TakeArg(const OpSpec& spec, const std::string& arg, const std::string& where, Reading* r) {
  bool matched = false;
  for (const FlagSpec& f : spec.flags) {
    if (arg == f.word) {
      r->in.flags |= f.bit;
      matched = true;
    }
  }
  if (matched) {
    if (arg.rfind("pool=", 0) == 0 && ++r->pools > 1) Fail(where, "more than one pool=");
    return;
  }
  const size_t eq = arg.find('=');
  const std::string key = arg.substr(0, eq);
  if (spec.named && key == spec.named && eq != std::string::npos) {
    TakeNamed(spec, arg.substr(eq + 1), where, r);
    return;
  }
  const OperandSpec* op = nullptr;
  for (const OperandSpec& o : spec.operands)
    if (key == o.key) op = &o;
  if (!op || eq == std::string::npos) {
    const std::string expected = Expected(spec);
    Fail(where, "'" + arg + "' is not an operand of " + std::string(Mnemonic(spec.op)) +
                    (expected.empty() ? " (it takes none)" : " (it takes: " + expected + ")"));
  }
  if (r->seen[key]) Fail(where, key + "= given twice");
  r->seen[key] = true;
  uint64_t v = 0;
  if (!ParseNumber(arg.substr(eq + 1), &v)) {
    Fail(where,
         "'" + arg.substr(eq + 1) + "' is not a number (decimal or 0x hex) for " + key + "=");
  }
  if (v < op->min || v > op->max) {
    Fail(where, fmt::format("{}={} is out of range ({}..{})", key, v, op->min, op->max));
  }
  SetField(r->in, *op, v);
  r->in.flags |= op->sets_flag;
}

// Whether a vector instruction's operation reads b (a known operation of kind binary or
// select).
bool VectorTakesB(const Instruction& in) {
  const uint32_t op = hw::kOpdVectorOp.Get(in.aux);
  if (op >= hw::kNumVectorOps) return false;
  const hw::VectorKind kind = hw::kVectorOps[op].kind;
  return kind == hw::VectorKind::kBinary || kind == hw::VectorKind::kSelect;
}

// A vector operation takes b= (and b32, bcast) exactly when its kind reads b.
void CheckVectorOperands(const Instruction& in, bool has_b, const std::string& where) {
  const auto op = static_cast<hw::VectorOp>(hw::kOpdVectorOp.Get(in.aux));
  const bool takes_b = VectorTakesB(in);
  const std::string name = hw::Info(op).name;
  if (takes_b && !has_b) Fail(where, "vector op=" + name + " needs b=");
  if (!takes_b && (has_b || (in.flags & (hw::kFlagB32 | hw::kFlagBcast))))
    Fail(where, "vector op=" + name + " takes one operand (a=): no b=, b32 or bcast");
}

// What the instruction's operands must be together: each with the flags it goes with, no
// two that exclude each other, every one needed given, exactly one of each group.
void CheckOperands(const OpSpec& spec, Reading* r, const std::string& where) {
  const Instruction& in = r->in;
  for (const OperandSpec& o : spec.operands) {
    if (r->seen[o.key] && !Applies(o, in.flags)) {
      Fail(where, std::string(o.key) + "= " + (o.when_flag ? "needs" : "does not go with") +
                      " the flag window");
    }
  }
  if ((in.flags & hw::kFlagSigmoid) && (in.flags & hw::kFlagTanh) && spec.op == Opcode::kActivate) {
    Fail(where, "fn=sigmoid and fn=tanh together");
  }
  if ((in.flags & hw::kFlagProduct) && in.aux != 0 && spec.op == Opcode::kSetResidual) {
    Fail(where, "set_residual product takes mul_b=0 (a product has one multiplier, mul_a=)");
  }
  if (spec.named && !r->seen[spec.named])
    Fail(where, std::string(Mnemonic(spec.op)) + " needs " + spec.named + "=");
  if (spec.op == Opcode::kVector) CheckVectorOperands(r->in, r->seen["b"], where);
  std::map<std::string, int> groups;
  for (const OperandSpec& o : spec.operands) {
    if (o.group) {
      groups[o.group] += r->seen[o.key] ? 1 : 0;
    } else if (!r->seen[o.key] && !o.optional) {
      Fail(where, std::string(Mnemonic(spec.op)) + " needs " + o.key + "=");
    }
  }
  for (const auto& [group, count] : groups) {
    if (count != 1) {
      std::string options;
      for (const OperandSpec& o : spec.operands)
        if (o.group && group == o.group)
          options += std::string(options.empty() ? "" : " or ") + o.key + "=";
      Fail(where, std::string(Mnemonic(spec.op)) + " needs exactly one of " + options);
    }
  }
}

// One line's instruction: the mnemonic (lower case) and its arguments.
Word AssembleLine(const std::string& mnemonic, const std::vector<std::string>& args,
                  const std::string& where) {
  if (mnemonic == "raw") {
    if (args.size() != 1) Fail(where, "raw takes exactly one hex value");
    return ParseRaw(args[0], where);
  }
  const OpSpec* spec = nullptr;
  for (const OpSpec& s : Specs())
    if (mnemonic == Mnemonic(s.op)) spec = &s;
  if (!spec) Fail(where, "unknown instruction '" + mnemonic + "' (known: " + Known() + ")");
  Reading r;
  r.in.opcode = spec->op;
  for (const std::string& arg : args) TakeArg(*spec, arg, where, &r);
  CheckOperands(*spec, &r, where);
  return Encode(r.in);
}

}  // namespace

Program Assemble(const std::string& text, const std::string& name) {
  Program p;
  std::istringstream lines(text);
  std::string line;
  for (int line_no = 1; std::getline(lines, line); ++line_no) {
    const std::string where = name + ":" + std::to_string(line_no);
    if (const size_t c = line.find_first_of(";#"); c != std::string::npos) line.erase(c);
    std::istringstream tokens(line);
    std::string mnemonic;
    if (!(tokens >> mnemonic)) continue;
    for (char& ch : mnemonic) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::vector<std::string> args;
    for (std::string t; tokens >> t;) args.push_back(t);
    p.words.push_back(AssembleLine(mnemonic, args, where));
  }
  return p;
}

std::string Disassemble(const Program& program) {
  std::string out;
  for (const Word& w : program.words) {
    const Instruction in = Decode(w);
    const OpSpec* spec = IsKnownOpcode(w[0]) ? FindSpec(in.opcode) : nullptr;
    std::string line;
    if (spec) {
      line = Mnemonic(in.opcode);
      Instruction rebuilt;
      rebuilt.opcode = in.opcode;
      for (const OperandSpec& o : spec->operands) {
        if (o.group && o.sets_flag && !(in.flags & o.sets_flag)) continue;  // the other choice
        if (o.group && !o.sets_flag) {
          bool other = false;  // a flag-setting alternative of this group is in use
          for (const OperandSpec& alt : spec->operands)
            if (alt.group && std::string(alt.group) == o.group && alt.sets_flag &&
                (in.flags & alt.sets_flag))
              other = true;
          if (other) continue;
        }
        if (!Applies(o, in.flags)) continue;
        const uint64_t v = GetField(in, o);
        if (o.optional && v == 0 && !(spec->op == Opcode::kVector && VectorTakesB(in))) continue;
        if (v < o.min) rebuilt.opcode = Opcode::kNop;  // not expressible: falls back to raw
        const bool address = o.max == kU32 || o.field == Field::kWide || o.field == Field::kWideDst;
        line += address ? fmt::format(" {}=0x{:x}", o.key, v) : fmt::format(" {}={}", o.key, v);
        SetField(rebuilt, o, v);
        rebuilt.flags |= o.sets_flag;
      }
      if (spec->named) {
        const uint32_t v = spec->named_bits.Get(in.aux);
        if (v < hw::kNumVectorOps) {
          line += fmt::format(" {}={}", spec->named, hw::kVectorOps[v].name);
          rebuilt.aux |= spec->named_bits.Put(v);
        }
      }
      for (const FlagSpec& f : spec->flags) {
        if ((in.flags & f.bit) == f.bit && !(rebuilt.flags & f.bit)) {
          line += std::string(" ") + f.word;
          rebuilt.flags |= f.bit;
        }
      }
      if (Encode(rebuilt) != w) spec = nullptr;  // reserved bits, or fields out of range
    }
    if (!spec) {
      line = "raw 0x";
      for (int i = 15; i >= 0; --i) line += fmt::format("{:02x}", w[static_cast<size_t>(i)]);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace tpu::isa
