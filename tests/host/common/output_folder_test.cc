// OutputFolder: a folder is written whole or not at all, replaces only a previous output of
// its kind, and never deletes anything it did not write.
#include "host/common/output_folder.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/interrupt.h"
#include "host/common/leftovers.h"

namespace tpu {
namespace {

namespace fs = std::filesystem;
const OutputKind kKind{"test folder", "manifest.json"};

class OutputFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tpusim_output_folder_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  // Writes an output of kKind with files a.txt and b.txt as `dir`.
  static void WriteOutput(const fs::path& dir, const std::string& a = "a") {
    OutputFolder out(dir.string(), kKind);
    Put(out.File("a.txt"), a);
    Put(out.File("b.txt"), "b");
    Put(out.File("manifest.json"), R"({"files": ["a.txt", {"x": "b.txt"}]})");
    out.Commit();
  }
  // The names in `dir`, sorted.
  static std::vector<std::string> Names(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path root_;
};

TEST_F(OutputFolderTest, WritesANewFolderAndItsParents) {
  WriteOutput(root_ / "x" / "y");
  EXPECT_EQ(Names(root_ / "x" / "y"),
            (std::vector<std::string>{"a.txt", "b.txt", "manifest.json"}));
  EXPECT_EQ(Names(root_ / "x"), std::vector<std::string>{"y"});  // nothing left beside it
}

TEST_F(OutputFolderTest, ReplacesAPreviousOutputAndAnEmptyFolder) {
  fs::create_directories(root_ / "empty");
  WriteOutput(root_ / "empty");
  WriteOutput(root_ / "empty", "second");
  std::ifstream in(root_ / "empty" / "a.txt");
  std::string text;
  in >> text;
  EXPECT_EQ(text, "second");
  EXPECT_EQ(Names(root_), std::vector<std::string>{"empty"});  // no .old or .tmp left
}

TEST_F(OutputFolderTest, RefusesAFolderOfTheUsersFilesAndTouchesNothing) {
  const fs::path proj = root_ / "proj";
  fs::create_directories(proj / "sub");
  Put(proj / "net.onnx", "onnx");
  Put(proj / "notes.txt", "mine");
  Put(proj / "sub" / "deep.txt", "mine");
  try {
    WriteOutput(proj);
    FAIL() << "a folder of the user's files was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("(net.onnx, notes.txt, sub/)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(Names(proj), (std::vector<std::string>{"net.onnx", "notes.txt", "sub"}));
  EXPECT_EQ(Names(proj / "sub"), std::vector<std::string>{"deep.txt"});
  EXPECT_EQ(Names(root_), std::vector<std::string>{"proj"});
}

TEST_F(OutputFolderTest, RefusesAPreviousOutputThatGainedAFile) {
  const fs::path out = root_ / "out";
  WriteOutput(out);
  Put(out / "notes.txt", "mine");
  EXPECT_THROW(WriteOutput(out), UsageError);
  EXPECT_EQ(Names(out), (std::vector<std::string>{"a.txt", "b.txt", "manifest.json", "notes.txt"}));
  // A manifest that does not parse makes nothing the tool's.
  fs::remove(out / "notes.txt");
  Put(out / "manifest.json", "not json");
  EXPECT_THROW(WriteOutput(out), UsageError);
  EXPECT_EQ(Names(out).size(), 3u);
}

TEST_F(OutputFolderTest, RefusesTheCurrentFolderItsParentsAndAFile) {
  const fs::path here = fs::current_path();
  fs::create_directories(root_ / "cwd");
  fs::current_path(root_ / "cwd");
  for (const char* dir : {".", "..", "./", "/", "../cwd"}) {
    EXPECT_THROW(CheckOutputFolder(dir, kKind), UsageError) << dir;
  }
  fs::current_path(here);
  Put(root_ / "file", "mine");
  EXPECT_THROW(WriteOutput(root_ / "file"), UsageError);
}

TEST_F(OutputFolderTest, ATrailingSeparatorNamesTheSameFolder) {
  WriteOutput((root_ / "out").string() + "/");
  EXPECT_EQ(Names(root_), std::vector<std::string>{"out"});
  EXPECT_EQ(Names(root_ / "out").size(), 3u);
}

TEST_F(OutputFolderTest, AnUncommittedFolderLeavesNothing) {
  fs::create_directories(root_ / "kept");
  Put(root_ / "kept" / "manifest.json", "{}");
  {
    OutputFolder out((root_ / "kept").string(), kKind);
    Put(out.File("a.txt"), "a");
  }
  EXPECT_EQ(Names(root_), std::vector<std::string>{"kept"});
  EXPECT_EQ(Names(root_ / "kept"), std::vector<std::string>{"manifest.json"});
}

// The pid of a process that has ended.
int EndedPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// What writers stopped outright (SIGKILL) left: the next write clears their temporaries and
// puts back a previous output that a commit had moved aside; a live writer's are kept.
TEST_F(OutputFolderTest, TheNextWriteClearsWhatAKilledWriterLeft) {
  const std::string dead = std::to_string(EndedPid());
  const fs::path tmp = root_ / (".out.tmp" + dead + "-0"),
                 old = root_ / (".gone.old" + dead + "-0");
  fs::create_directories(tmp);
  Put(tmp / "a.txt", "half");
  Put(root_ / ("r.json.tmp" + dead + "-3"), "{");
  // A live writer on another machine sharing the folder: its pid is not one here, its lock
  // is held.
  const fs::path held = root_ / (".out.tmp" + dead + "-1");
  fs::create_directories(held);
  const TempLock lock(held);
  WriteOutput(root_ / "out");
  WriteFileAtomically((root_ / "r.json").string(), "{}");
  EXPECT_EQ(Names(root_), (std::vector<std::string>{".out.tmp" + dead + "-1", "out", "r.json"}));
  // Stopped between the commit's renames: the previous output comes back, then is replaced.
  WriteOutput(old, "previous");
  {
    OutputFolder out((root_ / "gone").string(), kKind);
    EXPECT_EQ(Names(root_ / "gone"), (std::vector<std::string>{"a.txt", "b.txt", "manifest.json"}));
  }
  EXPECT_FALSE(fs::exists(old));
  // A user's file of such a name in a left folder is not the writer's: it stays.
  fs::create_directories(tmp / "mine");
  EXPECT_TRUE(RemoveOutputFolder((root_ / "out").string(), kKind));
  EXPECT_EQ(Names(tmp), std::vector<std::string>{"mine"});
}

// Ctrl-C while a folder is written removes its files and then the folder, whichever of the
// handler's slots each took (here the file takes a slot below the folder's).
TEST_F(OutputFolderTest, AnInterruptLeavesNoTemporaryFolder) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    InstallInterruptHandler();
    auto early = std::make_unique<RemoveOnInterrupt>((root_ / "early").string());
    OutputFolder out((root_ / "out").string(), kKind);
    early.reset();
    Put(out.File("a.txt"), "a");
    ::raise(SIGINT);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT);
  EXPECT_EQ(Names(root_), std::vector<std::string>{});
}

}  // namespace
}  // namespace tpu
