// Every command that writes a folder, pointed at a folder of the user's files (and at the
// folder above one): nothing of the user's is lost. The model and job writers refuse with
// one line and exit 2; sweep and cosim write beside the user's files.
#include <fstream>
#include <set>

#include "tests/host/cli/cli_fixture.h"
#include "tests/mnist_test_util.h"

namespace tpu::test {
namespace {

namespace fs = std::filesystem;

class OutFolderCliTest : public CliFixture {
 protected:
  // A folder of the user's: an ONNX file, notes and a subfolder with a file.
  std::string UsersFolder(const std::string& name) {
    const fs::path p = dir_ / name;
    fs::create_directories(p / "sub");
    fs::copy_file(TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx", p / "net.onnx");
    std::ofstream(p / "notes.txt") << "my notes\n";
    std::ofstream(p / "sub" / "deep.txt") << "deep\n";
    return p.string();
  }
  // Every file under `p` with its size, but the commands' captured output.
  static std::set<std::pair<std::string, uintmax_t>> Files(const std::string& p) {
    std::set<std::pair<std::string, uintmax_t>> files;
    for (const auto& e : fs::recursive_directory_iterator(p)) {
      const std::string name = fs::relative(e.path(), p);
      if (e.is_regular_file() && name != "stdout" && name != "stderr") {
        files.insert({name, e.file_size()});
      }
    }
    return files;
  }
  // The user's files of UsersFolder are all there, unchanged in size.
  static void ExpectUsersFiles(const std::string& p) {
    const auto files = Files(p);
    EXPECT_TRUE(
        files.count({"net.onnx", fs::file_size(TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx")}));
    EXPECT_TRUE(files.count({"notes.txt", 9}));
    EXPECT_TRUE(files.count({"sub/deep.txt", 5}));
  }
};

TEST_F(OutFolderCliTest, ModelAndJobWritersRefuseAFolderOfTheUsersFiles) {
  const std::string onnx = TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx";
  const Outcome m = Run("import " + onnx + " --out " + P("m") + " --quantize --synthetic 4 -q");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  std::vector<std::string> writers = {
      "import " + onnx + " --out ",
      "import " + onnx + " --quantize --synthetic 4 --out ",
      "quantize --model " + P("m") + " --synthetic 4 --out ",
      "compile --model " + P("m") + " --synthetic 1 --config small-16 --out ",
  };
  if (HaveMnist()) writers.push_back("train --epochs 1 --limit 64 --out ");
  const std::string proj = UsersFolder("proj");
  const auto before = Files(dir_);
  for (const std::string& w : writers) {
    // The folder itself, and the folder above it (which holds proj and the model).
    for (const std::string& out : {proj, proj + "/..", proj + "/"}) {
      ExpectError(w + out, 2, "nothing was written or removed: give a new or empty folder");
      ExpectUsersFiles(proj);
    }
  }
  // Nothing anywhere changed: no files lost, none left behind.
  EXPECT_EQ(Files(dir_), before);
  // A previous output of the same kind is replaced: the model written again over itself.
  const Outcome again = Run("import " + onnx + " --out " + P("m") + " --quantize --synthetic 4 -q");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Run("compile --model " + P("m") + " --synthetic 1 --config small-16 --out " + P("j"))
                .exit_code,
            0);
  EXPECT_EQ(Run("compile --model " + P("m") + " --synthetic 2 --config small-16 --out " + P("j"))
                .exit_code,
            0);
}

TEST_F(OutFolderCliTest, SweepAndCosimWriteBesideTheUsersFiles) {
  const std::string proj = UsersFolder("proj");
  std::ofstream(P("spec.json")) << R"({"base": {"config": "teach-4", "images": 1, "batch": 1,
    "engine": "fast", "model": ")" + P("m") +
                                       R"(", "synthetic": 1},
    "axes": {"array_dim": [4]}, "metrics": ["cycles_per_image"]})";
  const std::string onnx = TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx";
  ASSERT_EQ(Run("import " + onnx + " --out " + P("m") + " --quantize --synthetic 4 -q").exit_code,
            0);
  const Outcome s = Run("sweep " + P("spec.json") + " --out " + proj + " --no-plots -q");
  EXPECT_EQ(s.exit_code, 0) << s.err;
  ExpectUsersFiles(proj);
  const Outcome c = Run("cosim --config teach-4 --programs 2 --out " + proj);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  ExpectUsersFiles(proj);
}

}  // namespace
}  // namespace tpu::test
