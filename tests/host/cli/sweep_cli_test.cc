// `tpusim sweep` and `tpusim plot` as a user runs them: the table, the plots, a rerun that
// runs nothing, a killed sweep that resumes to the same table, failing points, bad specs.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "tests/host/cli/cli_fixture.h"
#include "tests/mnist_test_util.h"

namespace tpu::test {
namespace {

namespace fs = std::filesystem;

class SweepCliTest : public CliFixture {
 protected:
  std::string Spec(const std::string& name, const std::string& json) {
    std::ofstream(P(name)) << json;
    return P(name);
  }
  // Six points: array 4, 8, 16 x host bandwidth 8, 64; 16 images each.
  std::string SmallSpec() {
    return Spec("small.json", R"({
      "name": "small",
      "base": {"config": "small-16", "images": 16, "batch": 8, "engine": "fast"},
      "axes": {"array_dim": [4, 8, 16], "host_mem_bytes_per_cycle": [8, 64]},
      "metrics": ["cycles_per_image", "utilization", "energy_per_image_pj", "accuracy"]
    })");
  }
  static int CountRecords(const std::string& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(fs::path(dir) / "points")) {
      n += e.is_regular_file() && e.path().extension() == ".json";
    }
    return n;
  }
};

TEST_F(SweepCliTest, WritesTheTableAndPlotsAndRerunsNothing) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome o = Run("sweep " + SmallSpec() + " --out " + P("s") + " --jobs 2");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("6 points: 6 done, 0 failed, 0 to run"), std::string::npos) << o.out;
  const std::string csv = Slurp(P("s/results.csv"));
  EXPECT_EQ(csv.rfind("index,key,status,array_dim,host_mem_bytes_per_cycle,cycles_per_image,"
                      "utilization,energy_per_image_pj,accuracy,error\n",
                      0),
            0u)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  const auto j = nlohmann::json::parse(Slurp(P("s/results.json")));
  ASSERT_EQ(j["points"].size(), 6u);
  // The grid: the last axis fastest; every point bit-exact; a bigger array needs fewer cycles.
  EXPECT_EQ(j["points"][1]["values"]["array_dim"], 4);
  EXPECT_EQ(j["points"][1]["values"]["host_mem_bytes_per_cycle"], 64);
  EXPECT_EQ(j["points"][1]["config"]["host_mem_bytes_per_cycle"], 64);
  for (const auto& p : j["points"]) EXPECT_EQ(p["status"], "ok");
  EXPECT_GT(j["points"][0]["metrics"]["cycles_per_image"].get<double>(),
            j["points"][4]["metrics"]["cycles_per_image"].get<double>());
  // A point's record equals `tpusim run` with its settings.
  const Outcome r =
      Run("run --config small-16 --set array_dim=8 --set host_mem_bytes_per_cycle=8 "
          "--images 16 --batch 8 --engine fast -q --json " +
          P("r.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto run = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(j["points"][2]["metrics"]["cycles_per_image"].get<double>(),
            run["cycles"].get<double>() / 16);
  for (const char* f : {"layers", "energy", "pareto", "roofline"}) {
    for (const char* ext : {".svg", ".png"}) {
      EXPECT_GT(fs::file_size(P(std::string("s/plots/") + f + ext)), 1000u) << f << ext;
    }
  }
  // Nothing changed: nothing runs, the same table.
  const Outcome again = Run("sweep " + P("small.json") + " --out " + P("s"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("6 points, 0 to run"), std::string::npos) << again.err;
  EXPECT_EQ(Slurp(P("s/results.csv")), csv);
  const Outcome status = Run("sweep " + P("small.json") + " --out " + P("s") + " --status");
  EXPECT_NE(status.out.find("6 points: 6 done"), std::string::npos) << status.out;
  // plot redraws from the records.
  fs::remove(P("s/plots/pareto.svg"));
  ASSERT_EQ(Run("plot " + P("s")).exit_code, 0);
  EXPECT_TRUE(fs::exists(P("s/plots/pareto.svg")));
}

// A spec's relative paths name the same points whatever folder the sweep runs from and
// however the spec is named: plot, run from elsewhere, finds every point done.
TEST_F(SweepCliTest, RelativePathsKeepTheirPointsFromAnyFolder) {
  const Outcome m = Run("import " TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx --out " + P("m") +
                        " --quantize --synthetic 4 -q");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  fs::create_directories(dir_ / "specs");
  Spec("specs/rel.json", R"({
      "base": {"config": "small-16", "images": 2, "batch": 2, "engine": "fast", "model": "../m",
               "synthetic": 2},
      "axes": {"array_dim": [4, 8]}, "metrics": ["cycles_per_image"]})");
  const std::string here = "cd " + dir_.string() + " && " + TPUSIM_BINARY;
  ASSERT_EQ(std::system((here + " sweep specs/rel.json --out s --no-plots -q").c_str()), 0);
  const Outcome plot = Run("plot " + P("s"));
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string csv = Slurp(P("s/results.csv"));
  EXPECT_EQ(csv.find("missing"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  const Outcome again =
      Run("sweep " + P("specs/../specs/rel.json") + " --out " + P("s") + " --no-plots");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("2 points, 0 to run"), std::string::npos) << again.err;
}

TEST_F(SweepCliTest, AKilledSweepResumesToTheSameTable) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  // Points of 1,000 images, long enough (about half a second each) to be cut.
  const std::string spec = Spec("kill.json", R"({
      "base": {"config": "small-16", "images": 1000, "batch": 16, "engine": "fast"},
      "axes": {"array_dim": [4, 8, 16], "host_mem_bytes_per_cycle": [8, 64]}
    })");
  ASSERT_EQ(Run("sweep " + spec + " --out " + P("whole") + " --no-plots -q").exit_code, 0);
  // Start the same sweep, one point at a time, and kill it (and its points) after the first
  // record appears.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl(TPUSIM_BINARY, TPUSIM_BINARY, "sweep", spec.c_str(), "--out", P("cut").c_str(),
            "--no-plots", "-q", "--jobs", "1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((!fs::exists(P("cut/points")) || CountRecords(P("cut")) < 1) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const int before = CountRecords(P("cut"));
  ASSERT_GE(before, 1);
  ASSERT_LT(before, 6) << "the sweep finished before it could be killed";
  EXPECT_FALSE(fs::exists(P("cut/results.csv")));
  const Outcome o = Run("sweep " + spec + " --out " + P("cut") + " --no-plots");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.err.find(std::to_string(6 - before) + " to run"), std::string::npos) << o.err;
  EXPECT_EQ(Slurp(P("cut/results.csv")), Slurp(P("whole/results.csv")));
}

