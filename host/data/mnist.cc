// MNIST loading (see mnist.h).
#include "host/data/mnist.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "host/common/errors.h"
#include "host/data/idx.h"

namespace tpu::data {
namespace fs = std::filesystem;
namespace {

const char* const kFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

bool HasMnist(const std::string& dir) {
  for (const char* f : kFiles) {
    if (!fs::exists(dir + "/" + f + ".gz") && !fs::exists(dir + "/" + f)) return false;
  }
  return true;
}

// The file as found: compressed or not.
std::string PathOf(const std::string& dir, const std::string& name) {
  const std::string gz = dir + "/" + name + ".gz";
  if (fs::exists(gz)) return gz;
  const std::string raw = dir + "/" + name;
  if (fs::exists(raw)) return raw;
  throw UsageError("MNIST file " + gz + " (or " + name + ") is missing in " + dir);
}

}  // namespace

std::string FindMnistDir(const std::string& flag) {
  if (!flag.empty()) {
    if (!HasMnist(flag)) {
      throw UsageError(Field("data") + " " + flag + ": no MNIST there (need " + kFiles[0] +
                       "[.gz] and the three others); get them with scripts/fetch-mnist " + flag);
    }
    return flag;
  }
  if (const char* env = std::getenv("TPUSIM_DATA"); env && *env) {
    if (!HasMnist(env)) {
      throw UsageError(std::string("$TPUSIM_DATA=") + env +
                       ": no MNIST there; fix the variable or run scripts/fetch-mnist " + env);
    }
    return env;
  }
  const std::string shared = TPUSIM_SOURCE_DIR "/../shared/data/mnist";
  if (HasMnist(shared)) return fs::weakly_canonical(shared).string();
  const std::string fetched = TPUSIM_SOURCE_DIR "/data/mnist";
  if (HasMnist(fetched)) return fetched;
  throw UsageError(
      "MNIST not found (looked at " + Field("data") +
      ", $TPUSIM_DATA, ../shared/data/mnist and data/mnist); download it with scripts/fetch-mnist "
      "(writes data/mnist) or pass " +
      Field("data") + " DIR");
}

std::string DatasetName(Dataset d) { return d == Dataset::kMnist ? "mnist" : "fashion-mnist"; }

Dataset ParseDataset(const std::string& name) {
  if (name == "mnist") return Dataset::kMnist;
  if (name == "fashion-mnist") return Dataset::kFashionMnist;
  throw UsageError("unknown data set '" + name + "'; use mnist or fashion-mnist");
}

std::string FindDatasetDir(Dataset d, const std::string& flag) {
  if (d == Dataset::kMnist) return FindMnistDir(flag);
  const std::string how =
      "install Debian's dataset-fashion-mnist (scripts/install-deps does) or pass " +
      Field("data") + " DIR";
  if (!flag.empty()) {
    if (!HasMnist(flag)) {
      throw UsageError(Field("data") + " " + flag + ": no Fashion-MNIST there (need " + kFiles[0] +
                       "[.gz] and the three others); " + how);
    }
    return flag;
  }
  if (const char* env = std::getenv("TPUSIM_FASHION_DATA"); env && *env) {
    if (!HasMnist(env)) {
      throw UsageError(std::string("$TPUSIM_FASHION_DATA=") + env +
                       ": no Fashion-MNIST there; fix the variable or " + how);
    }
    return env;
  }
  const std::string debian = "/usr/share/datasets/fashion-mnist";
  if (HasMnist(debian)) return debian;
  throw UsageError("Fashion-MNIST not found (looked at " + Field("data") +
                   ", $TPUSIM_FASHION_DATA and " + debian + "); " + how);
}

MnistSet LoadMnist(const std::string& dir, bool train, int64_t limit) {
  const std::string images_path = PathOf(dir, train ? kFiles[0] : kFiles[2]);
  const std::string labels_path = PathOf(dir, train ? kFiles[1] : kFiles[3]);
  const IdxArray images = ReadIdx(images_path, 3);
  const IdxArray labels = ReadIdx(labels_path, 1);
  if (images.dims[1] != kMnistSide || images.dims[2] != kMnistSide) {
    throw UsageError(images_path + ": images are " + std::to_string(images.dims[1]) + " x " +
                     std::to_string(images.dims[2]) + ", MNIST's are 28 x 28");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw UsageError(images_path + " holds " + std::to_string(images.dims[0]) + " images but " +
                     labels_path + " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] > 9) {
      throw UsageError(labels_path + ": label " + std::to_string(i) + " is " +
                       std::to_string(labels.data[i]) + ", not a digit 0-9");
    }
  }
  MnistSet set;
  set.count = images.dims[0];
  if (limit > 0 && limit < set.count) set.count = limit;
  set.pixels.assign(static_cast<size_t>(set.count) * kPaddedSide * kPaddedSide, 0);
  const int pad = (kPaddedSide - kMnistSide) / 2;
  for (int64_t i = 0; i < set.count; ++i) {
    const uint8_t* src = &images.data[static_cast<size_t>(i) * kMnistSide * kMnistSide];
    uint8_t* dst = &set.pixels[static_cast<size_t>(i) * kPaddedSide * kPaddedSide];
    for (int r = 0; r < kMnistSide; ++r) {
      std::copy_n(src + r * kMnistSide, kMnistSide, dst + (r + pad) * kPaddedSide + pad);
    }
  }
  set.labels.assign(labels.data.begin(), labels.data.begin() + set.count);
  return set;
}

}  // namespace tpu::data
