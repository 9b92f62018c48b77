// A model folder's model.json (host/nn/model.h): the same input read next to the committed
// LeNet-5's weights (a chain) and next to a small imported graph's (residual add, concat,
// depthwise and pooling layers with padding: tests/fuzz/corpus/model/graph), so mutations of
// either seed find the tensors they name.
#include <filesystem>

#include "host/nn/model.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// A scratch folder holding links to the .npy files of `weights`, for model.json to name.
std::filesystem::path WeightsDir(const std::string& name, const std::filesystem::path& weights) {
  namespace fs = std::filesystem;
  const fs::path d = tpu::fuzz::ScratchDir() / name;
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(weights)) {
    if (e.path().extension() == ".npy") fs::create_symlink(e.path(), d / e.path().filename());
  }
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  static const std::filesystem::path dirs[] = {
      WeightsDir("lenet5", TPUSIM_SOURCE_DIR "/models/lenet5"),
      WeightsDir("graph", TPUSIM_SOURCE_DIR "/tests/fuzz/corpus/model/graph")};
  for (const std::filesystem::path& dir : dirs) {
    fuzz::WriteInput(data, size, (dir.filename() / "model.json").string());
    fuzz::ExpectNormalErrors([&] {
      const nn::Model m = nn::LoadModel(dir.string());
      for (size_t i = 0; i < m.layers.size(); ++i) {
        for (const int in : m.layers[i].inputs) {
          fuzz::Check(in >= nn::kModelInput && in < static_cast<int>(i),
                      "a layer reads a layer that does not come before it");
        }
      }
      nn::Summary(m);
    });
  }
  return 0;
}
