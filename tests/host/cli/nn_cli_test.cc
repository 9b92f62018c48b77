// `tpusim model`, `train`, `quantize` and `infer` as a user runs them
// (host/cli/*_command.cc): output, JSON, and bad inputs with the right exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "host/common/errors.h"
#include "host/data/mnist.h"
#include "host/nn/model.h"
#include "tests/host/cli/cli_fixture.h"
#include "tests/host/nn/nn_test_util.h"

namespace tpu {
namespace {
using test::Outcome;

class NnCliTest : public test::CliFixture {
 protected:
  static bool HaveMnist() {
    try {
      data::FindMnistDir("");
      return true;
    } catch (const UsageError&) {
      return false;
    }
  }
  static bool HaveFashion() {
    try {
      data::FindDatasetDir(data::Dataset::kFashionMnist, "");
      return true;
    } catch (const UsageError&) {
      return false;
    }
  }
};

TEST_F(NnCliTest, ModelSummaryShowsTheParameterCounts) {
  const Outcome o = Run("model --summary");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  for (const char* text : {" 60 ", " 880 ", "69,240", "10,164", " 850 ", "81,194 parameters",
                           "146,016", "274,656 MACs per image"}) {
    EXPECT_NE(o.out.find(text), std::string::npos) << text << "\n" << o.out;
  }
}

TEST_F(NnCliTest, InferReportsAccuracyAndWritesJson) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  for (const char* backend : {"cpu-int8", "cpu-fp32"}) {
    const Outcome o =
        Run(std::string("infer --backend ") + backend + " --images 300 --json " + P("r.json"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("images/s"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("ms per image at batch 1"), std::string::npos) << o.out;
    const auto j = nlohmann::json::parse(Slurp(P("r.json")));
    EXPECT_EQ(j["backend"], backend);
    EXPECT_EQ(j["images"], 300);
    EXPECT_GT(j["accuracy"].get<double>(), 0.95);
    EXPECT_GT(j["images_per_second"].get<double>(), 0.0);
  }
}

// cpu-bf16 (docs/bf16.md): the fp32 model in bfloat16 classifies as the fp32 one does on
// nearly every image, and the array size it adds in is reported.
TEST_F(NnCliTest, InferBf16AgreesWithFp32) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const std::string common = " --images 300 --predictions ";
  ASSERT_EQ(Run("infer --backend cpu-fp32" + common + P("fp32.csv")).exit_code, 0);
  const Outcome o =
      Run("infer --backend cpu-bf16 --array 16 --json " + P("r.json") + common + P("bf16.csv"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("K tiles of a 16 x 16 array"), std::string::npos) << o.out;
  const auto j = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_EQ(j["backend"], "cpu-bf16");
  EXPECT_EQ(j["array_dim"], 16);
  std::istringstream a(Slurp(P("fp32.csv"))), b(Slurp(P("bf16.csv")));
  std::string la, lb;
  int same = 0, lines = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    same += la == lb;
    ++lines;
  }
  EXPECT_EQ(lines, 301);  // a header and 300 images
  EXPECT_GE(same, 297) << "bf16 and fp32 predictions differ on more than 1 % of the images";
  ExpectError("infer --backend cpu-bf16 --array 1 --images 3", 2, "--array 1 is out of range");
}

TEST_F(NnCliTest, TrainThenQuantizeMakesALoadableInt8Model) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome t = Run("train --epochs 1 --limit 640 --out " + P("m") + " -q");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const Outcome q = Run("quantize --model " + P("m") + " --out " + P("q") + " --calibration 100");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("int8"), std::string::npos) << q.out;
  const nn::Model m = nn::LoadModel(P("q"));
  EXPECT_TRUE(m.quantized);
  EXPECT_EQ(m.ParamCount(), 81194);
}

