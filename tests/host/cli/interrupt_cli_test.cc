// Interrupted and failing runs: `tpusim run`, `train`, `quantize`, `import` and `sweep` killed at
// random moments (SIGINT, SIGKILL) leave no half-written output and run again; Ctrl-C
// stops within a second with a message; a full disk and a read-only folder give one clear
// error and leave nothing behind.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/nn/model.h"
#include "tests/host/cli/cli_fixture.h"
#include "tests/host/nn/nn_test_util.h"
#include "tests/mnist_test_util.h"

namespace tpu::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Killed {
  int status = 0;
  double seconds_to_exit = 0;  // from the signal to the exit
  std::string err;
};

class InterruptCliTest : public CliFixture {
 protected:
  void ResumesToTheSameWeights(const std::vector<std::string>& argv);
  // Starts tpusim with `args`, sends `sig` after `delay`, waits for it to end.
  Killed StartAndKill(const std::vector<std::string>& args, std::chrono::milliseconds delay,
                      int sig) {
    const std::string err = P("kill.err");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      std::freopen(err.c_str(), "w", stderr);
      std::freopen("/dev/null", "r", stdin);
      std::vector<char*> argv = {const_cast<char*>(TPUSIM_BINARY)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(TPUSIM_BINARY, argv.data());
      ::_exit(127);
    }
    std::this_thread::sleep_for(delay);
    // SIGKILL takes the children too (as a lost node would); SIGINT goes to tpusim alone,
    // which must stop its children itself.
    ::kill(sig == SIGKILL ? -pid : pid, sig);
    const auto t0 = Clock::now();
    Killed k;
    ::waitpid(pid, &k.status, 0);
    k.seconds_to_exit = std::chrono::duration<double>(Clock::now() - t0).count();
    if (sig == SIGINT) {
      // Give the children it stopped a moment to go.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    k.err = Slurp(err);
    return k;
  }

  // No temporary files or folders are left next to an output.
  void ExpectNoTemporaries(const std::string& folder) {
    for (const auto& e : fs::directory_iterator(folder)) {
      const std::string name = e.path().filename().string();
      EXPECT_EQ(name.find(".tmp"), std::string::npos) << "left behind: " << e.path();
      EXPECT_EQ(name.find(".old"), std::string::npos) << "left behind: " << e.path();
    }
  }

  // A SIGINT ends the command with status 130 and the message, within a second; a command
  // that had already finished (status 0) is fine too: the callers check its output whole.
  void ExpectInterruptedCleanly(const Killed& k, int sig) {
    if (sig == SIGINT && WIFEXITED(k.status) && WEXITSTATUS(k.status) != 0) {
      EXPECT_EQ(WEXITSTATUS(k.status), 130) << k.err;
      EXPECT_NE(k.err.find("tpusim: interrupted"), std::string::npos) << k.err;
      EXPECT_LT(k.seconds_to_exit, 1.0);
    }
  }

  std::mt19937 rng_{20261122};
};

TEST_F(InterruptCliTest, KilledRunsLeaveCompleteOutputsOrNone) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  std::uniform_int_distribution<int> ms(50, 1500);
  for (int sig : {SIGINT, SIGKILL, SIGINT, SIGKILL}) {
    SCOPED_TRACE(sig);
    fs::remove_all(P("out"));
    fs::create_directories(P("out"));
    const std::string json = P("out/r.json");
    const Killed k = StartAndKill({"run", "--engine", "fast", "--images", "10000", "-q", "--json",
                                   json, "--csv", P("out/r.csv")},
                                  std::chrono::milliseconds(ms(rng_)), sig);
    ExpectInterruptedCleanly(k, sig);
    if (fs::exists(json)) {
      EXPECT_NO_THROW(nlohmann::json::parse(Slurp(json)));
    }
    ExpectNoTemporaries(P("out"));
    const Outcome again = Run("run --engine fast --images 50 -q --json " + json);
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NO_THROW(nlohmann::json::parse(Slurp(json)));
  }
}

TEST_F(InterruptCliTest, KilledTrainingAndQuantizationLeaveAWholeModelOrNone) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  std::uniform_int_distribution<int> ms(100, 2500);
  for (int sig : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(sig);
    fs::remove_all(P("m"));
    fs::create_directories(P("m"));
    // Over an existing model: afterwards the folder holds the old model or the new, whole.
    ASSERT_EQ(Run("train --epochs 1 --limit 500 -q --out " + P("m/fp32")).exit_code, 0);
    Killed k =
        StartAndKill({"train", "--epochs", "3", "--limit", "6000", "-q", "--out", P("m/fp32")},
                     std::chrono::milliseconds(ms(rng_)), sig);
    ExpectInterruptedCleanly(k, sig);
    EXPECT_NO_THROW(nn::LoadModel(P("m/fp32")));
    ExpectNoTemporaries(P("m"));
    k = StartAndKill(
        {"quantize", "--model", P("m/fp32"), "--out", P("m/int8"), "--calibration", "20000", "-q"},
        std::chrono::milliseconds(ms(rng_)), sig);
    ExpectInterruptedCleanly(k, sig);
    if (fs::exists(P("m/int8"))) {
      EXPECT_NO_THROW(nn::LoadModel(P("m/int8")));
    }
    ExpectNoTemporaries(P("m"));
    const Outcome again =
        Run("quantize --calibration 200 -q --model " + P("m/fp32") + " --out " + P("m/int8"));
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_TRUE(nn::LoadModel(P("m/int8")).quantized);
  }
}

