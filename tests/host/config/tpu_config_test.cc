// TpuConfig presets and validation (host/config/tpu_config.cc).
#include "host/config/tpu_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/common/errors.h"

namespace tpu::config {
namespace {

std::string ErrorOf(const std::string& name) {
  try {
    LoadConfig(name);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string TempJson(const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("tpusim_cfg_" + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << text;
  return p.string();
}

TEST(TpuConfigTest, PresetsLoad) {
  EXPECT_EQ(LoadConfig("teach-4").array_dim, 4);
  EXPECT_EQ(LoadConfig("lab-8").array_dim, 8);
  EXPECT_EQ(LoadConfig("small-16").array_dim, 16);
  const TpuConfig v1 = LoadConfig("tpu-v1");
  EXPECT_EQ(v1.array_dim, 256);
  EXPECT_EQ(v1.acc_depth_rows, 4096);
  EXPECT_DOUBLE_EQ(v1.clock_mhz, 700.0);
}

TEST(TpuConfigTest, UnknownPresetListsTheKnownOnes) {
  const std::string e = ErrorOf("small-17");
  EXPECT_NE(e.find("unknown preset 'small-17'"), std::string::npos) << e;
  EXPECT_NE(e.find("small-16"), std::string::npos) << e;
  EXPECT_NE(e.find("teach-4"), std::string::npos) << e;
}

TEST(TpuConfigTest, FileWithUnknownKeyIsRejected) {
  const std::string p = TempJson(R"({"array_dim": 8, "arary_dim": 4})");
  EXPECT_NE(ErrorOf(p).find("unknown key 'arary_dim'"), std::string::npos);
  std::filesystem::remove(p);
}

TEST(TpuConfigTest, OutOfRangeValuesAreRejected) {
  const std::string p = TempJson(R"({"array_dim": 1})");
  EXPECT_NE(ErrorOf(p).find("array_dim 1 is out of range"), std::string::npos);
  std::ofstream(p) << R"({"clock_mhz": -5})";
  EXPECT_NE(ErrorOf(p).find("clock_mhz"), std::string::npos);
  std::ofstream(p) << R"({"array_dim": "big"})";
  EXPECT_NE(ErrorOf(p).find("'array_dim' must be an integer"), std::string::npos);
  // Beyond the field's type: an error, not a truncation (2^32 + 16 would become 16).
  std::ofstream(p) << R"({"array_dim": 4294967312})";
  EXPECT_NE(ErrorOf(p).find("'array_dim' must be an integer of at most 2147483647"),
            std::string::npos);
  std::ofstream(p) << R"({"array_dim": 1e19})";
  EXPECT_NE(ErrorOf(p).find("'array_dim' must be an integer"), std::string::npos);
  std::ofstream(p) << R"({"array_dim": 4,)";
  EXPECT_NE(ErrorOf(p).find("not valid JSON"), std::string::npos);
  std::filesystem::remove(p);
}

// Each core has a weight-memory port per matrix unit and one for its host DMA (read_hbm);
// the memory serves at most 64 ports, so 16 cores of 4 units (80) are refused, 16 of 3 not.
TEST(TpuConfigTest, MoreWeightMemoryPortsThanTheMemoryServesAreRejected) {
  const std::string p = TempJson(R"({"cores": 16, "mxus_per_core": 4})");
  EXPECT_NE(ErrorOf(p).find("16 cores of 4 matrix units need 80 weight-memory ports"),
            std::string::npos)
      << ErrorOf(p);
  std::ofstream(p) << R"({"cores": 16, "mxus_per_core": 3})";
  EXPECT_EQ(ErrorOf(p), "");
  std::filesystem::remove(p);
}

TEST(TpuConfigTest, JsonEchoesEveryField) {
  const auto j = LoadConfig("small-16").ToJson();
  for (const char* key : {"name", "description", "array_dim", "acc_depth_rows", "clock_mhz"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

// Every chip parameter of the contract table is a config key, read, written and checked
// against its range: one past each end is refused with the field's name.
TEST(TpuConfigTest, EveryContractParameterIsReadWrittenAndRangeChecked) {
  const TpuConfig base = LoadConfig("small-16");
  const nlohmann::json j = base.ToJson();
  EXPECT_EQ(j.size(), 2u + hw::kParams.size());  // name, description and the parameters
  for (const hw::ParamInfo& info : hw::kParams) {
    SCOPED_TRACE(info.name);
    ASSERT_TRUE(j.contains(info.name));
    EXPECT_EQ(FromJson(j, "x", "test").ToJson()[info.name], j[info.name]);  // round trip
    const double below = info.lo_open ? info.lo : info.lo - 1;
    for (double bad : {below, info.hi + 1}) {
      nlohmann::json k = j;
      k[info.name] = info.lo_open ? nlohmann::json(bad) : nlohmann::json(static_cast<int64_t>(bad));
      try {
        FromJson(k, "x", "test");
        ADD_FAILURE() << "accepted " << bad;
      } catch (const UsageError& e) {
        // (An enum field: "'dtype' must be int8 or bf16, not 2".)
        const std::string named =
            info.names ? "'" + std::string(info.name) + "' must be " : std::string(info.name) + " ";
        EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
      }
    }
  }
}

// An enum field (dtype) is written by name and refuses other names and numbers, listing the
// names it takes.
TEST(TpuConfigTest, DtypeIsANamedChoice) {
  nlohmann::json j = LoadConfig("small-16").ToJson();
  EXPECT_EQ(j["dtype"], "int8");
  j["dtype"] = "bf16";
  const TpuConfig c = FromJson(j, "x", "test");
  EXPECT_EQ(c.dtype, hw::Dtype::kBf16);
  EXPECT_EQ(c.ToJson()["dtype"], "bf16");
  for (const nlohmann::json& bad :
       {nlohmann::json("fp8"), nlohmann::json(1), nlohmann::json("BF16")}) {
    j["dtype"] = bad;
    try {
      FromJson(j, "x", "test");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("'dtype' must be int8 or bf16, not " + bad.dump()),
                std::string::npos)
          << e.what();
    }
  }
  TpuConfig o = LoadConfig("small-16");
  ApplyOverride(&o, "dtype=bf16");  // --set dtype=bf16: a bare word
  EXPECT_EQ(o.dtype, hw::Dtype::kBf16);
}

}  // namespace
}  // namespace tpu::config
