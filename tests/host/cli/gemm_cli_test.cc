// `tpusim gemm` as a user runs it (host/cli/gemm_command.cc): results, reports, and every
// bad input ending in one line on stderr, the right exit code and no output file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/common/npy.h"
#include "host/gemm/gemm_runner.h"
#include "tests/host/cli/cli_fixture.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;
using test::Outcome;

class GemmCliTest : public test::CliFixture {
 protected:
  // A bad invocation: exit code, one line on stderr naming `fragment`, no C.npy written.
  void ExpectError(const std::string& args, int code, const std::string& fragment) {
    SCOPED_TRACE(args);
    CliFixture::ExpectError(args + " --out " + P("C.npy"), code, fragment);
    EXPECT_FALSE(fs::exists(P("C.npy")));
    for (const auto& e : fs::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
    }
  }
};

TEST_F(GemmCliTest, ProducesExactProductAndReport) {
  const auto a = gemm::RandomInt8(19, 23, 5), b = gemm::RandomInt8(23, 11, 6);
  WriteNpyInt8(P("A.npy"), a);
  WriteNpyInt8(P("B.npy"), b);
  const Outcome o = Run("gemm --array 8 --a " + P("A.npy") + " --b " + P("B.npy") + " --out " +
                        P("C.npy") + " --json " + P("r.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("bit-exact with the Eigen int32 reference"), std::string::npos) << o.out;
  const auto c = ReadNpyInt32(P("C.npy"));
  EXPECT_EQ(c.data, gemm::ReferenceGemm(a, b).data);
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  for (const char* key : {"cycles", "macs", "ops_per_cycle", "utilization", "array_dim",
                          "matches_reference", "config", "revision"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["array_dim"], 8);
  EXPECT_EQ(j["matches_reference"], true);
  EXPECT_EQ(j["macs"], 19 * 23 * 11);
  EXPECT_EQ(j["cycles"], j["predicted_cycles"]);
  // 3 K-folds x 2 N-tiles = 6 tiles of 19 rows on N = 8: 3N + 1 + 5 * 19 + 19.
  EXPECT_EQ(j["cycles"], 3 * 8 + 1 + 5 * 19 + 19);
  EXPECT_DOUBLE_EQ(j["ops_per_cycle"].get<double>(), 2.0 * 19 * 23 * 11 / (3 * 8 + 1 + 6 * 19));
}

TEST_F(GemmCliTest, NumpyMadeOperandsGiveNumpysProduct) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-numpy is not installed (scripts/install-deps installs it)";
  }
  const std::string make =
      "/usr/bin/python3 -c \"import numpy as np; r = np.random.default_rng(3); "
      "np.save('" +
      P("A.npy") +
      "', r.integers(-128, 128, (21, 50), dtype=np.int8)); "
      "np.save('" +
      P("B.npy") + "', np.asfortranarray(r.integers(-128, 128, (50, 13), dtype=np.int8)))\"";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const Outcome o = Run("gemm --array 4 --a " + P("A.npy") + " --b " + P("B.npy") + " --out " +
                        P("C.npy") + " -q");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "");
  const std::string check =
      "/usr/bin/python3 -c \"import numpy as np, sys; "
      "a = np.load('" +
      P("A.npy") + "').astype(np.int64); b = np.load('" + P("B.npy") +
      "').astype(np.int64); "
      "c = np.load('" +
      P("C.npy") + "'); sys.exit(0 if c.dtype == np.int32 and (c == a @ b).all() else 1)\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
}

TEST_F(GemmCliTest, RandomOperandsWithSystemCEngine) {
  const Outcome o = Run("gemm --config teach-4 --m 5 --k 6 --n 7 --engine systemc");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("systemc engine"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.rfind("tpusim gemm:", 0), 0u) << "nothing before the report: " << o.out;
  EXPECT_EQ(o.err, "");
  EXPECT_NE(o.out.find("bit-exact"), std::string::npos) << o.out;
}

TEST_F(GemmCliTest, HelpExplainsEveryFlagWithExamples) {
  const Outcome o = Run("gemm --help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* flag :
       {"--a", "--b", "--out", "--m", "--k", "--n", "--seed", "--config", "--array", "--engine",
        "--json", "--trace", "--trace-start", "--trace-end", "Examples:"}) {
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
  }
}

