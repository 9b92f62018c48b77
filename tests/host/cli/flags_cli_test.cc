// Libraries name fields, the CLI shows flags (host/common/errors.h, host/cli/flags.cc):
// every field named in the sources has a flag, every flag is one of tpusim's options, and
// a library's message reaches the user in flags while what() keeps the field's name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "host/cli/flags.h"
#include "host/common/errors.h"
#include "tests/host/cli/cli_fixture.h"

namespace tpu::test {
namespace {

namespace fs = std::filesystem;
class FlagsCliTest : public CliFixture {
 protected:
  // Each command that `tpusim --help` lists, with its `--help`.
  std::vector<std::pair<std::string, std::string>> CommandHelps() const {
    const Outcome top = Run("--help");
    EXPECT_EQ(top.exit_code, 0) << top.err;
    static const std::regex kCommand(R"(\n  ([a-z][a-z-]*) )");
    std::vector<std::pair<std::string, std::string>> helps;
    for (std::sregex_iterator m(top.out.begin(), top.out.end(), kCommand), end; m != end; ++m) {
      helps.emplace_back((*m)[1], Run(std::string((*m)[1]) + " --help").out);
    }
    return helps;
  }
};

// Every name in a Field("...") of the C++ sources under host/, fast/ and sim/.
std::set<std::string> FieldsNamedInSources() {
  static const std::regex kField(R"re(Field\("([a-z0-9_]+)"\))re");
  std::set<std::string> names;
  for (const char* dir : {"host", "fast", "sim"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(TPUSIM_SOURCE_DIR) / dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (std::sregex_iterator m(s.begin(), s.end(), kField), end; m != end; ++m) {
        names.insert((*m)[1]);
      }
    }
  }
  return names;
}

TEST_F(FlagsCliTest, EveryFieldNamedInTheSourcesHasAFlag) {
  const std::set<std::string> named = FieldsNamedInSources();
  ASSERT_GE(named.size(), 10u);  // the scan found the libraries' messages
  for (const std::string& field : named) {
    EXPECT_EQ(cli::FieldFlags().count(field), 1u)
        << "Field(\"" << field << "\") has no flag in host/cli/flags.cc";
  }
}

TEST_F(FlagsCliTest, EveryFlagIsAnOptionOfACommand) {
  std::string helps;
  for (const auto& [command, help] : CommandHelps()) helps += help;
  ASSERT_NE(helps.find("--engine"), std::string::npos) << helps;
  for (const auto& [field, flag] : cli::FieldFlags()) {
    EXPECT_NE(helps.find(flag + " "), std::string::npos) << field << ": no command has " << flag;
  }
}

// CLI11 reads an unsigned option with strtoull, which takes "-1" as 2^64 - 1: every such
// option of every command refuses a negative value instead (RefuseNegativeUnsigned).
TEST_F(FlagsCliTest, EveryUnsignedOptionRefusesANegativeValue) {
  static const std::regex kUnsigned(R"((--[a-z-]+) UINT)");
  int checked = 0;
  for (const auto& [command, help] : CommandHelps()) {
    for (std::sregex_iterator o(help.begin(), help.end(), kUnsigned), end; o != end;
         ++o, ++checked) {
      const std::string flag = (*o)[1];
      // The stray flag ends a command that took the value (cosim would run 2^64 - 1
      // programs) with another message at once; the negative value is refused first.
      ExpectError(command + " " + flag + " -1 --not-a-flag", 2,
                  "tpusim: error: " + flag + ": -1 is negative; give a whole number of 0 or more");
    }
  }
  EXPECT_GE(checked, 20) << "the scan found the unsigned options (cosim --programs among them)";
}

TEST_F(FlagsCliTest, TheUserSeesFlagsTheLibrarySeesFields) {
  const Error e(Field("batch") + " must be at least 1 (" + Field("no_flag") + ")");
  EXPECT_STREQ(e.what(), "batch must be at least 1 (no_flag)");
  EXPECT_EQ(cli::InFlagTerms(e.marked()), "--batch must be at least 1 (no_flag)");
  EXPECT_EQ(PlainText("unmarked \x1f"
                      "half"),
            "unmarked \x1f"
            "half");
  // Through the CLI: the runner's check, in flags.
  ExpectError("run --batch 0", 2, "tpusim: error: --batch must be at least 1");
}

}  // namespace
}  // namespace tpu::test
