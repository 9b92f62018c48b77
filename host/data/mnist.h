// The MNIST data set and Fashion-MNIST (the same IDX format and sizes: 28 x 28 grey images
// of 10 classes of clothing): where they are, and loading them as 32 x 32 images (the
// 28 x 28 images zero-padded by 2 on each side, as the LeNet-5-style networks expect).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::data {

inline constexpr int kMnistSide = 28;
inline constexpr int kPaddedSide = 32;
inline constexpr int kClasses = 10;  // both sets': digits, or kinds of clothing

struct MnistSet {
  int64_t count = 0;
  int64_t image_size = kPaddedSide * kPaddedSide;  // bytes per image
  std::vector<uint8_t> pixels;                     // count x 32 x 32, row-major, 0 = background
  std::vector<uint8_t> labels;                     // count values in 0..9
  const uint8_t* Image(int64_t i) const { return &pixels[static_cast<size_t>(i * image_size)]; }
};

enum class Dataset { kMnist, kFashionMnist };

// "mnist" or "fashion-mnist".
std::string DatasetName(Dataset d);
// Throws UsageError naming the data sets there are.
Dataset ParseDataset(const std::string& name);

// The folder of a data set's four IDX files. MNIST: see FindMnistDir. Fashion-MNIST:
// `flag` if given, else $TPUSIM_FASHION_DATA, else /usr/share/datasets/fashion-mnist
// (Debian's dataset-fashion-mnist, which scripts/install-deps installs). Throws UsageError
// saying where it looked and how to get it.
std::string FindDatasetDir(Dataset d, const std::string& flag);

// The folder with the four MNIST files: `flag` if given, else $TPUSIM_DATA, else
// ../shared/data/mnist beside the source tree. Throws UsageError saying where it looked
// and how to get the data (scripts/fetch-mnist).
std::string FindMnistDir(const std::string& flag);

// Loads the training (60,000) or test (10,000) set from `dir` (.gz or uncompressed files),
// at most `limit` images (0: all). Throws UsageError for missing or malformed files.
MnistSet LoadMnist(const std::string& dir, bool train, int64_t limit = 0);

}  // namespace tpu::data