TEST_F(GemmCliTest, BadInputs) {
  WriteNpyInt8(P("A.npy"), gemm::RandomInt8(4, 5, 1));
  WriteNpyInt8(P("B.npy"), gemm::RandomInt8(5, 3, 2));
  WriteNpyInt8(P("B6.npy"), gemm::RandomInt8(6, 3, 2));
  WriteNpyInt32(P("I32.npy"), Matrix<int32_t>{2, 2, {1, 2, 3, 4}});
  std::ofstream(P("junk.npy")) << "not an array";
  const std::string ab = " --a " + P("A.npy") + " --b " + P("B.npy");

  ExpectError("gemm --a " + P("nope.npy") + " --b " + P("B.npy"), 2, "nope.npy: cannot open");
  ExpectError("gemm --a " + P("junk.npy") + " --b " + P("B.npy"), 2, "not a NumPy .npy file");
  ExpectError("gemm --a " + P("I32.npy") + " --b " + P("B.npy"), 2, "dtype is int32");
  ExpectError("gemm --a " + P("A.npy") + " --b " + P("B6.npy"), 2, "inner dimensions differ");
  ExpectError("gemm --a " + P("A.npy"), 2, "--a was given without --b");
  ExpectError("gemm" + ab + " --m 3", 2, "not both");
  ExpectError("gemm --m 0 --k 3 --n 3", 2, "M = 0 is invalid");
  ExpectError("gemm --m 3 --k 3 --n 99999999", 2, "too large");
  ExpectError("gemm --m -4 --k 3 --n 3", 2, "M = -4 is invalid");
  ExpectError("gemm --config nosuch" + ab, 2, "unknown preset 'nosuch'");
  ExpectError("gemm --set cores=2" + ab, 2, "tpusim gemm runs on one matrix unit of one core");
  ExpectError("gemm --set mxus_per_core=2" + ab, 2, "--set mxus_per_core=1 to run on one");
  ExpectError("gemm --config tpu-v3" + ab, 2, "'tpu-v3' has 2 core(s) of 2 matrix unit(s)");
  ExpectError("gemm --array 12" + ab, 2, "no RTL model for a 12 x 12 array");
  ExpectError("gemm --array 1" + ab, 2, "array_dim 1 is out of range");
  // The built 256 x 256 model is tpu-v1's, with 4,096 accumulator rows; small-16 has 1,024.
  ExpectError("gemm --dtype bf16 --array 128 --m 8 --k 8 --n 8", 2,
              "run it with --config tpu-v2, --set acc_depth_rows=4096");
  ExpectError("gemm --array 256 --m 8 --k 8 --n 8", 2,
              "has 4096 accumulator rows, and 'small-16 with --array 256' asks for 1024: run it "
              "with --config tpu-v1, --set acc_depth_rows=4096");
  ExpectError("gemm --engine magic" + ab, 2, "unknown --engine");
  ExpectError("gemm --trace " + P("t.txt") + ab, 2, "must end in .fst");
  ExpectError("gemm --trace " + P("t.fst") + " --trace-start 9 --trace-end 3" + ab, 2,
              "before --trace-start");
  ExpectError("gemm --frobnicate" + ab, 2, "frobnicate");
  ExpectError("gemm --m x --k 3 --n 3", 2, "--m");
  ExpectError("gemm" + ab + " --json /nonexistent-dir/r.json", 1, "/nonexistent-dir");
}

TEST_F(GemmCliTest, UnwritableOutputFailsBeforeRunningAndLeavesNothing) {
  const Outcome o = Run("gemm --m 3 --k 3 --n 3 --out /nonexistent-dir/C.npy");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("folder '/nonexistent-dir' does not exist"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "") << "no report for a run that never started";
  const Outcome d = Run("gemm --m 3 --k 3 --n 3 --out " + dir_.string());
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_NE(d.err.find("it is a folder"), std::string::npos) << d.err;
}