// Training (on the chip or the CPU), interrupted at a random moment (Ctrl-C, or SIGKILL as a
// preempted Slurm job), and started again with the same command, resumes from its last
// checkpoint and ends with the model folder of a run never interrupted, every file bit for
// bit; the checkpoint goes when the model is written. `argv`: the command but --out.
void InterruptCliTest::ResumesToTheSameWeights(const std::vector<std::string>& argv) {
  std::string args;
  for (const std::string& a : argv) args += a + " ";
  const auto t0 = Clock::now();
  const Outcome whole_run = Run(args + "--out " + P("whole"));
  ASSERT_EQ(whole_run.exit_code, 0) << whole_run.err;
  // A moment within the run: from a fifth of its time (past the loading of the data) to
  // nine tenths.
  const int whole = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
  std::uniform_int_distribution<int> ms(whole / 5, whole * 9 / 10);
  for (int sig : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(sig);
    fs::remove_all(P("cut"));
    std::vector<std::string> cut = argv;
    cut.insert(cut.end(), {"--out", P("cut")});
    ExpectInterruptedCleanly(StartAndKill(cut, std::chrono::milliseconds(ms(rng_)), sig), sig);
    const Outcome again = Run(args + "--out " + P("cut"));
    ASSERT_EQ(again.exit_code, 0) << again.err;
    int files = 0;
    for (const auto& f : fs::directory_iterator(P("whole"))) {
      const std::string name = f.path().filename().string();
      EXPECT_EQ(Slurp(P("cut/") + name), Slurp(f.path().string())) << name;
      ++files;
    }
    EXPECT_GT(files, 1);
    EXPECT_FALSE(fs::exists(P("cut.checkpoint")));
    ExpectNoTemporaries(P(""));
  }
}

TEST_F(InterruptCliTest, InterruptedChipTrainingResumesToTheSameWeights) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string args = "train --config tpu-v2 --limit 1920 --epochs 2 --checkpoint-every 5 -q";
  ResumesToTheSameWeights({"train", "--config", "tpu-v2", "--limit", "1920", "--epochs", "2",
                           "--checkpoint-every", "5", "-q"});
  // A checkpoint of another run is not taken for this one, nor removed.
  fs::create_directories(P("other.checkpoint"));
  {
    std::ofstream f(P("other.checkpoint/checkpoint.json"));
    f << R"({"format": "tpusim-training-checkpoint", "run": {"arch": "lenet5"}})";
  }
  ExpectError(args + " --out " + P("other"), 2,
              "holds the checkpoint of another run (arch \"lenet5\" there, \"mlp\" now)");
  EXPECT_TRUE(fs::exists(P("other.checkpoint/checkpoint.json")));
}

// The same for the CNN on the chip.
TEST_F(InterruptCliTest, InterruptedCnnTrainingOnTheChipResumesToTheSameWeights) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  ResumesToTheSameWeights({"train", "--config", "tpu-v2", "--arch", "lenet5", "--batch", "8",
                           "--limit", "96", "--epochs", "2", "--checkpoint-every", "3", "-q"});
}

// A network with batch normalization (conv 4 without activation, batch normalization with
// ReLU, max pooling, the classes) into `dir`.
void SaveBatchNormModel(const std::string& dir) {
  nn::Model m;
  m.name = "bn";
  m.input = {data::kPaddedSide, data::kPaddedSide, 1};
  m.layers = {test::MakeLayer(nn::LayerType::kConv2d, 4, 3, 1, "valid", nn::Activation::kNone),
              test::MakeLayer(nn::LayerType::kBatchNorm),
              test::MakeLayer(nn::LayerType::kMaxPool2d), test::MakeLayer(nn::LayerType::kFlatten),
              test::MakeLayer(nn::LayerType::kDense, data::kClasses, 1, 1, "valid",
                              nn::Activation::kSoftmax)};
  m.layers[1].activation = nn::Activation::kRelu;
  nn::SaveModel(test::Randomize(m, 5), dir);
}

// The same on the CPU: LeNet on two threads, and a network with batch normalization, whose
// running statistics the checkpoint keeps too.
TEST_F(InterruptCliTest, InterruptedCpuTrainingResumesToTheSameWeights) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  ResumesToTheSameWeights(
      {"train", "--limit", "9600", "--epochs", "2", "--checkpoint-every", "7", "-q"});
  SaveBatchNormModel(P("bn"));
  fs::remove_all(P("whole"));
  ResumesToTheSameWeights({"train", "--model", P("bn"), "--limit", "9600", "--epochs", "2",
                           "--checkpoint-every", "7", "-q"});
  EXPECT_TRUE(fs::exists(P("whole/l1.running_var.npy")));
}

