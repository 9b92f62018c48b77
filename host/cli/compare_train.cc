// See compare_train.h.
#include "host/cli/compare_train.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/text.h"
#include "host/cuda/cuda_backend.h"
#include "host/data/mnist.h"
#include "host/engine/engine_factory.h"
#include "host/nn/trainer.h"
#include "host/report/energy.h"
#include "host/train/dense_model.h"
#include "host/train/step_emit.h"

namespace tpu::cli {
namespace {

struct TrainRow {
  std::string backend;
  std::vector<double> seconds;  // per epoch: measured, or simulated at the preset's clock
  std::vector<double> wall;     // per epoch: the wall time of the run (the simulation's)
  std::vector<double> loss, test_accuracy;
  std::vector<std::optional<double>> energy_j;  // per epoch
  std::string energy_source, note;
  int64_t images_per_epoch = 0;
};

TrainRow CpuFp32(const CompareTrainArgs& a, const data::MnistSet& train,
                 const data::MnistSet& test) {
  TrainRow r{"cpu-fp32", {}, {}, {}, {}, {}, "", "", train.count};
  nn::Model model = nn::MakeArch(a.arch, a.seed);
  nn::AdamState adam = nn::AdamState::For(model);
  nn::TrainOptions o;
  o.batch = a.batch;
  o.seed = a.seed;
  o.threads = a.threads;
  for (int e = 1; e <= a.epochs; ++e) {
    const auto e0 = RaplJoules();
    const nn::EpochResult res = nn::TrainEpoch(&model, train, e, o, &adam);
    r.energy_j.push_back(RaplJoulesSince(e0));  // the training alone
    r.seconds.push_back(res.seconds);
    r.wall.push_back(res.seconds);
    r.loss.push_back(res.loss);
    r.test_accuracy.push_back(nn::EvaluateFp32(model, test, a.threads));
  }
  r.energy_source = r.energy_j.back() ? "measured (RAPL package)" : "unavailable (no RAPL here)";
  r.note = fmt::format(
      "Eigen, {} threads, measured; Keras's Adam; every image (the last batch "
      "short)",
      a.threads);
  return r;
}

// The chip's arithmetic: on the CPU reference (`config` empty) or on the chip (fast engine).
TrainRow Bf16(const CompareTrainArgs& a, const std::string& preset, const data::MnistSet& train,
              const data::MnistSet& test, const report::EnergyTable& table) {
  const config::TpuConfig c = config::LoadConfig(preset.empty() ? "tpu-v2" : preset);
  nn::Model model = nn::MakeArch(a.arch, a.seed);
  const train::TrainNet net = train::TrainNetOf(model);
  const train::Optimizer opt =
      train::Optimizer::Parse(a.optimizer, a.optimizer == "sgd" ? 0.0625 : 1e-3);
  train::DenseState state = train::FreshState(model, opt);
  std::unique_ptr<engine::ChipEngine> chip;
  std::unique_ptr<train::ChipTrainer> trainer;
  if (!preset.empty()) {
    chip = engine::MakeChipEngine(engine::EngineKind::kFast, c, {});
    trainer = std::make_unique<train::ChipTrainer>(
        chip.get(), net.Compile(a.batch, opt, c, train::TrainingCores(c, 0)), opt);
    trainer->Start(state);
  }
  TrainRow r{preset.empty() ? "cpu-bf16" : "tpu " + preset, {}, {}, {}, {}, {}, "", "",
             train::StepsOfEpoch(train, a.batch) * a.batch};
  train::ChipEpochOptions o;
  o.batch = a.batch;
  o.seed = a.seed;
  for (int e = 1; e <= a.epochs; ++e) {
    train::ChipEpochResult done;
    const auto e0 = RaplJoules();
    if (trainer) {
      train::TrainChipEpoch(trainer.get(), net, train, e, o, &state, &done);
      state = trainer->State();
      r.seconds.push_back(static_cast<double>(done.cycles) / (c.clock_mhz * 1e6));
      r.energy_j.push_back(report::ComputeEnergy(done.counters, c, table).Total() * 1e-12);
    } else {
      train::TrainReferenceEpoch(net, c.array_dim, opt, train, e, o, &state, &done);
      r.seconds.push_back(done.seconds);
      r.energy_j.push_back(RaplJoulesSince(e0));
    }
    r.wall.push_back(done.seconds);
    r.loss.push_back(done.Loss());
    train::SetDenseWeights(state, &model);
    r.test_accuracy.push_back(nn::EvaluateFp32(model, test, a.threads));
  }
  if (trainer) {
    r.energy_source = "modelled (the chip's event counts x " + table.name + ")";
    r.note = fmt::format("simulated at {} MHz, {}, fast engine; full batches", c.clock_mhz,
                         trainer->Cores() > 1
                             ? fmt::format("{} cores of {} images each, their gradients summed",
                                           trainer->Cores(), a.batch / trainer->Cores())
                             : "one core");
  } else {
    r.energy_source = r.energy_j.back() ? "measured (RAPL package)" : "unavailable (no RAPL here)";
    r.note = "the chip's arithmetic on the CPU (one thread), measured; full batches";
  }
  return r;
}

std::string Cell(const std::optional<double>& j) {
  return j ? fmt::format("{:.3g} J", *j) : std::string("n/a");
}

std::string Table(const std::vector<TrainRow>& rows, bool markdown) {
  std::string out =
      markdown
          ? "| backend | epoch | time per epoch | images/s | loss | test accuracy "
            "| energy per epoch | simulation's wall time |\n| --- | ---: | ---: "
            "| ---: | ---: | ---: | ---: | ---: |\n"
          : fmt::format("{:<12} {:>5} {:>14} {:>12} {:>7} {:>9} {:>12} {:>10}\n", "backend",
                        "epoch", "time/epoch", "images/s", "loss", "test acc", "energy", "wall");
  for (const TrainRow& r : rows)
    for (size_t e = 0; e < r.seconds.size(); ++e) {
      const std::string ips = Grouped(static_cast<int64_t>(r.images_per_epoch / r.seconds[e]));
      const std::string t = fmt::format("{:.4g} s", r.seconds[e]);
      const std::string acc = fmt::format("{:.2f} %", 100 * r.test_accuracy[e]);
      const std::string wall =
          r.backend.rfind("tpu", 0) == 0 ? fmt::format("{:.1f} s", r.wall[e]) : "";
      out += markdown
                 ? fmt::format("| {} | {} | {} | {} | {:.4f} | {} | {} | {} |\n", r.backend, e + 1,
                               t, ips, r.loss[e], acc, Cell(r.energy_j[e]), wall)
                 : fmt::format("{:<12} {:>5} {:>14} {:>12} {:>7.4f} {:>9} {:>12} {:>10}\n",
                               r.backend, e + 1, t, ips, r.loss[e], acc, Cell(r.energy_j[e]), wall);
    }
  out += markdown ? "\n" : "";
  for (const TrainRow& r : rows)
    out += fmt::format("{}{}: {}; energy {}\n", markdown ? "- " : "", r.backend, r.note,
                       r.energy_source);
  return out;
}

nlohmann::json Json(const std::vector<TrainRow>& rows, const CompareTrainArgs& a) {
  nlohmann::json j = {{"model", a.arch},
                      {"epochs", a.epochs},
                      {"batch", a.batch},
                      {"optimizer", a.optimizer},
                      {"rows", nlohmann::json::array()}};
  for (const TrainRow& r : rows) {
    nlohmann::json e = nlohmann::json::array();
    for (size_t i = 0; i < r.seconds.size(); ++i)
      e.push_back({{"seconds", r.seconds[i]},
                   {"wall_seconds", r.wall[i]},
                   {"loss", r.loss[i]},
                   {"test_accuracy", r.test_accuracy[i]},
                   {"energy_j", r.energy_j[i] ? nlohmann::json(*r.energy_j[i]) : nlohmann::json()},
                   {"images", r.images_per_epoch}});
    j["rows"].push_back({{"backend", r.backend},
                         {"epochs", e},
                         {"energy_source", r.energy_source},
                         {"note", r.note}});
  }
  return j;
}

}  // namespace

std::optional<double> RaplJoules() {
  std::ifstream f("/sys/class/powercap/intel-rapl:0/energy_uj");
  double uj = 0;
  if (!(f >> uj)) return std::nullopt;
  return uj * 1e-6;
}

std::optional<double> RaplJoulesSince(std::optional<double> before) {
  const std::optional<double> now = RaplJoules();
  if (before && now && *now > *before) return *now - *before;
  return std::nullopt;
}

void CompareTrain(const CompareTrainArgs& a) {
  if (a.epochs < 1 || a.batch < 1 || a.threads < 1)
    throw UsageError("--epochs, --batch and --threads must be at least 1");
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  for (const std::string& c : a.configs) {  // every preset checked before the data is read
    train::TrainNetOf(nn::MakeArch(a.arch, a.seed))
        .Compile(a.batch, train::Optimizer::Parse(a.optimizer, 1e-3), config::LoadConfig(c));
  }
  const data::Dataset dataset = data::ParseDataset(a.dataset);
  const std::string dir = data::FindDatasetDir(dataset, a.data);
  const data::MnistSet train = data::LoadMnist(dir, /*train=*/true, a.limit);
  const data::MnistSet test = data::LoadMnist(dir, /*train=*/false);
  std::vector<TrainRow> rows;
  if (!a.quiet) std::cerr << "compare --train: cpu-fp32 ...\n";
  rows.push_back(CpuFp32(a, train, test));
  if (!a.quiet) std::cerr << "compare --train: cpu-bf16 ...\n";
  rows.push_back(Bf16(a, "", train, test, table));
  for (const std::string& c : a.configs) {
    if (!a.quiet) std::cerr << "compare --train: tpu " << c << " ...\n";
    rows.push_back(Bf16(a, c, train, test, table));
  }
  std::string why;
  const std::string gpu = !cuda::Built() ? "this build has no CUDA backends (nvcc was not found)"
                          : !cuda::Available(&why) ? "no usable NVIDIA GPU here (" + why + ")"
                                                   : "the CUDA backends do not train yet";
  const std::string head = fmt::format(
      "training {} on {} {} images, {} epoch{}, batch {}, {}; GPU: {}, so no GPU row\n\n", a.arch,
      Grouped(train.count), a.dataset, a.epochs, a.epochs == 1 ? "" : "s", a.batch, a.optimizer,
      gpu);
  if (!a.quiet) std::cout << head << Table(rows, false);
  if (!a.markdown.empty()) WriteFileAtomically(a.markdown, head + Table(rows, true));
  if (!a.json.empty()) WriteFileAtomically(a.json, Json(rows, a).dump(2) + "\n");
}

}  // namespace tpu::cli