TEST_F(SweepCliTest, AFailingPointIsRecordedAndTheRestRun) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  // A unified buffer of 64 rows cannot hold a conv layer's input: that point fails.
  const std::string spec = Spec("fail.json", R"({
    "base": {"images": 8, "batch": 8, "engine": "fast"},
    "axes": {"ub_depth_rows": [64, 16384]}
  })");
  const Outcome o = Run("sweep " + spec + " --out " + P("f") + " --no-plots");
  EXPECT_EQ(o.exit_code, 1) << o.err;
  EXPECT_NE(o.out.find("2 points: 1 done, 1 failed"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("failed: point 0 (ub_depth_rows=64): tpusim: error:"), std::string::npos)
      << o.out;
  const std::string csv = Slurp(P("f/results.csv"));
  EXPECT_NE(csv.find(",failed,64,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",ok,16384,"), std::string::npos) << csv;
}

// A sweep of timed training steps ("timing_only": true): each point `tpusim train
// --timing-only`, no data set read and no model written, here the residual CNN at batches of
// 4 and 8 on two arrays; its cycles a step those of the command run by hand, its loss none.
TEST_F(SweepCliTest, TimingOnlyTrainPointsTimeAStep) {
  const std::string spec = Spec("t.json", R"({
      "name": "timed", "command": "train",
      "base": {"config": "tpu-v2", "arch": "residual", "timing_only": true},
      "axes": {"batch": [4, 8], "array_dim": [64, 128]}})");
  const Outcome o = Run("sweep " + spec + " --out " + P("t"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("t/results.json")));
  ASSERT_EQ(j["points"].size(), 4u);
  for (const auto& p : j["points"]) EXPECT_TRUE(p["metrics"]["loss"].is_null()) << p.dump();
  const Outcome t =
      Run("train --config tpu-v2 --arch residual --batch 8 --timing-only -q --json " + P("r.json"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto r = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(j["points"][3]["metrics"]["cycles_per_step"].get<double>(),
            r["step"]["cycles"].get<double>());
  EXPECT_TRUE(fs::is_empty(P("t/points/.running")));
  ExpectError("sweep " + Spec("t5.json", R"({"command": "train", "base": {"arch": "residual",
                  "model": "m"}, "axes": {"batch": [8]}})") +
                  " --out " + P("x"),
              2, "'arch' and 'model' both name the network");
}

// A sweep of training steps ("command": "train"): each point one epoch of `tpusim train
// --config` on the chip, its record that run's, a bigger batch more images a second (the
// step's fixed costs, the weights' loads and updates, spread over more images), the step's
// passes as the rows of the figures; what train would refuse, refused before any point runs.
TEST_F(SweepCliTest, TrainPointsAreEpochsOnTheChip) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string spec = Spec("t.json", R"({
      "name": "train", "command": "train",
      "base": {"config": "tpu-v2", "images": 256, "set": {"array_dim": 64}},
      "axes": {"batch": [16, 64]}})");
  const Outcome o = Run("sweep " + spec + " --out " + P("t"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("t/results.json")));
  ASSERT_EQ(j["points"].size(), 2u);
  const auto &small = j["points"][0]["metrics"], &big = j["points"][1]["metrics"];
  EXPECT_LT(small["images_per_second"].get<double>(), big["images_per_second"].get<double>());
  EXPECT_GT(big["bound_ratio"].get<double>(), 1.0);
  EXPECT_EQ(j["points"][1]["layers"][0]["name"], "fc1 forward");
  const Outcome t =
      Run("train --config tpu-v2 --set array_dim=64 --limit 256 --batch 64 "
          "--epochs 1 --checkpoint-every 0 -q --json " +
          P("r.json") + " --out " + P("m"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto r = nlohmann::json::parse(Slurp(P("r.json")));
  const auto& epoch = r["epochs"][0];
  EXPECT_EQ(big["cycles_per_step"].get<double>(),
            epoch["cycles"].get<double>() / epoch["steps"].get<double>());
  EXPECT_EQ(big["loss"], epoch["loss"]);
  EXPECT_EQ(big["energy_per_image_pj"].get<double>(), epoch["energy_j"].get<double>() * 1e12 / 256);
  for (const char* f : {"layers", "energy", "pareto"})
    EXPECT_GT(fs::file_size(P(std::string("t/plots/") + f + ".svg")), 1000u) << f;
  EXPECT_TRUE(fs::is_empty(P("t/points/.running")));  // no model folder left behind
  ExpectError("sweep " + Spec("t1.json", R"({"command": "train", "axes": {"inputs": ["m"]}})") +
                  " --out " + P("x"),
              2, "unknown axis 'inputs' for train points");
  ExpectError("sweep " +
                  Spec("t2.json", R"({"command": "train", "axes": {"config": ["small-16"]}})") +
                  " --out " + P("x"),
              2, "config 'small-16' is not a bf16 chip");
  ExpectError("sweep " + Spec("t3.json", R"({"command": "train", "axes": {"batch": [8]},
                  "metrics": ["tops_per_watt"]})") +
                  " --out " + P("x"),
              2, "unknown metric \"tops_per_watt\" of train points");
  ExpectError("sweep " + Spec("t4.json", R"({"command": "infer", "axes": {"batch": [8]}})") +
                  " --out " + P("x"),
              2, "unknown command 'infer'; known: run, train");
  ExpectError("sweep " + Spec("t5.json", R"({"command": "train", "base": {"images": 8},
                  "axes": {"batch": [16]}})") +
                  " --out " + P("x"),
              2, "images (8) below batch (16)");
}

