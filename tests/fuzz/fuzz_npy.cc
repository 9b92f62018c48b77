// NumPy .npy files (operands of tpusim gemm, model weights): host/common/npy.h.
#include "host/common/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "input.npy");
  fuzz::ExpectNormalErrors([&] {
    const Matrix<int8_t> m = ReadNpyInt8(path);
    fuzz::Check(m.data.size() == static_cast<size_t>(m.rows * m.cols), "int8 shape mismatch");
  });
  fuzz::ExpectNormalErrors([&] {
    const Matrix<int32_t> m = ReadNpyInt32(path);
    fuzz::Check(m.data.size() == static_cast<size_t>(m.rows * m.cols), "int32 shape mismatch");
  });
  fuzz::ExpectNormalErrors([&] { ReadNpyTensor<float>(path); });
  fuzz::ExpectNormalErrors([&] { ReadNpyTensor<int8_t>(path); });
  return 0;
}
