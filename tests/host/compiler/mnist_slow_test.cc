// All 10,000 MNIST test images through the RTL on small-16 (label slow: make test-slow).
#include <gtest/gtest.h>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/engine/engine_factory.h"
#include "host/run/tpu_runner.h"
#include "tests/mnist_test_util.h"

namespace tpu::compiler {

using run::RunModelOnTpu;
using run::TpuRunResult;
namespace {

TEST(MnistSlowTest, AllTenThousandTestImagesAreBitExactOnSmall16) {
  TPUSIM_MNIST_DIR_OR_SKIP(dir)
  const nn::Model m = nn::LoadModel(TPUSIM_SOURCE_DIR "/models/lenet5");
  const data::MnistSet set = data::LoadMnist(dir, false);
  const auto chip =
      engine::MakeChipEngine(engine::EngineKind::kRtl, config::LoadConfig("small-16"), {});
  const TpuRunResult r =
      RunModelOnTpu(m, *chip, set.pixels.data(), set.labels.data(), set.count, 64);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_GE(r.correct, 9850);
}

}  // namespace
}  // namespace tpu::compiler
