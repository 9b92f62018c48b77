// ONNX models (tpusim import MODEL.onnx): host/import/onnx_import.h, from the bytes. An
// accepted model has consistent shapes: every layer's input is the previous one's output.
#include "host/import/onnx_import.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  fuzz::ExpectNormalErrors([&] {
    const nn::Model m = import::ImportOnnxBytes(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx", {});
    nn::Shape3 cur = m.input;
    for (const nn::Layer& l : m.layers) {
      fuzz::Check(l.in == cur && l.out.Size() >= 1, "inconsistent layer shapes");
      cur = l.out;
    }
  });
  return 0;
}
