// IDX files (MNIST), plain and gzip-compressed: host/data/idx.h.
#include "host/data/idx.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  for (const char* name : {"input.idx", "input.idx.gz"}) {
    const std::string path = fuzz::WriteInput(data, size, name);
    for (int rank : {1, 3}) {
      fuzz::ExpectNormalErrors([&] {
        const data::IdxArray a = data::ReadIdx(path, rank);
        size_t n = 1;
        for (int32_t d : a.dims) n *= static_cast<size_t>(d);
        fuzz::Check(a.dims.size() == static_cast<size_t>(rank) && a.data.size() == n,
                    "ReadIdx accepted a file whose data does not match its dimensions");
      });
    }
  }
  return 0;
}