// The course material's CNN on the chip: five steps of LeNet at batch 8 on tpu-v2's fast
// engine, each checked bit for bit against its CPU reference, its passes per layer, and a
// model folder of the trained CNN that the other commands read.
TEST_F(NnCliTest, TrainsTheCnnOnTheChip) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome t =
      Run("train --config tpu-v2 --arch lenet5 --batch 8 --limit 40 --epochs 1 "
          "--verify --out " +
          P("cnn"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("5 steps of 8"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("5 steps bit-exact with the CPU reference"), std::string::npos) << t.out;
  for (const char* pass : {"conv1 forward", "pool2 gradient", "conv2 input gradient",
                           "conv1 weight gradient", "fc1 update"})
    EXPECT_NE(t.out.find(pass), std::string::npos) << pass << "\n" << t.out;
  const nn::Model m = nn::LoadModel(P("cnn"));
  EXPECT_EQ(m.name, "lenet5");
  EXPECT_EQ(m.ParamCount(), 81194);
  EXPECT_NE(m.layers[0].weights.data, nn::MakeLenet5(1).layers[0].weights.data);  // trained
  const Outcome i = Run("infer --model " + P("cnn") + " --backend cpu-fp32 --images 100");
  ASSERT_EQ(i.exit_code, 0) << i.err;
}

// Training on the chip (--config): ten steps on tpu-v2's fast engine, each checked bit for
// bit against the CPU reference (--verify), and a model folder of the trained perceptron that
// the other commands read; what the chip cannot train is refused with a line saying why.
TEST_F(NnCliTest, TrainOnTheChipChecksEveryStepAndWritesTheModel) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome t = Run("train --config tpu-v2 --limit 640 --epochs 1 --verify --out " + P("c"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("10 steps of 64"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("10 steps bit-exact with the CPU reference"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("x its bound"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("fc1 weight gradient"), std::string::npos) << t.out;  // the passes
  const nn::Model m = nn::LoadModel(P("c"));
  EXPECT_EQ(m.name, "mlp");
  EXPECT_EQ(m.ParamCount(), 264970);
  const Outcome i = Run("infer --model " + P("c") + " --backend cpu-fp32 --images 500");
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const Outcome s =
      Run("train --config tpu-v2 --optimizer sgd --limit 128 --epochs 1 -q --out " + P("s"));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  ExpectError("train --config small-16 --out " + P("x"), 2,
              "config 'small-16' is an int8 chip: training needs float32 sums");
  ExpectError("train --config tpu-v2 --arch lenet5 --batch 200 --out " + P("x"), 2,
              "the CNN's step at batch 200 needs");  // and names the largest that fits
  ExpectError("train --config tpu-v2 --arch lenet5 --batch 200 --out " + P("x"), 2,
              "unified-buffer rows; config 'tpu-v2' has ub_depth_rows = 65536: a --batch of at "
              "most ");
  ExpectError("train --config tpu-v2 --batch 700 --out " + P("x"), 2,
              "batch 700; config 'tpu-v2' has ub_depth_rows = 65536: a --batch of at most 635,");
  ExpectError("train --verify --out " + P("x"), 2, "add --config tpu-v2");
  ExpectError("train --config tpu-v2 --timing-only --out " + P("x"), 2,
              "--timing-only computes no values: it writes no model (--out)");
  ExpectError("train --timing-only", 2, "--timing-only times a training step on the chip");
  ExpectError("train --config tpu-v2", 2, "--out is required");
  ExpectError("train --config tpu-v2 --optimizer rmsprop --out " + P("x"), 2,
              "unknown --optimizer 'rmsprop'");
  EXPECT_FALSE(std::filesystem::exists(P("x")));
}

// --timing-only times a step of a model no data set feeds (24 x 24 x 3 images, 300 classes)
// on synthetic batches: its step's cycles are its passes' together (core 0's), and a run
// with values refuses that model, pointing at --timing-only.
TEST_F(NnCliTest, TrainTimingOnlyTimesAStepOfAnyInputAndClasses) {
  nn::Model m;
  m.name = "rgb";
  m.input = {24, 24, 3};
  nn::Layer gap = test::MakeLayer(nn::LayerType::kAvgPool2d);
  gap.global_pool = true;
  m.layers = {test::MakeLayer(nn::LayerType::kConv2d, 16, 3, 2, "same"), gap,
              test::MakeLayer(nn::LayerType::kDense, 300, 1, 1, "valid", nn::Activation::kSoftmax)};
  nn::SaveModel(test::Randomize(m, 5), P("rgb"));
  const Outcome t =
      Run("train --config tpu-v2 --model " + P("rgb") + " --batch 4 --timing-only --json " +
          P("r.json") + " --timeline " + P("t.json"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("batch 4 of synthetic 24 x 24 x 3 images, 300 classes"), std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("step 2 (the steady state"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("wrote " + P("t.json") + " (step 2's timeline"), std::string::npos);
  const auto r = nlohmann::json::parse(Slurp(P("r.json")));
  EXPECT_TRUE(r["timing_only"].get<bool>());
  uint64_t passes = 0;
  for (const auto& p : r["passes"]) passes += p["counters"]["cycles"].get<uint64_t>();
  EXPECT_GT(passes, 0u);
  EXPECT_EQ(passes, r["step"]["cycles"].get<uint64_t>());
  ExpectError("train --config tpu-v2 --model " + P("rgb") + " --out " + P("x"), 2,
              "time a step of it on synthetic images with --timing-only");
  // --state-in chooses where a graph's state is: in HBM here, the same step's passes.
  const Outcome h = Run("train --config tpu-v2 --model " + P("rgb") +
                        " --batch 4 --timing-only --state-in hbm -q --json " + P("h.json"));
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const auto hj = nlohmann::json::parse(Slurp(P("h.json")));
  EXPECT_TRUE(hj["state_in_hbm"].get<bool>());
  EXPECT_FALSE(r["state_in_hbm"].get<bool>());
  EXPECT_EQ(hj["passes"].size(), r["passes"].size());
  EXPECT_EQ(hj["in_hbm_too"].get<std::string>(), "");
  // ... and every layer's maps too, the first line saying so.
  const Outcome mo = Run("train --config tpu-v2 --model " + P("rgb") +
                         " --batch 4 --timing-only --state-in hbm-with-maps --json " + P("m.json"));
  ASSERT_EQ(mo.exit_code, 0) << mo.err;
  EXPECT_NE(mo.out.find("(the weights and optimizer state in HBM, every layer's output, gradient "
                        "and F too)"),
            std::string::npos)
      << mo.out;
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("m.json")))["in_hbm_too"].get<std::string>(),
            "hbm-with-maps");
  ExpectError("train --config tpu-v2 --timing-only --state-in disk", 2,
              "--state-in disk: use auto, buffer, hbm, hbm-with-f or hbm-with-maps");
  ExpectError("train --config tpu-v2 --arch lenet5 --timing-only --state-in hbm", 2,
              "--state-in is a graph's");
  ExpectError(
      "train --config tpu-v2 --timing-only --timeline " + P("u.json") + " --timeline-step 3", 2,
      "the run has steps 1 to 2");
  EXPECT_FALSE(std::filesystem::exists(P("x")));
  EXPECT_FALSE(std::filesystem::exists(P("u.json")));
}

// A step of training as the other commands show a run: its passes' modelled energy adds up
// to the epoch's, and --timeline writes the chosen step, each pass a slice of its track.
TEST_F(NnCliTest, TrainOnTheChipGivesEachPassItsEnergyAndTimesAStep) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome t = Run("train --config tpu-v2 --limit 256 --epochs 1 --timeline " + P("t.json") +
                        " --timeline-step 3 --json " + P("r.json") + " --out " + P("m"));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("µJ an image, horowitz45"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("wrote " + P("t.json") + " (step 3's timeline"), std::string::npos);
  const auto r = nlohmann::json::parse(Slurp(P("r.json")));
  double passes = 0;
  for (const auto& p : r["passes"]) passes += p["energy_pj"].get<double>();
  EXPECT_NEAR(passes, r["epochs"][0]["energy_j"].get<double>() * 1e12, passes * 1e-12);
  // fc1's forward pass: 64 images x (1,024 inputs and the bias) x 256 units a step, the
  // TPU v1 categories of its cycles adding up to 1.
  const auto& fc1 = r["passes"][0];
  EXPECT_EQ(fc1["pass"], "fc1 forward");
  EXPECT_EQ(fc1["useful_macs"], 4 * 64 * 1025 * 256);
  double shares = 0;
  for (const auto& [k, v] : fc1["tpu_v1_categories"].items()) shares += v.get<double>();
  EXPECT_NEAR(shares, 1.0, 1e-9);
  const auto tl = nlohmann::json::parse(Slurp(P("t.json")));
  EXPECT_EQ(tl["otherData"]["step"], 3);
  int track = -1;
  std::set<std::string> slices;
  uint64_t cycles = 0;
  for (const auto& e : tl["traceEvents"]) {
    if (e["ph"] == "M" && e["args"].value("name", "") == "passes (forward, loss, backward, update)")
      track = e["tid"];
  }
  ASSERT_GE(track, 0) << "no passes track";
  for (const auto& e : tl["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != track) continue;
    slices.insert(e["name"].get<std::string>());
    cycles += e["args"]["cycles"].get<uint64_t>();
  }
  // Every pass the step's cycles are attributed to, by the model's names (an update whose
  // instructions all run beside the products after it has none).
  size_t attributed = 0;
  for (const auto& p : r["passes"]) attributed += p["counters"]["cycles"].get<uint64_t>() > 0;
  EXPECT_EQ(slices.size(), attributed);
  EXPECT_GE(attributed, r["passes"].size() - 1);
  EXPECT_TRUE(slices.count("fc1 weight gradient"));
  // One step, whole: one run (the third step's batch was read ahead: no fetch), its cycles
  // all in the passes' slices.
  ASSERT_EQ(tl["otherData"]["runs"].size(), 1u);
  EXPECT_EQ(tl["otherData"]["runs"][0]["label"], "train-step");
  EXPECT_EQ(cycles, tl["otherData"]["runs"][0]["cycles"].get<uint64_t>());
  ExpectError("train --config tpu-v2 --limit 256 --epochs 1 --timeline " + P("u.json") +
                  " --timeline-step 5 --out " + P("x"),
              2, "--timeline-step 5: the run has steps 1 to 4");
  ExpectError("train --timeline " + P("u.json") + " --out " + P("x"), 2, "add --config tpu-v2");
  ExpectError("train --config tpu-v2 --timeline-step 3 --out " + P("x"), 2,
              "--timeline-step chooses the step --timeline records");
  EXPECT_FALSE(std::filesystem::exists(P("u.json")));
}

// The course material's experiment (compare --train): the same perceptron and hyperparameters
// on the CPU, the CPU reference of the chip's arithmetic and the chip; the reference and the
// chip learn the same (the same arithmetic), the chip's time is simulated.
TEST_F(NnCliTest, CompareTrainPutsCpuAndChipSideBySide) {
  if (!HaveMnist()) GTEST_SKIP() << "no MNIST data";
  const Outcome o =
      Run("compare --train --limit 640 --json " + P("t.json") + " --markdown " + P("t.md"));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto j = nlohmann::json::parse(Slurp(P("t.json")));
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["backend"], "cpu-fp32");
  const auto& bf16 = j["rows"][1]["epochs"][0];
  const auto& chip = j["rows"][2]["epochs"][0];
  EXPECT_EQ(j["rows"][2]["backend"], "tpu tpu-v2");
  EXPECT_EQ(bf16["loss"], chip["loss"]);
  EXPECT_EQ(bf16["test_accuracy"], chip["test_accuracy"]);
  EXPECT_GT(chip["energy_j"].get<double>(), 0);
  EXPECT_NE(Slurp(P("t.md")).find("| tpu tpu-v2 | 1 |"), std::string::npos);
  ExpectError("compare --train --images 5", 2, "--images, --inputs and --synthetic are for");
  ExpectError("compare --train --configs small-16", 2, "is an int8 chip");
  // The course's CNN: the chip and its CPU reference learn the same, bit for bit.
  const Outcome cnn =
      Run("compare --train --arch lenet5 --batch 16 --limit 64 --json " + P("c.json") + " -q");
  ASSERT_EQ(cnn.exit_code, 0) << cnn.err;
  const auto c = nlohmann::json::parse(Slurp(P("c.json")));
  EXPECT_EQ(c["model"], "lenet5");
  EXPECT_EQ(c["rows"][1]["epochs"][0]["loss"], c["rows"][2]["epochs"][0]["loss"]);
  ExpectError("compare --train --arch resnet", 2, "unknown --arch 'resnet'");
}

TEST_F(NnCliTest, BadInputs) {
  ExpectError("infer --backend cuda-int7", 2, "unknown backend 'cuda-int7'");
  ExpectError("infer --model " + P("none"), 2, "cannot open");
  ExpectError("infer --images 0", 2, "at least 1");
  ExpectError("infer --data " + P("nodata"), 2, "no MNIST there");
  ExpectError("train", 2, "--out");
  ExpectError("quantize --model " + P("none") + " --out " + P("x"), 2, "cannot open");
  ExpectError("model --summary --model " + P("none"), 2, "cannot open");
  if (HaveMnist()) {
    ExpectError("infer --images 20000", 2, "more than the 10000 test images");
    ExpectError("infer --images 5 --json /nonexistent-dir/r.json", 1, "does not exist");
  }
}

// A second data set: the model records what it was trained on, and every command that reads
// test images takes that set unless told otherwise (and refuses a different one).
TEST_F(NnCliTest, FashionMnistIsTrainedQuantizedAndRecordedInTheModel) {
  if (!HaveFashion()) GTEST_SKIP() << "no Fashion-MNIST (scripts/install-deps installs it)";
  const Outcome t = Run("train --dataset fashion-mnist --arch wide --epochs 1 --limit 640 --out " +
                        P("f") + " -q");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const nn::Model fp32 = nn::LoadModel(P("f"));
  EXPECT_EQ(fp32.dataset, "fashion-mnist");
  EXPECT_EQ(fp32.name, "cnn-wide");
  EXPECT_EQ(nlohmann::json::parse(Slurp(P("f") + "/model.json"))["dataset"], "fashion-mnist");
  const Outcome q =
      Run("quantize --model " + P("f") + " --out " + P("fq") + " --calibration 100 -q");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(nn::LoadModel(P("fq")).dataset, "fashion-mnist");
  const Outcome i = Run("infer --model " + P("fq") + " --images 200 --json " + P("i.json"));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  ExpectError("infer --model " + P("fq") + " --dataset mnist", 2,
              "--dataset mnist, but model 'cnn-wide' was trained on fashion-mnist");
  ExpectError("infer --dataset fashion-mnist", 2, "was trained on mnist");
}

// The committed Fashion-MNIST model: at least 90 % int8 test accuracy on all 10,000 test
// images, and bit-exact on the TPU.
TEST_F(NnCliTest, CommittedFashionModelReachesNinetyPercentAndRunsBitExact) {
  if (!HaveFashion()) GTEST_SKIP() << "no Fashion-MNIST (scripts/install-deps installs it)";
  const std::string model = TPUSIM_SOURCE_DIR "/models/fashion";
  const Outcome i =
      Run("infer --model " + model + " --backend cpu-int8 --images 10000 --json " + P("i.json"));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_GE(nlohmann::json::parse(Slurp(P("i.json")))["accuracy"].get<double>(), 0.90);
  const Outcome r = Run("run --model " + model + " --images 16 --batch 16 --config small-16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("bit-exact  yes"), std::string::npos) << r.out;
}

TEST_F(NnCliTest, DataSetErrorsSayWhatToDo) {
  ExpectError("train --dataset cifar --out " + P("x"), 2, "unknown data set 'cifar'");
  ExpectError("train --arch huge --out " + P("x"), 2, "unknown --arch 'huge'");
  ExpectError("train --dataset fashion-mnist --data " + P("nodata") + " --out " + P("x"), 2,
              "no Fashion-MNIST there");
  EXPECT_FALSE(std::filesystem::exists(P("x")));
}

// tpusim import: a model folder that the other commands run; bad files are one clear line,
// exit 2, and no folder.
TEST_F(NnCliTest, ImportWritesAModelAndRefusesBadFiles) {
  const std::string onnx = TPUSIM_SOURCE_DIR "/models/onnx/torch_cnn.onnx";
  const Outcome ok = Run("import " + onnx + " --out " + P("t"));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("dwconv1    depthwise_conv2d 16 x 16 x 16     relu6"), std::string::npos)
      << ok.out;
  EXPECT_NE(ok.out.find("next: tpusim quantize --model"), std::string::npos) << ok.out;
  const nn::Model m = nn::LoadModel(P("t"));
  EXPECT_EQ(m.name, "torch_cnn");
  EXPECT_FALSE(m.quantized);
  if (HaveMnist()) {
    const Outcome inf = Run("infer --model " + P("t") + " --backend cpu-fp32 --images 500");
    EXPECT_EQ(inf.exit_code, 0) << inf.err;
  }
  {
    std::ofstream(P("text.onnx")) << "this is not a model\n";
    std::ifstream in(onnx, std::ios::binary);
    const std::string whole((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(P("cut.onnx"), std::ios::binary) << whole.substr(0, whole.size() - 999);
  }
  for (const char* bad : {"text.onnx", "cut.onnx"}) {
    ExpectError("import " + P(bad) + " --out " + P("bad"), 2, P(bad) + ": ");
    EXPECT_FALSE(std::filesystem::exists(P("bad")));
  }
  ExpectError("import " + P("none.onnx") + " --out " + P("bad"), 2, "cannot open");
  ExpectError("import " + onnx + " --out " + P("bad") + " --dataset cifar", 2,
              "unknown data set 'cifar'");
  EXPECT_FALSE(std::filesystem::exists(P("bad")));
}

}  // namespace
}  // namespace tpu
