// `tpusim train`: fp32 training of the MNIST CNN (see nn_commands.h).
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "host/cli/nn_commands.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/data/mnist.h"
#include "host/nn/trainer.h"

namespace tpu::cli {
namespace {

struct TrainArgs {
  std::string data, out, dataset = "mnist", arch = "lenet5";
  nn::TrainOptions opt;
  int64_t limit = 0;
  bool quiet = false;
};

void Run(const TrainArgs& a) {
  CheckOutputFolder(a.out, nn::kModelFolder);  // before the work, not after it
  if (a.opt.epochs < 1 || a.opt.batch < 1 || a.opt.threads < 1 || !(a.opt.learning_rate > 0)) {
    throw UsageError("--epochs, --batch and --threads must be at least 1 and --lr positive");
  }
  const data::Dataset dataset = data::ParseDataset(a.dataset);
  if (a.arch != "lenet5" && a.arch != "wide") {
    throw UsageError("unknown --arch '" + a.arch + "'; use lenet5 or wide");
  }
  const std::string dir = data::FindDatasetDir(dataset, a.data);
  const data::MnistSet train = data::LoadMnist(dir, /*train=*/true, a.limit);
  const data::MnistSet test = data::LoadMnist(dir, /*train=*/false);
  nn::Model model = a.arch == "wide" ? nn::MakeWideCnn(a.opt.seed) : nn::MakeLenet5(a.opt.seed);
  model.dataset = data::DatasetName(dataset);
  nn::AdamState adam = nn::AdamState::For(model);
  if (!a.quiet) {
    std::cout << fmt::format(
        "training {} ({} parameters) on {} images from {}, {} epochs, "
        "batch {}, Adam lr {}, seed {}, {} thread(s)\n",
        model.name, model.ParamCount(), train.count, dir, a.opt.epochs, a.opt.batch,
        a.opt.learning_rate, a.opt.seed, a.opt.threads);
  }
  const auto start = std::chrono::steady_clock::now();
  double test_acc = 0;
  for (int e = 1; e <= a.opt.epochs; ++e) {
    ProgressBar bar(fmt::format("epoch {}/{}", e, a.opt.epochs), !a.quiet);
    nn::TrainOptions o = a.opt;
    o.progress = [&bar](int, double f, double loss, double acc) {
      bar.Update(f, fmt::format("loss {:.4f} acc {:.2f} %", loss, 100 * acc));
    };
    const nn::EpochResult r = nn::TrainEpoch(&model, train, e, o, &adam);
    bar.Finish();
    test_acc = nn::EvaluateFp32(model, test, a.opt.threads);
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!a.quiet) {
      std::cout << fmt::format(
          "epoch {}/{}: loss {:.4f}, train accuracy {:.2f} %, test accuracy {:.2f} %, "
          "{:.1f} s (total {:.1f} s)\n",
          e, a.opt.epochs, r.loss, 100 * r.train_accuracy, 100 * test_acc, r.seconds, total);
    }
  }
  nn::SaveModel(model, a.out);
  if (!a.quiet) {
    std::cout << fmt::format(
        "wrote {} (fp32, test accuracy {:.2f} %); quantize it with "
        "tpusim quantize --model {} --out DIR\n",
        a.out, 100 * test_acc, a.out);
  }
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train the LeNet-5-like MNIST CNN in fp32 (Eigen, Adam, both cores).");
  cmd->footer(R"(
Deterministic for a given --seed and --threads. Prints a progress bar per epoch and the
test accuracy after each. MNIST is found through --data, $TPUSIM_DATA, ../shared/data/mnist
or data/mnist (scripts/fetch-mnist downloads it).

Examples:
  tpusim train --epochs 8 --out my-lenet5
  tpusim train --dataset fashion-mnist --arch wide --epochs 15 --out my-fashion)");
  cmd->add_option("--out", a->out, "model folder to write")->required();
  cmd->add_option("--data", a->data, "folder with the data set's four IDX files (.gz or not)");
  cmd->add_option("--dataset", a->dataset,
                  "mnist or fashion-mnist (Debian's dataset-fashion-mnist)")
      ->capture_default_str();
  cmd->add_option("--arch", a->arch,
                  "lenet5 (81,194 parameters) or wide (conv 16 and 32, dense 128: for "
                  "Fashion-MNIST)")
      ->capture_default_str();
  cmd->add_option("--epochs", a->opt.epochs, "passes over the training set")->capture_default_str();
  cmd->add_option("--batch", a->opt.batch, "images per step")->capture_default_str();
  cmd->add_option("--lr", a->opt.learning_rate, "Adam learning rate")->capture_default_str();
  cmd->add_option("--seed", a->opt.seed, "initial weights and shuffling")->capture_default_str();
  cmd->add_option("--threads", a->opt.threads, "threads (data parallel)")->capture_default_str();
  cmd->add_option("--limit", a->limit, "train on the first N images only (0: all 60,000)");
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
