// Input files of `tpusim run --inputs FILE.npy` (host/nn/inputs.h): float32 N x C x H x W,
// read for the committed LeNet-5 (pixel / 255 values) and for a small imported graph that
// takes float values (tests/fuzz/corpus/model/graph), then quantized as the chip takes them.
#include "host/nn/inputs.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  static const nn::Model models[] = {
      nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5"),
      nn::LoadModel(TPUSIM_SOURCE_DIR "/tests/fuzz/corpus/model/graph")};
  const std::string path = fuzz::WriteInput(data, size, "inputs.npy");
  for (const nn::Model& m : models) {
    fuzz::ExpectNormalErrors([&] {
      const nn::InputSet s = nn::ReadInputsNpy(path, m);
      const size_t n = static_cast<size_t>(s.count * s.shape.Size());
      fuzz::Check(s.count >= 1 && s.shape == m.input && s.values.size() + s.pixels.size() == n,
                  "accepted inputs do not match the model's input shape");
      const nn::RowMatrix<int8_t> q = nn::Int8Inputs(m, s, 0, s.count);
      fuzz::Check(q.rows() == s.count && q.cols() == m.input.Size(),
                  "int8 inputs of a wrong shape");
    });
  }
  return 0;
}
