// `tpusim cosim` as a user runs it: the summary, its JSON, replaying a mismatch folder,
// and bad inputs.
#include <nlohmann/json.hpp>

#include "tests/host/cli/cli_fixture.h"

namespace tpu::test {
namespace {

class CosimCliTest : public CliFixture {};

TEST_F(CosimCliTest, RandomProgramsAgreeAndTheJsonSaysSo) {
  const Outcome o = Run("cosim --config teach-4 --programs 30 --seed 3 --json " + P("c.json") +
                        " --out " + P("mm"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("teach-4 (4 x 4)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("total: 30 programs, 0 mismatches"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("c.json")));
  EXPECT_EQ(j["programs"], 30);
  EXPECT_EQ(j["mismatches"], 0);
  ASSERT_EQ(j["configs"].size(), 1u);
  EXPECT_EQ(j["configs"][0]["config"], "teach-4");
  uint64_t endings = 0;
  for (const auto& [k, v] : j["configs"][0]["endings"].items()) endings += v.get<uint64_t>();
  EXPECT_EQ(endings, 30u);
  EXPECT_FALSE(std::filesystem::exists(P("mm")));  // nothing mismatched, nothing written
}

TEST_F(CosimCliTest, SeveralConfigsRunInChildProcesses) {
  const Outcome o =
      Run("cosim --config teach-4 --config lab-8 --set host_mem_latency_cycles=300 "
          "--programs 10 --json " +
          P("c.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("c.json")));
  EXPECT_EQ(j["programs"], 20);
  ASSERT_EQ(j["configs"].size(), 2u);
  EXPECT_EQ(j["configs"][1]["array_dim"], 8);
}

// --networks tests the compiler: random networks of every layer kind, bit-exact against the
// CPU int8 reference on the fast engine, a sample on the RTL with every counter equal.
// On a terminal (script(1) gives it one), each config's child shows its progress bar; the
// summary comes once, from the parent.
TEST_F(CosimCliTest, SeveralConfigsShowTheirProgressOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const std::string cmd = std::string("script -qec '") + TPUSIM_BINARY +
                          " cosim -c teach-4 -c small-16 --programs 300' " + P("tty.log") +
                          " >/dev/null 2>&1 </dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << Slurp(P("tty.log"));
  const std::string tty = Slurp(P("tty.log"));
  EXPECT_NE(tty.find("cosim teach-4 ["), std::string::npos) << tty;
  EXPECT_NE(tty.find("cosim small-16 ["), std::string::npos) << tty;
  size_t totals = 0;
  for (size_t at = tty.find("total: 600 programs"); at != std::string::npos;
       at = tty.find("total: 600 programs", at + 1))
    ++totals;
  EXPECT_EQ(totals, 1u) << tty;
}

// A network due on the RTL with more work than cosim::kRtlBudget (network 0 of seed
// 5889778 on tpu-v1: an LSTM of 39 steps, 509,968 cycles, about 6 minutes on the 256 x 256
// RTL) is counted, not run.
TEST_F(CosimCliTest, NetworksBeyondTheRtlBudgetAreCountedNotRun) {
  const Outcome o = Run("cosim --config tpu-v1 --networks 1 --seed 5889778 --json " + P("b.json"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("1 more due there over its budget"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("b.json")));
  const auto& c = j["configs"][0];
  EXPECT_EQ(c["rtl_networks"], 0);
  EXPECT_EQ(c["rtl_over_budget"], 1);
}

TEST_F(CosimCliTest, RandomNetworksRunBitExactAndTheJsonSaysSo) {
  const Outcome o = Run("cosim --config lab-8 --networks 40 --seed 5 --rtl-every 4 --json " +
                        P("n.json") + " --out " + P("mm"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("total: 40 networks, 0 mismatches"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("n.json")));
  EXPECT_EQ(j["networks"], 40);
  EXPECT_EQ(j["mismatches"], 0);
  const auto& c = j["configs"][0];
  EXPECT_EQ(c["rtl_networks"], 10);  // networks 0, 4, ..., 36
  uint64_t refused = 0;
  for (const auto& [why, n] : c["unsupported"].items()) refused += n.get<uint64_t>();
  EXPECT_LT(refused, 10u) << c["unsupported"];
  EXPECT_GT(c["layers"].get<int>(), 40 * 2) << "networks of several layers";
  EXPECT_FALSE(std::filesystem::exists(P("mm")));
  // The same seed draws the same networks: the same summary but for the wall times.
  const Outcome again =
      Run("cosim --config lab-8 --networks 40 --seed 5 --rtl-every 4 --json " + P("again.json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto a = nlohmann::json::parse(Slurp(P("again.json")))["configs"][0];
  auto b = c;
  for (auto* x : {&a, &b}) x->erase("rtl_seconds"), x->erase("fast_seconds");
  EXPECT_EQ(a, b);
  ExpectError("cosim --networks 5 --program 3", 2,
              "--program and --save choose random programs; with --networks a failing network "
              "is saved under --out");
}

TEST_F(CosimCliTest, BadInputsAreUsageErrors) {
  ExpectError("cosim --config nosuch", 2, "unknown preset 'nosuch'");
  ExpectError("cosim --config teach-4 --programs 0", 2, "--programs must be at least 1");
  ExpectError("cosim --config teach-4 --set bogus=1", 2, "unknown key 'bogus'");
  ExpectError("cosim --replay " + P("nothing-here"), 2, "is not a cosim mismatch folder");
}

}  // namespace
}  // namespace tpu::test
