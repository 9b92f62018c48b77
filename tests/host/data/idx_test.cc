// IDX reading and MNIST loading (host/data/idx.cc, mnist.cc): good files, and every kind
// of corruption named clearly.
#include "host/data/idx.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "tests/mnist_test_util.h"

namespace tpu::data {
namespace {
namespace fs = std::filesystem;

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpusim_idx_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An IDX header (type 0x08, big-endian dims) followed by `payload` bytes.
  static std::string Idx(std::vector<uint32_t> dims, size_t payload, uint8_t type = 0x08) {
    std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
    for (uint32_t d : dims)
      for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((d >> sh) & 0xff));
    s.append(payload, '\x07');
    return s;
  }
  std::string Raw(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string Gz(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return p;
  }
  static std::string ErrorOf(const std::string& path, int rank) {
    try {
      ReadIdx(path, rank);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(IdxTest, ReadsRawAndGzipped) {
  for (const std::string& p : {Raw("a", Idx({3, 2, 2}, 12)), Gz("a.gz", Idx({3, 2, 2}, 12))}) {
    const IdxArray a = ReadIdx(p, 3);
    EXPECT_EQ(a.dims, (std::vector<int32_t>{3, 2, 2}));
    EXPECT_EQ(a.data.size(), 12u);
    EXPECT_EQ(a.data[5], 7);
  }
}

TEST_F(IdxTest, BadMagic) {
  std::string b = Idx({2}, 2);
  b[0] = 'P';
  EXPECT_NE(ErrorOf(Raw("m", b), 1).find("bad magic number"), std::string::npos);
}

TEST_F(IdxTest, WrongElementType) {
  EXPECT_NE(ErrorOf(Raw("t", Idx({2}, 8, 0x0D)), 1).find("not 0x08"), std::string::npos);
}

TEST_F(IdxTest, WrongRank) {
  EXPECT_NE(ErrorOf(Raw("r", Idx({2, 2}, 4)), 3).find("has 2 dimensions, expected 3"),
            std::string::npos);
}

TEST_F(IdxTest, TruncatedAndOverlongData) {
  const std::string e = ErrorOf(Raw("s", Idx({10, 28, 28}, 7839)), 3);
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  const std::string p = Raw("x", Idx({2}, 3));
  EXPECT_NE(ErrorOf(p, 1).find("extra bytes"), std::string::npos);
  EXPECT_NE(ErrorOf(p, 1).find(p), std::string::npos) << "names the file";
}

TEST_F(IdxTest, TruncatedGzipStream) {
  const std::string full = Gz("full.gz", Idx({1000}, 1000));
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string cut = Raw("cut.gz", bytes.substr(0, bytes.size() / 2));
  const std::string e = ErrorOf(cut, 1);
  EXPECT_FALSE(e.empty());
  EXPECT_NE(e.find("cut.gz"), std::string::npos) << e;
}

TEST_F(IdxTest, ZeroDimension) {
  EXPECT_NE(ErrorOf(Raw("z", Idx({0, 28, 28}, 0)), 3).find("not plausible"), std::string::npos);
}

TEST_F(IdxTest, MissingFile) {
  EXPECT_NE(ErrorOf((dir_ / "nope.gz").string(), 1).find("cannot open"), std::string::npos);
}

TEST_F(IdxTest, MnistLabelsMustMatchImages) {
  Raw("t10k-images-idx3-ubyte", Idx({3, 28, 28}, 3 * 784));
  Raw("t10k-labels-idx1-ubyte", std::string({0, 0, 8, 1, 0, 0, 0, 2, 1, 2}));
  Raw("train-images-idx3-ubyte", Idx({3, 28, 28}, 3 * 784));
  Raw("train-labels-idx1-ubyte", Idx({3}, 0) + std::string({1, 12, 3}));
  try {
    LoadMnist(dir_.string(), /*train=*/false);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 images but"), std::string::npos) << e.what();
  }
  try {
    LoadMnist(dir_.string(), /*train=*/true);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("label 1 is 12, not a digit"), std::string::npos)
        << e.what();
  }
}

TEST_F(IdxTest, MnistIsPaddedTo32By32) {
  std::string images = Idx({1, 28, 28}, 0);
  for (int i = 0; i < 784; ++i) images.push_back(static_cast<char>(i % 251));
  Raw("t10k-images-idx3-ubyte", images);
  Raw("t10k-labels-idx1-ubyte", Idx({1}, 0) + std::string(1, '\x03'));
  const MnistSet s = LoadMnist(dir_.string(), /*train=*/false);
  ASSERT_EQ(s.count, 1);
  EXPECT_EQ(s.labels[0], 3);
  EXPECT_EQ(s.Image(0)[0], 0);                               // padding
  EXPECT_EQ(s.Image(0)[2 * 32 + 2], 0 % 251);                // first pixel
  EXPECT_EQ(s.Image(0)[(2 + 27) * 32 + 2 + 27], 783 % 251);  // last pixel
  EXPECT_EQ(s.Image(0)[31 * 32 + 31], 0);
}

TEST(MnistTest, SharedDataSetLoads) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const MnistSet test = LoadMnist(dir, /*train=*/false);
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(test.labels[0], 7);  // the famous first test digit
}

TEST(MnistTest, MissingDataSaysHowToGetIt) {
  try {
    FindMnistDir("/nonexistent");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("scripts/fetch-mnist"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpu::data
