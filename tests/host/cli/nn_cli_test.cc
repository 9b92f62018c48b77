// `tpusim model`, `train`, `quantize` and `infer` as a user runs them
// (host/cli/*_command.cc): output, JSON, and bad inputs with the right exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/nn/model.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

class NnCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpusim_nncli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& n) const { return (dir_ / n).string(); }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Outcome Run(const std::string& args) const {
    const std::string cmd = std::string(TPUSIM_BINARY) + " " + args + " >" + P("stdout") + " 2>" +
                            P("stderr") + " </dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(P("stdout")), Slurp(P("stderr"))};
  }
  void ExpectError(const std::string& args, int code, const std::string& fragment) {
    SCOPED_TRACE(args);
    const Outcome o = Run(args);
    EXPECT_EQ(o.exit_code, code) << o.err;
    EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
  static bool HaveMnist() {
    try {
      data::FindMnistDir("");
      return true;
    } catch (const UsageError&) {
      return false;
    }
  }
  fs::path dir_;
};

TEST_F(NnCliTest, ModelSummaryShowsTheParameterCounts) {
  const Outcome o = Run("model --summary");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  for (const char* text : {" 60\n", " 880\n", "69,240", "10,164", " 850\n", "81,194"}) {
    EXPECT_NE(o.out.find(text), std::string::npos) << text << "\n" << o.out;
  }
}

TEST_F(NnCliTest, InferReportsAccuracyAndWritesJson) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  for (const char* backend : {"cpu-int8", "cpu-fp32"}) {
    const Outcome o =
        Run(std::string("infer --backend ") + backend + " --images 300 --json " + P("r.json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("images/s"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("ms per image at batch 1"), std::string::npos) << o.out;
    const auto j = nlohmann::json::parse(Slurp(P("r.json")));
    EXPECT_EQ(j["backend"], backend);
    EXPECT_EQ(j["images"], 300);
    EXPECT_GT(j["accuracy"].get<double>(), 0.95);
    EXPECT_GT(j["images_per_second"].get<double>(), 0.0);
  }
}

TEST_F(NnCliTest, TrainThenQuantizeMakesALoadableInt8Model) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome t = Run("train --epochs 1 --limit 640 --out " + P("m") + " -q");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const Outcome q = Run("quantize --model " + P("m") + " --out " + P("q") + " --calibration 100");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("int8"), std::string::npos) << q.out;
  const nn::Model m = nn::LoadModel(P("q"));
  EXPECT_TRUE(m.quantized);
  EXPECT_EQ(m.ParamCount(), 81194);
}

TEST_F(NnCliTest, BadInputs) {
  ExpectError("infer --backend cuda-int7", 2, "unknown backend 'cuda-int7'");
  ExpectError("infer --model " + P("none"), 2, "cannot open");
  ExpectError("infer --images 0", 2, "at least 1");
  ExpectError("infer --data " + P("nodata"), 2, "no MNIST there");
  ExpectError("train", 2, "--out");
  ExpectError("quantize --model " + P("none") + " --out " + P("x"), 2, "cannot open");
  ExpectError("model --summary --model " + P("none"), 2, "cannot open");
  if (HaveMnist()) {
    ExpectError("infer --images 20000", 2, "more than the 10000 test images");
    ExpectError("infer --images 5 --json /nonexistent-dir/r.json", 1, "does not exist");
  }
}

}  // namespace
}  // namespace tpu
