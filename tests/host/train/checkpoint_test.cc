// Checkpoints of a training on the chip (host/train/checkpoint.h): a checkpoint is taken only
// for the run that wrote it, and one written before a setting existed is taken as the run
// that version made (its checkpoints lack "cores": one core).
#include "host/train/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "host/common/errors.h"

namespace tpu::train {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointTest, AnEarlierVersionsCheckpointIsOneCores) {
  const fs::path dir =
      fs::temp_directory_path() / ("tpusim-checkpoint-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const Optimizer adam;
  Checkpoint c;
  c.run = {{"config", "tpu-v2"}, {"cores", 1}};
  c.state = DenseState::Fresh({{1.0f, 2.0f, 3.0f}, {4.0f}}, adam);
  c.state.step = 7;
  WriteCheckpoint((dir / "run.checkpoint").string(), c);
  const std::string manifest = (dir / "run.checkpoint" / "checkpoint.json").string();
  nlohmann::json j;
  std::ifstream(manifest) >> j;
  j["run"].erase("cores");  // as the versions before --cores wrote it
  std::ofstream(manifest) << j.dump();
  const std::optional<Checkpoint> got =
      ReadCheckpoint((dir / "run.checkpoint").string(), c.run, {3, 1}, adam);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->state.step, 7);
  EXPECT_TRUE(got->state == c.state);
  try {
    ReadCheckpoint((dir / "run.checkpoint").string(), {{"config", "tpu-v2"}, {"cores", 2}}, {3, 1},
                   adam);
    ADD_FAILURE() << "a one-core checkpoint taken for a run on two cores";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("(cores 1 there, 2 now)"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tpu::train
