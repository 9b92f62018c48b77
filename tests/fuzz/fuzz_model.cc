// A model folder's model.json (host/nn/model.h), next to the committed LeNet-5's weights.
#include <filesystem>

#include "host/nn/model.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path d = fuzz::ScratchDir() / "model";
    fs::create_directories(d);
    for (const auto& e : fs::directory_iterator(TPUSIM_SOURCE_DIR "/models/lenet5")) {
      if (e.path().extension() == ".npy") {
        fs::create_symlink(e.path(), d / e.path().filename());
      }
    }
    return d;
  }();
  fuzz::WriteInput(data, size, "model/model.json");
  fuzz::ExpectNormalErrors([&] { nn::LoadModel(dir.string()); });
  return 0;
}
