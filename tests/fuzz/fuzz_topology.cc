// SCALE-Sim topology CSV files (tpusim run --topology FILE.csv):
// host/compiler/topology_csv.h. Accepted layers have positive sizes and a filter that fits
// the IFMAP, so their GEMM shapes are positive.
#include "host/compiler/topology_csv.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpu;
  const std::string path = fuzz::WriteInput(data, size, "topology.csv");
  fuzz::ExpectNormalErrors([&] {
    for (const compiler::TopologyLayer& l : compiler::ReadTopologyCsv(path)) {
      const gemm::GemmShape g = l.Gemm();
      fuzz::Check(!l.name.empty() && g.m >= 1 && g.k >= 1 && g.n >= 1, "an impossible layer");
    }
  });
  return 0;
}
