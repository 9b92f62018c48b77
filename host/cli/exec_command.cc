// `tpusim exec`: run a TPU program on the whole simulated chip (SystemC system around
// the Verilated tpu_top) and report its status and counters.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "host/cli/isa_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/isa/assembler.h"
#include "host/report/exec_report.h"

namespace tpu::cli {
namespace {

struct ExecOptions {
  std::vector<std::string> program_paths;  // core 0's first
  ChipOptions chip;
  std::vector<std::string> host_in, weights_in;
  std::string host_out, host_out_range, weights_out, weights_out_range;
  TraceOptions trace;
  OutputOptions out;
};

uint64_t ParseNumber(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const uint64_t v = std::stoull(text, &used, 0);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(what + ": '" + text + "' is not a number (decimal or 0x hex)");
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(path + ": cannot open");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// FILE[@ADDR] arguments, placed into one image.
void PlaceFiles(const std::vector<std::string>& args, const char* option, uint64_t limit,
                const char* limit_name, std::vector<uint8_t>* image) {
  for (const std::string& arg : args) {
    std::string path = arg;
    uint64_t addr = 0;
    if (const size_t at = arg.rfind('@'); at != std::string::npos) {
      path = arg.substr(0, at);
      addr = ParseNumber(arg.substr(at + 1), std::string(option) + " " + arg);
    }
    const std::vector<uint8_t> bytes = ReadBytes(path);
    if (addr > limit || bytes.size() > limit - addr) {
      throw UsageError(
          fmt::format("{} {}: {} bytes at 0x{:x} run past the end of {} ({} bytes); "
                      "use a larger {} in the config",
                      option, arg, bytes.size(), addr, limit_name, limit, limit_name));
    }
    if (image->size() < addr + bytes.size()) image->resize(addr + bytes.size());
    std::copy(bytes.begin(), bytes.end(), image->begin() + static_cast<std::ptrdiff_t>(addr));
  }
}

// --host-out and --weights-out: a memory read back after the run, ADDR:BYTES of it (all of
// it without a range, up to 1 GiB: a Cloud preset's HBM of many GiB needs a range).
struct ReadBack {
  uint64_t addr = 0, bytes = 0;
};
ReadBack ReadBackRange(const std::string& file, const std::string& range, const char* option,
                       uint64_t size, const char* size_name, bool timing_only) {
  const std::string range_option = std::string(option) + "-range";
  if (file.empty()) {
    if (!range.empty()) throw UsageError(range_option + " needs " + option + " FILE");
    return {};
  }
  if (timing_only) {
    throw UsageError(std::string(option) + " needs values; --timing-only computes counters only");
  }
  if (range.empty()) {
    if (size > (uint64_t{1} << 30)) {
      throw UsageError(
          fmt::format("{}: the memory is {} bytes ({}); give the part to write with "
                      "{} ADDR:BYTES",
                      option, size, size_name, range_option));
    }
    return {0, size};
  }
  const size_t colon = range.find(':');
  if (colon == std::string::npos) {
    throw UsageError(range_option + " '" + range + "' must be ADDR:BYTES");
  }
  return {ParseNumber(range.substr(0, colon), range_option),
          ParseNumber(range.substr(colon + 1), range_option)};
}

isa::Program LoadProgram(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(path + ": cannot open");
  char magic[8] = {};
  f.read(magic, 8);
  if (f.gcount() == 8 && std::string(magic, 8) == "TPUSIMP1") return isa::ReadProgram(path);
  f.clear();
  f.seekg(0);
  std::stringstream ss;
  ss << f.rdbuf();
  return isa::Assemble(ss.str(), path);
}

void RunExec(const ExecOptions& o) {
  run::ChipSession session(SessionSpecFrom(o.chip, o.trace, /*progress=*/!o.out.quiet));
  const config::TpuConfig& config = session.config();
  const std::string& program_path = o.program_paths.front();
  const isa::Program program = LoadProgram(program_path);

  engine::ExecJob job;
  job.name = program_path;
  job.program = program;
  for (size_t c = 1; c < o.program_paths.size(); ++c) {
    job.other_programs.push_back(LoadProgram(o.program_paths[c]));
  }
  PlaceFiles(o.host_in, "--host-in", static_cast<uint64_t>(config.host_mem_bytes), "host_mem_bytes",
             &job.host_image);
  PlaceFiles(o.weights_in, "--weights-in", static_cast<uint64_t>(config.weight_mem_bytes),
             "weight_mem_bytes", &job.weight_image);
  const ReadBack host_out = ReadBackRange(o.host_out, o.host_out_range, "--host-out",
                                          static_cast<uint64_t>(config.host_mem_bytes),
                                          "host_mem_bytes", o.chip.timing_only);
  const ReadBack weights_out = ReadBackRange(o.weights_out, o.weights_out_range, "--weights-out",
                                             static_cast<uint64_t>(config.weight_mem_bytes),
                                             "weight_mem_bytes", o.chip.timing_only);
  job.host_out_addr = host_out.addr;
  job.host_out_bytes = host_out.bytes;
  for (const std::string* p : {&o.host_out, &o.weights_out, &o.out.json}) {
    if (!p->empty()) CheckWritable(*p);
  }
  std::vector<isa::Program> programs = {job.program};
  programs.insert(programs.end(), job.other_programs.begin(), job.other_programs.end());
  const report::ProgramBound bound = report::BoundPrograms(programs, config);
  engine::Executable exe = engine::ExecutableOf(job);
  exe.regions.push_back(
      {"weights out", engine::Memory::kWeight, weights_out.addr, weights_out.bytes, {}});
  engine::ChipEngine& chip = session.engine();
  chip.Load(std::move(exe));
  engine::ExecResult r = chip.Run();
  if (host_out.bytes > 0) r.host_out = chip.Read("outputs");
  const std::vector<uint8_t> weights =
      weights_out.bytes > 0 ? chip.Read("weights out") : std::vector<uint8_t>{};
  session.Finish();  // a failed run's waveform and timeline are the most useful ones

  if (!o.out.json.empty()) {
    WriteFileAtomically(
        o.out.json,
        report::ExecReportJson(r, config, program_path, program.words.size(), &bound).dump(2) +
            "\n");
  }
  if (!o.out.quiet) {
    std::cout << report::FormatExecReport(r, config, program_path, program.words.size(), &bound);
  }
  if (!r.ok) throw RuntimeError(program_path + ": " + r.message);
  if (!o.host_out.empty()) {
    WriteFileAtomically(o.host_out, std::string(r.host_out.begin(), r.host_out.end()));
  }
  if (!o.weights_out.empty()) {
    WriteFileAtomically(o.weights_out, std::string(weights.begin(), weights.end()));
  }
}

}  // namespace

void AddExecCommand(CLI::App& app) {
  auto o = std::make_shared<ExecOptions>();
  CLI::App* cmd = app.add_subcommand(
      "exec", "Run a TPU program on the whole cycle-accurate chip and report its counters.");
  cmd->footer(R"(
Loads the program (assembly or a binary from 'tpusim asm'), host data and weights into the
simulated chip, runs it until HALT, an error or the watchdog, and prints the status and
every performance counter. --engine rtl (default) runs the Verilated RTL in the SystemC
system through its TLM-2.0 socket; --engine fast runs the C++ model of the same chip,
which gives the same counters at any array size. Exits 0 only when the program reaches
HALT with status ok; 1 for a chip error, a watchdog stop or a program without HALT (the
report is still printed and written).

Examples:
  tpusim exec examples/dense_layer.asm --host-in examples/dense_layer.host.bin \
      --weights-in examples/dense_layer.weights.bin
  tpusim exec prog.bin --config teach-4 --trace run.fst --json run.json
  tpusim exec prog.asm --config tpu-v1 --engine fast --timeline run.trace.json
  tpusim exec prog.asm --set host_mem_latency_cycles=400 --host-out out.bin \
      --host-out-range 0x2000:1024
  tpusim exec core0.asm core1.asm --config teach-4 --set cores=2
  tpusim exec prog.asm --config tpu-v2 --weights-out hbm.bin --weights-out-range 0x100000:4096

On a chip of several cores each core runs its own program, all sharing host and weight
memory; the run ends when the last core has, and the report shows each core's end.

Docs: docs/isa.md (instructions), docs/architecture.md (units, counters, memory map).)");
  cmd->add_option("FILE", o->program_paths,
                  "program: assembly (.asm) or binary (tpusim asm); on a chip of several cores "
                  "(--set cores=C) one per core, core 0's first (a core without one stays idle)")
      ->required();
  AddChipOptions(cmd, &o->chip);
  cmd->add_option("--host-in", o->host_in,
                  "FILE[@ADDR]: bytes to place in host memory (default address 0; repeatable)");
  cmd->add_option("--weights-in", o->weights_in,
                  "FILE[@ADDR]: bytes to place in weight memory (repeatable)");
  cmd->add_option("--host-out", o->host_out, "write host memory after the run to this file");
  cmd->add_option("--host-out-range", o->host_out_range,
                  "ADDR:BYTES of host memory for --host-out (default: all of it)");
  cmd->add_option("--weights-out", o->weights_out,
                  "write weight memory (HBM) after the run to this file (what write_hbm left)");
  cmd->add_option(
      "--weights-out-range", o->weights_out_range,
      "ADDR:BYTES of weight memory for --weights-out (default: all of it, up to 1 GiB)");
  AddTraceOptions(cmd, &o->trace, "write a waveform of every chip signal (.fst/.vcd; rtl engine)");
  AddOutputOptions(cmd, &o->out, "write the report as JSON to this file");
  cmd->callback([o] { RunExec(*o); });
}

}  // namespace tpu::cli
