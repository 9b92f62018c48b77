// `tpusim exec` as a user runs it: the shipped example, binary programs, reports, traces,
// and the error contract for bad programs and bad inputs.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "contract/tpu_contract.h"
#include "tests/host/cli/cli_fixture.h"

namespace tpu::test {
namespace {

const std::string kExamples = std::string(TPUSIM_SOURCE_DIR) + "/examples/";
const std::string kDenseArgs = "exec " + kExamples + "dense_layer.asm --host-in " + kExamples +
                               "dense_layer.host.bin --weights-in " + kExamples +
                               "dense_layer.weights.bin";

class ExecCliTest : public CliFixture {
 protected:
  void WriteText(const std::string& name, const std::string& text) {
    std::ofstream(P(name)) << text;
  }
};

TEST_F(ExecCliTest, ShippedExampleComputesTheDenseLayerAndPrintsCounters) {
  const Outcome o = Run(kDenseArgs + " --host-out " + P("y.bin") +
                        " --host-out-range 0x2000:1024 --json " + P("r.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(Slurp(P("y.bin")), Slurp(kExamples + "dense_layer.expected.bin"));
  EXPECT_NE(o.out.find("status    halted (chip status: ok)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("32,768 MACs"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("host_bytes_written 1,024"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(j["status"], "halted");
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_GT(j["cycles"].get<uint64_t>(), 128u);
  EXPECT_EQ(j["cycles"], j["counters"]["cycles"]);
  EXPECT_EQ(j["counters"]["macs"], 32768);
  EXPECT_EQ(j["config"]["name"], "small-16");
  EXPECT_EQ(j["instructions"], 9);
}

// The window stage against an independent reference: examples/make_conv_window.py computes
// the convolution (padding 1, the map's fourth byte of noise skipped) in numpy.
TEST_F(ExecCliTest, ShippedWindowExampleFormsItsConvolutionOnTheChip) {
  for (const char* engine : {"rtl", "fast"}) {
    const Outcome o =
        Run("exec " + kExamples + "conv_window.asm --config teach-4 --engine " + engine +
            " --host-in " + kExamples + "conv_window.host.bin --weights-in " + kExamples +
            "conv_window.weights.bin --host-out " + P("y.bin") + " --host-out-range 0x200:36");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(Slurp(P("y.bin")), Slurp(kExamples + "conv_window.expected.bin")) << engine;
    EXPECT_NE(o.out.find("mxu_stream_cycles 252"), std::string::npos) << o.out;  // 7 x 36 rows
  }
}

TEST_F(ExecCliTest, ShippedPoolingExampleComputesItsLayerOnTheFourByFourChip) {
  const Outcome o =
      Run("exec " + kExamples + "pool_layer.asm --config teach-4 --host-in " + kExamples +
          "pool_layer.host.bin --weights-in " + kExamples + "pool_layer.weights.bin --host-out " +
          P("y.bin") + " --host-out-range 0x200:16");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Slurp(P("y.bin")), Slurp(kExamples + "pool_layer.expected.bin"));
  EXPECT_NE(o.out.find("vpu_rows_in 16  vpu_rows_out 4"), std::string::npos) << o.out;
}

// --weights-out: weight memory (HBM) read back after the run, here what the two cores of
// tpu-v3 wrote with write_hbm (their gradients, the example's input), on both engines; bad
// ranges are usage errors that write nothing.
TEST_F(ExecCliTest, WeightsOutReadsBackWhatWriteHbmLeftInHbm) {
  const std::string ex = kExamples + "training/allreduce";
  const std::string args = "exec " + ex + "_core0.asm " + ex + "_core1.asm -c tpu-v3 --host-in " +
                           ex + ".host.bin -q --weights-out " + P("hbm.bin");
  for (const char* engine : {"fast", "rtl"}) {
    const Outcome o =
        Run(args + " --weights-out-range 0x100000:0x20000 --engine " + std::string(engine));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(Slurp(P("hbm.bin")), Slurp(ex + ".host.bin")) << engine;
    std::filesystem::remove(P("hbm.bin"));
  }
  ExpectError(args + " --engine fast", 2, "give the part to write with --weights-out-range");
  ExpectError(args + " --engine fast --weights-out-range 0x7fffffff0:0x100", 2,
              "region 'weights out' (256 bytes at 34359738352) runs past the end of weight memory");
  ExpectError(args + " --engine fast --weights-out-range 12", 2, "must be ADDR:BYTES");
  EXPECT_FALSE(std::filesystem::exists(P("hbm.bin")));
  ExpectError("exec " + ex + "_core0.asm -c tpu-v3 --weights-out-range 0:4", 2,
              "--weights-out-range needs --weights-out FILE");
}

TEST_F(ExecCliTest, BinaryProgramRunsLikeItsAssembly) {
  ASSERT_EQ(Run("asm " + kExamples + "dense_layer.asm -o " + P("d.bin")).exit_code, 0);
  const Outcome a = Run(kDenseArgs + " --json " + P("a.json"));
  const std::string bin_args = "exec " + P("d.bin") + " --host-in " + kExamples +
                               "dense_layer.host.bin --weights-in " + kExamples +
                               "dense_layer.weights.bin --json " + P("b.json");
  const Outcome b = Run(bin_args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto ja = nlohmann::json::parse(Slurp(P("a.json")));
  const auto jb = nlohmann::json::parse(Slurp(P("b.json")));
  EXPECT_EQ(ja["counters"], jb["counters"]);
}

TEST_F(ExecCliTest, InvalidOpcodeStopsWithAClearErrorAndNoOutput) {
  WriteText("bad.asm", fmt::format("nop\nraw {:#x}\nhalt\n", hw::kMnemonics.size()));
  const Outcome o = ExpectError("exec " + P("bad.asm") + " --config teach-4 --json " + P("r.json") +
                                    " --host-out " + P("out.bin"),
                                1, "the chip stopped at instruction 1: invalid opcode");
  EXPECT_NE(o.out.find("status    error (chip status: invalid-opcode)"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(P("out.bin"))) << "no results from a failed run";
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));  // the report says what happened
  EXPECT_EQ(j["status"], "error");
  EXPECT_EQ(j["chip_status"], "invalid-opcode");
  EXPECT_EQ(j["error_pc"], 1);
}

TEST_F(ExecCliTest, OutOfRangeAddressStopsWithAClearError) {
  WriteText("bad.asm", "write_host ub=0 host=0xFFFFF0 rows=4\nhalt\n");
  ExpectError("exec " + P("bad.asm") + " --config small-16", 1,
              "stopped at instruction 0: a transfer that runs past the end of its memory");
  WriteText("bad2.asm", "read_host host=0 ub=20000 rows=1\nhalt\n");
  ExpectError("exec " + P("bad2.asm"), 1, "an address outside its memory");
}

TEST_F(ExecCliTest, MissingHaltAndWatchdogAreErrors) {
  WriteText("nohalt.asm", "nop\n");
  ExpectError("exec " + P("nohalt.asm") + " -c teach-4", 1, "without HALT");
  WriteText("stuck.asm", "matmul ub=0 acc=0 rows=4 switch\nhalt\n");
  ExpectError("exec " + P("stuck.asm") + " -c teach-4 --watchdog 300", 1,
              "watchdog: no progress for 300 cycles");
}

TEST_F(ExecCliTest, TraceIsAValidWaveformOfTheChip) {
  for (const char* name : {"t.fst", "t.vcd"}) {
    const Outcome o = Run(kDenseArgs + " --trace " + P(name) + " -q");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "");
  }
  // A window: the first and last timestamps are those of its cycles (10 ns a cycle).
  const Outcome w =
      Run(kDenseArgs + " --trace " + P("w.vcd") + " --trace-start 100 --trace-end 109 -q");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string wv = Slurp(P("w.vcd"));
  EXPECT_NE(wv.find("\n#1000\n"), std::string::npos);
  EXPECT_NE(wv.find("\n#1095\n"), std::string::npos);
  EXPECT_EQ(wv.find("\n#1100\n"), std::string::npos);
  EXPECT_EQ(wv.find("\n#995\n"), std::string::npos);
  ExpectError(kDenseArgs + " --trace " + P("x.fst") + " --trace-start 9 --trace-end 3", 2,
              "--trace-end 3 is before --trace-start 9");
  const std::string cmd =
      "fst2vcd -f '" + P("t.fst") + "' -o '" + P("conv.vcd") + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (const std::string& vcd : {Slurp(P("conv.vcd")), Slurp(P("t.vcd"))}) {
    EXPECT_NE(vcd.find("u_controller"), std::string::npos);
    EXPECT_NE(vcd.find("u_weight_fifo"), std::string::npos);
    EXPECT_NE(vcd.find("hm_req_valid_o"), std::string::npos);
  }
}

TEST_F(ExecCliTest, BadInputsAreUsageErrors) {
  ExpectError("exec " + P("missing.asm"), 2, "missing.asm: cannot open");
  WriteText("typo.asm", "halt\nmatmull ub=0\n");
  ExpectError("exec " + P("typo.asm"), 2, "typo.asm:2: unknown instruction 'matmull'");
  WriteText("ok.asm", "halt\n");
  ExpectError("exec " + P("ok.asm") + " --config nosuch", 2, "unknown preset 'nosuch'");
  ExpectError("exec " + P("ok.asm") + " --host-in " + P("nothere.bin"), 2,
              "nothere.bin: cannot open");
  WriteText("big.bin", std::string(2000, 'x'));
  ExpectError("exec " + P("ok.asm") + " -c teach-4 --host-in " + P("big.bin") + "@0xFFFFF", 2,
              "run past the end of host_mem_bytes");
  ExpectError("exec " + P("ok.asm") + " --host-in " + P("big.bin") + "@zz", 2,
              "'zz' is not a number");
  ExpectError("exec " + P("ok.asm") + " --set bogus=1", 2, "unknown key 'bogus'");
  ExpectError("exec " + P("ok.asm") + " --set host_mem_bytes_per_cycle=0", 2,
              "host_mem_bytes_per_cycle 0 is out of range");
  ExpectError("exec " + P("ok.asm") + " --set ub_depth_rows", 2, "must be KEY=VALUE");
  ExpectError("exec " + P("ok.asm") + " --host-out-range 0:16", 2, "needs --host-out");
  ExpectError("exec " + P("ok.asm") + " --trace " + P("t.png"), 2, "must end in .fst");
  ExpectError("exec " + P("ok.asm") + " --array 24", 2, "-DTPUSIM_TPU_DIMS=");
  ExpectError("exec " + P("ok.asm") + " --json " + P("no/such/dir/r.json"), 1, "r.json");
}

TEST_F(ExecCliTest, ConfigOverrideChangesTheTiming) {
  const Outcome fast = Run(kDenseArgs + " --json " + P("f.json"));
  const Outcome slow =
      Run(kDenseArgs + " --set host_mem_latency_cycles=1000 --json " + P("s.json"));
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  const auto f = nlohmann::json::parse(Slurp(P("f.json")));
  const auto s = nlohmann::json::parse(Slurp(P("s.json")));
  EXPECT_EQ(s["config"]["host_mem_latency_cycles"], 1000);
  // Two dependent host transfers (read, then write back) each see the extra latency.
  EXPECT_GE(s["cycles"].get<int64_t>() - f["cycles"].get<int64_t>(), 900);
}

// --engine fast gives the report of the rtl engine, word for word apart from the engine.
TEST_F(ExecCliTest, FastEngineGivesTheSameReportAsTheRtl) {
  const Outcome a = Run(kDenseArgs + " --json " + P("rtl.json") + " --host-out " + P("a.bin") +
                        " --host-out-range 0x2000:1024");
  const Outcome b = Run(kDenseArgs + " --engine fast --json " + P("fast.json") + " --host-out " +
                        P("b.bin") + " --host-out-range 0x2000:1024");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ja = nlohmann::json::parse(Slurp(P("rtl.json")));
  auto jb = nlohmann::json::parse(Slurp(P("fast.json")));
  EXPECT_EQ(ja["engine"], "rtl");
  EXPECT_EQ(jb["engine"], "fast");
  ja.erase("engine");
  jb.erase("engine");
  EXPECT_EQ(ja, jb);
  EXPECT_EQ(Slurp(P("a.bin")), Slurp(P("b.bin")));
  EXPECT_NE(b.out.find("fast engine"), std::string::npos) << b.out;
}

// A size with no RTL model in this build (here 40 x 40): the error names --engine fast, and
// the fast engine runs it; so does tpu-v1's 256 x 256 chip.
TEST_F(ExecCliTest, SizesWithoutRtlRunOnTheFastEngine) {
  WriteText("copy.asm", "read_host host=0 ub=0 rows=2\nwrite_host ub=0 host=1024 rows=2\nhalt\n");
  std::ofstream(P("in.bin"), std::ios::binary) << std::string(512, 'x');
  ExpectError("exec " + P("copy.asm") + " --array 40 --host-in " + P("in.bin"), 2, "--engine fast");
  const Outcome s = Run("exec " + P("copy.asm") + " --array 40 --engine fast --host-in " +
                        P("in.bin") + " --host-out " + P("out.bin") + " --host-out-range 1024:80");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(Slurp(P("out.bin")), std::string(80, 'x'));
  EXPECT_NE(s.out.find("40 x 40"), std::string::npos) << s.out;
  const Outcome o = Run("exec " + P("copy.asm") + " --config tpu-v1 --engine fast --host-in " +
                        P("in.bin") + " --host-out " + P("out.bin") + " --host-out-range 1024:512");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Slurp(P("out.bin")), std::string(512, 'x'));
  EXPECT_NE(o.out.find("256 x 256"), std::string::npos) << o.out;
}

TEST_F(ExecCliTest, TimelineIsAChromeTraceOfTheRun) {
  const Outcome o = Run(kDenseArgs + " --engine fast --timeline " + P("t.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("t.json")));
  ASSERT_TRUE(j["traceEvents"].is_array());
  EXPECT_GT(j["traceEvents"].size(), 20u);
  EXPECT_EQ(j["otherData"]["engine"], "fast");
  int matmuls = 0;
  for (const auto& e : j["traceEvents"]) matmuls += e["name"] == "matmul";
  EXPECT_EQ(matmuls, 2);
}

TEST_F(ExecCliTest, EngineOptionsThatDoNotFitAreUsageErrors) {
  ExpectError(kDenseArgs + " --engine magic", 2, "unknown engine 'magic'");
  ExpectError(kDenseArgs + " --timing-only", 2, "--timing-only is a mode of the fast engine");
  ExpectError(kDenseArgs + " --engine fast --trace " + P("x.fst"), 2, "waveforms");
  ExpectError(kDenseArgs + " --engine fast --timing-only --host-out " + P("y.bin"), 2,
              "--timing-only");
  ExpectError(kDenseArgs + " --engine fast --array 600", 2, "array_dim 600");
  EXPECT_FALSE(std::filesystem::exists(P("y.bin")));
}

// `tpusim lstm`: an LSTM layer with values on both engines, the same report, and its errors.
TEST_F(ExecCliTest, LstmRunsBitExactWithTheSameCountersOnBothEngines) {
  const std::string args = "lstm --config teach-4 --inputs 5 --hidden 6 --batch 3 --steps 2";
  nlohmann::json j[2];
  int i = 0;
  for (const char* engine : {"rtl", "fast"}) {
    const Outcome o = Run(args + " --engine " + engine + " --json " + P(std::string(engine)));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("bit-exact against the int8 reference"), std::string::npos) << o.out;
    j[i++] = nlohmann::json::parse(Slurp(P(engine)));
  }
  EXPECT_TRUE(j[0]["lstm"]["bit_exact"].get<bool>());
  EXPECT_EQ(j[0]["lstm"], j[1]["lstm"]);
  EXPECT_EQ(j[0]["counters"], j[1]["counters"]);
  EXPECT_GT(j[0]["counters"]["vpu_rows_out"].get<int64_t>(), 0);
  const Outcome t = Run(args + " --engine fast --timing-only");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("not computed (--timing-only)"), std::string::npos) << t.out;
}

TEST_F(ExecCliTest, LstmBadInputsAreUsageErrors) {
  ExpectError("lstm --hidden 0", 2, "--hidden 0 must be 1 to 65535");
  ExpectError("lstm --steps 70000", 2, "--steps 70000 must be 1 to 65535");
  ExpectError("lstm --config tpu-v3 --engine fast --inputs 5 --hidden 6", 2,
              "lstm 'lstm' runs on int8 chips only");
  ExpectError(
      "lstm --config teach-4 --engine fast --inputs 5 --hidden 6 --json " + P("no/such/dir/r.json"),
      1, "r.json");
}

// What the layer's own program could not run, the network compiler's runs: fewer parameter
// sets than the gates need (they stream), a batch beyond the accumulators (groups), and
// several cores (the batch shared out).
TEST_F(ExecCliTest, LstmRunsWhereTheChipIsSmall) {
  for (const char* more : {"--set param_sets=5", "--batch 200", "--set cores=2"}) {
    const Outcome o =
        Run(std::string("lstm --config teach-4 --engine fast --inputs 5 --hidden 6 ") + more);
    ASSERT_EQ(o.exit_code, 0) << more << ": " << o.err;
    EXPECT_NE(o.out.find("bit-exact against the int8 reference"), std::string::npos) << o.out;
  }
}

}  // namespace
}  // namespace tpu::test
