// Energy tables (--energy FILE.json): host/report/energy.h.
#include "host/report/energy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "energy.json");
  fuzz::ExpectNormalErrors([&] { report::LoadEnergyTable(path); });
  return 0;
}
