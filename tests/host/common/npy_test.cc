// NumPy .npy reading and writing (host/common/npy.cc), including every malformed input.
#include "host/common/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host/common/errors.h"

namespace tpu {
namespace {
namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) {
    const auto p =
        fs::temp_directory_path() / ("tpusim_npy_" + std::to_string(::getpid()) + "_" + name);
    made_.push_back(p.string());
    return p.string();
  }
  // Writes a file with a hand-made header and payload.
  std::string Raw(const std::string& name, const std::string& dict, const std::string& payload,
                  char major = 1) {
    std::string h = dict;
    const size_t unpadded = 10 + h.size() + 1;
    h.append((64 - unpadded % 64) % 64, ' ');
    h.push_back('\n');
    std::string bytes = std::string("\x93NUMPY", 6) + major + '\0';
    bytes.push_back(static_cast<char>(h.size() & 0xff));
    bytes.push_back(static_cast<char>(h.size() >> 8));
    bytes += h + payload;
    const std::string p = Path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  void ExpectUsageError(const std::string& path, const std::string& fragment) {
    try {
      ReadNpyInt8(path);
      FAIL() << "expected an error mentioning '" << fragment << "'";
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    }
  }
  void TearDown() override {
    for (const auto& p : made_) fs::remove(p);
  }
  std::vector<std::string> made_;
};

TEST_F(NpyTest, Int32RoundTrip) {
  Matrix<int32_t> m{2, 3, {1, -2, 3, INT32_MIN, INT32_MAX, 0}};
  const std::string p = Path("c.npy");
  WriteNpyInt32(p, m);
  const auto back = ReadNpyInt32(p);
  EXPECT_EQ(back.rows, 2);
  EXPECT_EQ(back.cols, 3);
  EXPECT_EQ(back.data, m.data);
  EXPECT_EQ(fs::file_size(p) % 64, (6u * 4u) % 64) << "header padded to 64 bytes";
}

TEST_F(NpyTest, Int8RoundTrip) {
  Matrix<int8_t> m{3, 1, {-128, 0, 127}};
  const std::string p = Path("a.npy");
  WriteNpyInt8(p, m);
  EXPECT_EQ(ReadNpyInt8(p).data, m.data);
}

TEST_F(NpyTest, FortranOrderIsTransposedToRowMajor) {
  const std::string p = Raw("f.npy", "{'descr': '|i1', 'fortran_order': True, 'shape': (2, 3), }",
                            std::string("\x01\x04\x02\x05\x03\x06", 6));
  const auto m = ReadNpyInt8(p);
  EXPECT_EQ(m.data, (std::vector<int8_t>{1, 2, 3, 4, 5, 6}));
}

TEST_F(NpyTest, Version2HeaderIsRead) {
  std::string dict = "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 2), }";
  const size_t unpadded = 12 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((dict.size() >> (8 * i)) & 0xff));
  bytes += dict + std::string("\x07\x08", 2);
  const std::string p = Path("v2.npy");
  std::ofstream(p, std::ios::binary) << bytes;
  EXPECT_EQ(ReadNpyInt8(p).data, (std::vector<int8_t>{7, 8}));
}

TEST_F(NpyTest, MissingFile) { ExpectUsageError(Path("missing.npy"), "cannot open"); }

TEST_F(NpyTest, NotNpy) {
  const std::string p = Path("text.npy");
  std::ofstream(p) << "hello, world, this is text";
  ExpectUsageError(p, "not a NumPy .npy file");
}

TEST_F(NpyTest, WrongDtypeNamesBothAndTheFix) {
  const std::string p = Raw("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1), }",
                            std::string(4, '\0'));
  ExpectUsageError(p, "dtype is int32");
  ExpectUsageError(p, "astype(np.int8)");
}

TEST_F(NpyTest, WrongRank) {
  const std::string p =
      Raw("r3.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 2, 2), }",
          std::string(4, '\0'));
  ExpectUsageError(p, "3 dimensions");
  const std::string p1 = Raw("r1.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }",
                             std::string(4, '\0'));
  ExpectUsageError(p1, "1 dimensions");
}

TEST_F(NpyTest, EmptyShape) {
  const std::string p =
      Raw("e.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (0, 3), }", "");
  ExpectUsageError(p, "empty");
}

TEST_F(NpyTest, TruncatedData) {
  const std::string p = Raw("t.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (3, 3), }",
                            std::string(5, '\1'));
  ExpectUsageError(p, "truncated");
}

TEST_F(NpyTest, TrailingBytes) {
  const std::string p = Raw("x.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (1, 1), }",
                            std::string(3, '\1'));
  ExpectUsageError(p, "extra bytes");
}

TEST_F(NpyTest, TruncatedHeader) {
  const std::string p = Path("h.npy");
  std::ofstream(p, std::ios::binary) << std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
  ExpectUsageError(p, "truncated header");
}

TEST_F(NpyTest, UnwritablePathIsARuntimeErrorAndLeavesNothing) {
  Matrix<int32_t> m{1, 1, {5}};
  EXPECT_THROW(WriteNpyInt32("/nonexistent-dir/c.npy", m), RuntimeError);
  const std::string dir = Path("dir");
  fs::create_directory(dir);
  EXPECT_THROW(WriteNpyInt32(dir, m), RuntimeError);
  fs::remove(dir);
}

}  // namespace
}  // namespace tpu
