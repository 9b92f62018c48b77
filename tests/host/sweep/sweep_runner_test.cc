// The sweep runner's record of a point whose `tpusim run` ended: a failure is recorded, a
// point stopped from outside (SIGTERM: scancel, a job's time limit; SIGINT: Ctrl-C) is not,
// so it stays to run. Stand-in executables play the point's `tpusim run`.
#include "host/sweep/sweep_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "host/common/errors.h"
#include "host/sweep/sweep_spec.h"

namespace tpu::sweep {
namespace {

namespace fs = std::filesystem;

class SweepRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tpusim-sweep-runner-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    spec_ = ParseSweepSpec(nlohmann::ordered_json::parse(R"({
      "name": "stand-in", "base": {"config": "small-16", "images": 8, "batch": 8},
      "axes": {"array_dim": [4, 8, 16]}})"),
                           (dir_ / "spec.json").string());
    points_ = ExpandPoints(spec_);
    PrepareSweepDir(spec_, (dir_ / "out").string(), false);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the sweep with `body` as the point's `tpusim run` (a shell script).
  SweepStatus Run(const std::string& body) {
    const fs::path exe = dir_ / "stand-in.sh";
    std::ofstream(exe) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(exe, fs::perms::owner_all);
    SweepOptions o;
    o.dir = (dir_ / "out").string();
    o.quiet = true;
    o.tpusim = exe.string();
    return RunSweep(spec_, points_, o);
  }
  SweepStatus Status() { return ReadStatus(points_, (dir_ / "out").string()); }

  fs::path dir_;
  SweepSpec spec_;
  std::vector<SweepPoint> points_;
};

TEST_F(SweepRunnerTest, APointThatFailsIsRecordedWithItsLastLine) {
  const SweepStatus s = Run("echo 'tpusim: error: the stand-in failed' >&2; exit 1");
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(s.missing, 0);
  ASSERT_EQ(s.failures.size(), 3u);
  EXPECT_NE(s.failures[0].find("tpusim: error: the stand-in failed"), std::string::npos)
      << s.failures[0];
}

TEST_F(SweepRunnerTest, APointStoppedBySigtermStaysToRunAndStopsTheSweep) {
  try {
    Run("echo 'tpusim: terminated' >&2; exit 143");
    FAIL() << "the sweep went on after its point was stopped";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("point 0 (array_dim=4) was stopped by SIGTERM"),
              std::string::npos)
        << e.what();
  }
  const SweepStatus s = Status();
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.missing, 3);
  EXPECT_TRUE(fs::is_empty(dir_ / "out" / "points" / ".running"));
}

TEST_F(SweepRunnerTest, APointStoppedByCtrlCStaysToRun) {
  EXPECT_THROW(Run("kill -INT $$"), RuntimeError);
  EXPECT_EQ(Status().failed, 0);
  EXPECT_EQ(Status().missing, 3);
}

}  // namespace
}  // namespace tpu::sweep