// bfloat16 (docs/bf16.md): float32 files in and out, both engines the same, bad input.
TEST_F(GemmCliTest, Bf16TakesAndGivesFloat32Arrays) {
  // Small integers: every sum exact in float32 whatever the order, so C is the exact product.
  const auto ia = gemm::RandomInt8(13, 21, 8), ib = gemm::RandomInt8(21, 6, 9);
  Tensor<float> a{{13, 21}, {}}, b{{21, 6}, {}};
  for (int8_t v : ia.data) a.data.push_back(static_cast<float>(v % 16));
  for (int8_t v : ib.data) b.data.push_back(static_cast<float>(v % 16));
  WriteNpyTensor(P("A.npy"), a);
  WriteNpyTensor(P("B.npy"), b);
  const std::string ab = " --a " + P("A.npy") + " --b " + P("B.npy");
  const Outcome o =
      Run("gemm --dtype bf16 --array 4" + ab + " --out " + P("C.npy") + " --json " + P("rtl.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("bf16 x bf16 -> float32"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("bit-exact with the bf16 reference"), std::string::npos) << o.out;
  const auto c = ReadNpyTensor<float>(P("C.npy"));
  ASSERT_EQ(c.shape, (std::vector<int64_t>{13, 6}));
  for (int64_t i = 0; i < 13; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      float want = 0;
      for (int64_t r = 0; r < 21; ++r) want += a.data[i * 21 + r] * b.data[r * 6 + j];
      ASSERT_EQ(c.data[i * 6 + j], want) << i << ", " << j;
    }
  }
  const Outcome f =
      Run("gemm --dtype bf16 --array 4 --engine fast" + ab + " --json " + P("fast.json"));
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto jr = nlohmann::json::parse(Slurp(P("rtl.json")));
  const auto jf = nlohmann::json::parse(Slurp(P("fast.json")));
  EXPECT_EQ(jr["dtype"], "bf16");
  EXPECT_EQ(jr["cycles"], jf["cycles"]);
  EXPECT_EQ(jr["cycle_breakdown"], jf["cycle_breakdown"]);
  EXPECT_EQ(jr["cycles"], jr["predicted_cycles"]);
}

TEST_F(GemmCliTest, Bf16BadInputs) {
  Tensor<float> a{{2, 3}, {1, 2, 3, 4, 5, 6}}, b{{3, 2}, {1, 2, 3, 4, 5, 6}};
  WriteNpyTensor(P("A.npy"), a);
  a.data[4] = std::numeric_limits<float>::quiet_NaN();
  WriteNpyTensor(P("Anan.npy"), a);
  a.data[4] = -std::numeric_limits<float>::infinity();
  WriteNpyTensor(P("Ainf.npy"), a);
  WriteNpyTensor(P("B.npy"), b);
  WriteNpyInt8(P("I8.npy"), gemm::RandomInt8(3, 2, 1));
  const std::string b_arg = " --b " + P("B.npy");
  ExpectError("gemm --dtype bf16 --a " + P("Anan.npy") + b_arg, 2, "element [1][1] is nan");
  ExpectError("gemm --dtype bf16 --a " + P("Ainf.npy") + b_arg, 2, "element [1][1] is -inf");
  ExpectError("gemm --dtype bf16 --a " + P("A.npy") + " --b " + P("I8.npy"), 2, "dtype is int8");
  ExpectError("gemm --dtype fp8 --m 2 --k 2 --n 2", 2, "unknown --dtype 'fp8'");
  ExpectError("gemm --dtype bf16 --array 8 --m 2 --k 2 --n 2", 2,
              "no bf16 RTL model for a 8 x 8 array");
}

// The fast matrix engine: the RTL's counters, and sizes that are not built.
TEST_F(GemmCliTest, FastEngineCountsWhatTheRtlCounts) {
  const std::string shape = " --config teach-4 --m 37 --k 11 --n 9 --seed 4 --json ";
  ASSERT_EQ(Run("gemm" + shape + P("rtl.json")).exit_code, 0);
  const Outcome o = Run("gemm --engine fast" + shape + P("fast.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto a = nlohmann::json::parse(Slurp(P("rtl.json")));
  const auto b = nlohmann::json::parse(Slurp(P("fast.json")));
  EXPECT_EQ(a["engine"], "rtl");
  EXPECT_EQ(b["engine"], "fast");
  EXPECT_EQ(a["cycles"], b["cycles"]);
  EXPECT_EQ(a["cycle_breakdown"], b["cycle_breakdown"]);
  EXPECT_TRUE(b["matches_reference"].get<bool>());
  const Outcome big =
      Run("gemm --engine fast --array 48 --m 100 --k 70 --n 50 --json " + P("big.json"));
  ASSERT_EQ(big.exit_code, 0) << big.err;
  const auto j = nlohmann::json::parse(Slurp(P("big.json")));
  EXPECT_EQ(j["cycles"], j["predicted_cycles"]);  // the closed form of docs/mxu.md holds at 48
}

}  // namespace
}  // namespace tpu
