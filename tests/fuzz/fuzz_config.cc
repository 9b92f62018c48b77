// Chip configs (--config FILE.json, presets): host/config/tpu_config.h. An accepted config
// is valid and survives its own JSON.
#include <nlohmann/json.hpp>

#include "host/config/tpu_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "config.json");
  fuzz::ExpectNormalErrors([&] {
    const config::TpuConfig c = config::LoadConfig(path);
    c.Validate();
    const config::TpuConfig again = config::FromJson(c.ToJson(), c.name, "round trip");
    fuzz::Check(again.ToJson() == c.ToJson(), "a config does not survive its JSON");
  });
  return 0;
}