TEST_F(SweepCliTest, BadSpecsAndFoldersAreUsageErrors) {
  ExpectError("sweep " + P("none.json") + " --out " + P("x"), 2, "cannot read the sweep spec");
  ExpectError("sweep " + Spec("a.json", R"({"axes": {"array_size": [4]}})") + " --out " + P("x"), 2,
              "unknown axis 'array_size'");
  ExpectError("sweep " + Spec("b.json", R"({"axes": {"array_dim": []}})") + " --out " + P("x"), 2,
              "axis 'array_dim': the axis has no values");
  ExpectError("sweep " + Spec("c.json", R"({"axes": {"array_dim": [4, 1]}})") + " --out " + P("x"),
              2, "point 1 (array_dim=1)");
  ExpectError("sweep " +
                  Spec("d.json", R"({"axes": {"array_dim": {"from": 4, "to": 2, "times": 2}}})") +
                  " --out " + P("x"),
              2, "'to' (2) is below 'from' (4)");
  ExpectError("sweep " + Spec("e.json", R"({"axes": {"batch": [8]}, "metrics": ["speed"]})") +
                  " --out " + P("x"),
              2, "unknown metric \"speed\"");
  ExpectError("sweep " + Spec("g.json", R"({"axes": {"batch": [8]}, "base": {"set": {"x": 1}}})") +
                  " --out " + P("x"),
              2, "unknown config field 'x'");
  std::ofstream(P("afile")) << "x";
  ExpectError("sweep " + Spec("h.json", R"({"axes": {"batch": [8]}})") + " --out " + P("afile"), 2,
              "is a file");
  ExpectError("sweep " + P("h.json") + " --out /proc/nosuch/dir", 2,
              "cannot create the sweep folder");
  ExpectError("sweep " + P("h.json") + " --out " + P("x") + " --shard 4/4", 2,
              "--shard '4/4' must be I/K");
  ExpectError("plot " + P("nosweep"), 2, "holds no sweep");
  // A folder that holds another sweep is left alone.
  fs::create_directories(P("other"));
  std::ofstream(P("other/sweep.json")) << R"({"spec_path": "o.json", "spec": {"name": "o"}})";
  ExpectError("sweep " + P("h.json") + " --out " + P("other"), 2, "holds a different sweep ('o'");
  EXPECT_EQ(Slurp(P("other/sweep.json")), R"({"spec_path": "o.json", "spec": {"name": "o"}})");
}

}  // namespace
}  // namespace tpu::test