// The same network on the chip: its running statistics in the chip's state, checkpointed.
TEST_F(InterruptCliTest, InterruptedBatchNormTrainingOnTheChipResumesToTheSameWeights) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  SaveBatchNormModel(P("bn"));
  ResumesToTheSameWeights({"train", "--config", "tpu-v2", "--model", P("bn"), "--batch", "4",
                           "--limit", "160", "--epochs", "2", "--checkpoint-every", "5", "-q"});
}

TEST_F(InterruptCliTest, KilledImportsLeaveAWholeModelOrNone) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string onnx = TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx";
  std::uniform_int_distribution<int> ms(20, 1500);
  for (int sig : {SIGINT, SIGKILL, SIGINT, SIGKILL}) {
    SCOPED_TRACE(sig);
    fs::remove_all(P("i"));
    fs::create_directories(P("i"));
    // Importing and quantizing (about a second), over an existing model every other time.
    if (sig == SIGKILL) {
      ASSERT_EQ(Run("import -q " + onnx + " --out " + P("i/m")).exit_code, 0);
    }
    const Killed k = StartAndKill(
        {"import", onnx, "--out", P("i/m"), "--quantize", "--calibration", "20000", "-q"},
        std::chrono::milliseconds(ms(rng_)), sig);
    ExpectInterruptedCleanly(k, sig);
    if (fs::exists(P("i/m"))) {
      EXPECT_NO_THROW(nn::LoadModel(P("i/m")));
    }
    ExpectNoTemporaries(P("i"));
    const Outcome again =
        Run("import -q --quantize --calibration 100 " + onnx + " --out " + P("i/m"));
    EXPECT_EQ(again.exit_code, 0) << again.err;
    EXPECT_TRUE(nn::LoadModel(P("i/m")).quantized);
  }
}

TEST_F(InterruptCliTest, AnInterruptedSweepStopsItsPointsAndResumes) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  std::ofstream(P("spec.json")) << R"({
    "base": {"images": 1000, "engine": "fast"},
    "axes": {"array_dim": [4, 8, 16, 32], "host_mem_bytes_per_cycle": [16, 64]}
  })";
  const Killed k = StartAndKill({"sweep", P("spec.json"), "--out", P("sw"), "--no-plots"},
                                std::chrono::milliseconds(700), SIGINT);
  ExpectInterruptedCleanly(k, SIGINT);
  // Its points were stopped with it: nothing is still running that could write a record.
  const auto count = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(P("sw/points"))) n += e.is_regular_file();
    return n;
  };
  const int records = count();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(count(), records);
  for (const auto& e : fs::directory_iterator(P("sw/points"))) {
    if (e.is_regular_file()) {
      EXPECT_NO_THROW(nlohmann::json::parse(Slurp(e.path().string())));
    }
  }
  const Outcome o = Run("sweep " + P("spec.json") + " --out " + P("sw") + " --no-plots");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("8 points: 8 done"), std::string::npos) << o.out;
}

// A small file system of our own (root only): full, or read-only.
class MountedFolder {
 public:
  MountedFolder(const std::string& path, const std::string& options) : path_(path) {
    fs::create_directories(path);
    ok_ = ::mount("tpusim-test", path.c_str(), "tmpfs", 0, options.c_str()) == 0;
  }
  ~MountedFolder() {
    if (ok_) ::umount(path_.c_str());
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  bool ok_ = false;
};

TEST_F(InterruptCliTest, AFullDiskIsOneClearErrorAndLeavesNothing) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  MountedFolder small(P("small"), "size=64k");
  if (!small.ok()) GTEST_SKIP() << "mounting a tmpfs needs root";
  // A model (about 330 KB) does not fit in 64 KB.
  ExpectError("train --epochs 1 --limit 200 -q --out " + P("small/m"), 1, "disk full");
  EXPECT_TRUE(fs::is_empty(P("small"))) << "left behind in the full file system";
  // A report that does fit is written whole.
  ASSERT_EQ(Run("run --engine fast --images 10 -q --json " + P("small/r.json")).exit_code, 0);
  EXPECT_NO_THROW(nlohmann::json::parse(Slurp(P("small/r.json"))));
}

TEST_F(InterruptCliTest, AReadOnlyFolderIsOneClearErrorAndLeavesNothing) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  MountedFolder ro(P("ro"), "ro,size=64k");
  if (!ro.ok()) GTEST_SKIP() << "mounting a tmpfs needs root";
  ExpectError("run --engine fast --images 10 -q --json " + P("ro/r.json"), 1, "ro/r.json");
  ExpectError("train --epochs 1 --limit 200 -q --out " + P("ro/m"), 1, "ro/m");
  ExpectError("sweep " TPUSIM_SOURCE_DIR "/examples/sweeps/lenet-array.json --out " + P("ro/s"), 2,
              "ro/s");
  EXPECT_TRUE(fs::is_empty(P("ro")));
}

}  // namespace
}  // namespace tpu::test
