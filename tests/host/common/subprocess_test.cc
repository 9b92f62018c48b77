// Child processes (host/common/subprocess.h): arguments reach the child as they are (no
// shell), its output goes where asked, its status comes back (signals as 128 + the
// signal), stdin is /dev/null, and a program that is not there is status -1.
#include "host/common/subprocess.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tpu {
namespace {

TEST(SubprocessTest, CapturesBothStreamsAndTheExitStatus) {
  const ChildResult r = RunChild({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"},
                                 {ChildOptions::Output::kCapture, ""});
  EXPECT_EQ(r.status, 3);
  EXPECT_FALSE(r.Ok());
  EXPECT_EQ(r.output, "out\nerr\n");
}

TEST(SubprocessTest, ArgumentsAreNotShellWords) {
  const std::string arg = "a 'b' \"c\" $HOME; d | e";
  const ChildResult r = RunChild({"echo", arg}, {ChildOptions::Output::kCapture, ""});
  EXPECT_TRUE(r.Ok());
  EXPECT_EQ(r.output, arg + "\n");  // found on PATH, and the argument untouched
}

TEST(SubprocessTest, WritesTheLogFileAndReadsNothing) {
  const std::string log = ::testing::TempDir() + "/subprocess_test.log";
  // cat of stdin ends at once: stdin is /dev/null, whatever the test's is.
  const ChildResult r = RunChild({"/bin/sh", "-c", "cat; echo done; echo oops >&2"},
                                 {ChildOptions::Output::kFile, log});
  EXPECT_EQ(r.status, 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "done\noops\n");
  std::filesystem::remove(log);
}

TEST(SubprocessTest, SignalsAndMissingProgramsAreStatuses) {
  EXPECT_EQ(RunChild({"/bin/sh", "-c", "kill -TERM $$"}).status, 128 + 15);
  EXPECT_EQ(RunChild({"no-such-program-tpusim"}).status, -1);
  EXPECT_EQ(RunChild({}).status, -1);
}

TEST(SubprocessTest, FindsProgramsOnThePathAndQuotesForPeople) {
  const std::string sh = FindOnPath("sh");
  EXPECT_FALSE(sh.empty());
  EXPECT_EQ(std::filesystem::path(sh).filename(), "sh");
  EXPECT_EQ(FindOnPath("no-such-program-tpusim"), "");
  EXPECT_EQ(CommandLine({"tpusim", "run", "--model", "my model", "it's"}),
            "tpusim run --model 'my model' 'it'\\''s'");
  EXPECT_EQ(ShellQuote("a"), "'a'");
}

}  // namespace
}  // namespace tpu
