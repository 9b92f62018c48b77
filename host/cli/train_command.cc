// `tpusim train`: fp32 training of the MNIST CNN (see nn_commands.h).
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/common/text.h"
#include "host/data/mnist.h"
#include "host/engine/timeline.h"
#include "host/nn/ops/op.h"
#include "host/nn/trainer.h"
#include "host/report/energy.h"
#include "host/report/exec_report.h"
#include "host/report/program_bound.h"
#include "host/report/run_report.h"
#include "host/train/checkpoint.h"
#include "host/train/dense_model.h"
#include "host/train/step_emit.h"

namespace tpu::cli {
namespace {

struct TrainArgs {
  std::string data, out, dataset = "mnist", arch, model, optimizer = "adam";
  nn::TrainOptions opt;
  int64_t limit = 0;
  bool quiet = false, verify = false;
  std::string json, gradients, timeline;
  std::string energy = report::DefaultEnergyTablePath();
  int64_t checkpoint_every = 100, timeline_step = 2;
  int cores = 0;  // the cores a step's batch is split across (0: the chip's, at most 2)
  std::string state_in = "auto";  // --state-in: where a graph's state is (train::StateAt)
  ChipOptions chip;
  CLI::Option* config_option = nullptr;
  CLI::Option* lr_option = nullptr;
  CLI::Option* energy_option = nullptr;
  CLI::Option* step_option = nullptr;
};

// Why the CPU trainer does not take layer l of a model folder ("" where it does); `any_data`
// (--timing-only): the last layer's classes need not be the data sets'.
std::string Untrained(const nn::Layer& l, bool last, bool any_data) {
  if (l.quantized) return "it is quantized: train the float32 folder it was quantized from";
  if (nn::ops::Op(l.type).backward == nullptr)
    return fmt::format("{} layers are not trained", nn::ops::Op(l.type).name);
  if (last && (l.type != nn::LayerType::kDense || l.activation != nn::Activation::kSoftmax))
    return "the last layer is a dense layer of the classes with softmax";
  if (last && !any_data && l.out.c != data::kClasses)
    return fmt::format(
        "the last layer is a dense layer of the data sets' {} classes with softmax (any "
        "other count: time a step with --timing-only)",
        data::kClasses);
  return "";
}

// The model folder --model names, checked against what the trainers take: the data sets'
// 32 x 32 x 1 images in, the classes out (any input and classes with `any_data`: a step
// timed on synthetic batches), every layer one with a backward pass.
nn::Model LoadStartingModel(const std::string& dir, bool any_data) {
  nn::Model m = nn::LoadModel(dir);
  const nn::Shape3 image{data::kPaddedSide, data::kPaddedSide, 1};
  if (!any_data && !(m.input == image)) {
    throw UsageError(fmt::format(
        "--model {}: its input is {} x {} x {}; the data sets' images are {} x {} x 1 (28 x 28 "
        "padded by 2): export the network for an input of 1 x 1 x {} x {}, or time a step "
        "of it on synthetic images with --timing-only",
        dir, m.input.h, m.input.w, m.input.c, image.h, image.w, image.h, image.w));
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const std::string why = Untrained(m.layers[i], i + 1 == m.layers.size(), any_data);
    if (!why.empty()) {
      throw UsageError(fmt::format("--model {}: layer '{}' ({}): {}", dir, m.layers[i].name,
                                   m.layers[i].TypeName(), why));
    }
  }
  return m;
}

nn::Model MakeModel(const TrainArgs& a) {
  return a.model.empty() ? nn::MakeArch(a.arch, a.opt.seed)
                         : LoadStartingModel(a.model, a.chip.timing_only);
}

// The modelled energy of an epoch's steps on the chip (their counted events x `table`), J.
double EpochJoules(const train::ChipEpochResult& r, const config::TpuConfig& c,
                   const report::EnergyTable& table) {
  return report::ComputeEnergy(r.counters, c, table).Total() * 1e-12;
}

// Two lines per epoch on the chip: what it learnt and what it cost (`bound`: the step
// program's attainable bound; `joules`: EpochJoules with `table`).
std::string ChipEpochLine(const TrainArgs& a, const config::TpuConfig& c, int e,
                          const train::ChipEpochResult& r, double test_acc,
                          const report::ProgramBound& bound, const report::EnergyTable& table,
                          double joules) {
  if (r.steps == 0)
    return fmt::format("epoch {}/{}: no steps (fewer images than --batch)\n", e, a.opt.epochs);
  const double sim_s = static_cast<double>(r.cycles) / (c.clock_mhz * 1e6);
  return fmt::format(
      "epoch {}/{}: loss {:.4f}, train accuracy {:.2f} %, test accuracy {:.2f} %\n"
      "  chip: {} step{} of {}, {} cycles a step ({:.2f} x its bound, {} binds), {:.4f} s at {} "
      "MHz ({} images/s), {:.3g} J ({} µJ an image, {}){}; wall {:.1f} s\n",
      e, a.opt.epochs, r.Loss(), 100 * r.Accuracy(), 100 * test_acc, Grouped(r.steps),
      r.steps == 1 ? "" : "s", a.opt.batch,
      Grouped(r.steps ? static_cast<int64_t>(r.cycles) / r.steps : 0),
      r.steps ? static_cast<double>(r.cycles) / static_cast<double>(r.steps) / bound.Cycles() : 0,
      bound.Binds(), sim_s, c.clock_mhz,
      Grouped(sim_s > 0 ? static_cast<int64_t>(static_cast<double>(r.images) / sim_s) : 0), joules,
      Grouped(static_cast<int64_t>(joules * 1e6 / static_cast<double>(r.images))), table.name,
      a.verify ? fmt::format(", {} steps bit-exact with the CPU reference", r.verified) : "",
      r.seconds);
}

// A pass's name with the model's layer names ("layer 1 forward" -> "fc1 forward").
std::string PassName(const std::string& pass, const nn::Model& model) {
  if (pass.rfind("layer ", 0) != 0) return pass;
  const size_t end = pass.find(' ', 6);
  int index = std::stoi(pass.substr(6, end - 6));
  for (const nn::Layer& l : model.layers)
    if (l.type == nn::LayerType::kDense && --index == 0) return l.name + pass.substr(end);
  return pass;
}

// Each pass of the step, over the steps run: its counters (cycles, the matrix unit's use,
// the vector unit's and host DMA's busy cycles, traffic), its useful MACs (the cycle
// categories: report::RunRow's), its own attainable bound and what binds it (the bound of
// its instructions alone), its modelled energy (its counted events x the table).
struct PassRow {
  report::RunRow row;  // name, useful MACs, counters, energy
  report::ProgramBound bound;
};

// The instructions of core 0's step, its parts' too.
size_t StepWords(const train::DensePrograms& p) {
  size_t words = p.step.programs[0].words.size();
  for (const engine::Executable& part : p.parts[0][1]) words += part.programs[0].words.size();
  return words;
}

// The step's passes with the model's layer names, in DensePrograms::pass_names' order.
std::vector<std::string> PassNames(const train::ChipTrainer& t, const nn::Model& model) {
  std::vector<std::string> names;
  for (const std::string& p : t.Programs().pass_names) names.push_back(PassName(p, model));
  return names;
}

std::vector<PassRow> PassRows(const train::ChipTrainer& t, const config::TpuConfig& config,
                              const nn::Model& model, const report::EnergyTable& table) {
  const train::DensePrograms& p = t.Programs();
  const std::vector<std::string> names = PassNames(t, model);
  const std::vector<int32_t> pass_of = p.WholePassOf();
  const isa::Program step = p.WholeStep().front();
  std::vector<PassRow> rows;
  for (size_t i = 0; i < p.pass_names.size(); ++i) {
    isa::Program slice;
    for (size_t w = 0; w < pass_of.size(); ++w)
      if (pass_of[w] == static_cast<int32_t>(i)) slice.words.push_back(step.words[w]);
    report::RunRow row;
    row.name = names[i];
    row.macs = p.pass_macs[i] * static_cast<int64_t>(t.Steps());
    row.counters = t.PassCounters()[i];
    row.energy = report::ComputeEnergy(row.counters, config, table);
    rows.push_back({row, report::BoundPrograms({slice}, config)});
  }
  return rows;
}

// `cores`: the cores a step takes (the rows are core 0's).
std::string PassTable(const std::vector<PassRow>& rows, uint64_t steps, const config::TpuConfig& c,
                      int cores) {
  uint64_t total = 0;
  for (const PassRow& r : rows) total += r.row.Cycles();
  std::string out = fmt::format("{:<22} {:>7} {:>6} {:>5} {:>6} {:>6} {:>6} {:>8} {:>18} {:>9}\n",
                                "pass (a step)", "cycles", "share", "MXU", "useful", "vector",
                                "host", "traffic", "bound (binds)", "energy");
  const double s = static_cast<double>(steps);
  const double units = static_cast<double>(c.array_dim) * c.array_dim * c.mxus_per_core;
  for (const PassRow& p : rows) {
    const report::RunRow& r = p.row;
    const double cycles = static_cast<double>(r.Cycles());
    auto share = [cycles, units](double macs) {
      return cycles ? 100 * macs / (cycles * units) : 0;
    };
    out += fmt::format(
        "{:<22} {:>7} {:>5.1f}% {:>4.0f}% {:>5.0f}% {:>6} {:>6} {:>5} kB {:>18} {:>6.1f} µJ\n",
        r.name, Grouped(static_cast<int64_t>(cycles / s + 0.5)), 100.0 * cycles / total,
        share(static_cast<double>(r.counters.macs)), share(static_cast<double>(r.macs)),
        Grouped(static_cast<int64_t>(r.counters.busy_vector / steps)),
        Grouped(static_cast<int64_t>(r.counters.busy_host_dma / steps)),
        Grouped(static_cast<int64_t>(static_cast<double>(r.DramBytes()) / s / 1000 + 0.5)),
        fmt::format("{} ({})", Grouped(static_cast<int64_t>(p.bound.Cycles() + 0.5)),
                    p.bound.Binds()),
        r.energy.Total() * 1e-6 / s);
  }
  out +=
      "(MXU: the MACs the array issued, of its peak; useful: the pass's own; host: host "
      "DMA busy cycles; traffic: host and weight memory)\n";
  if (cores > 1) {
    out += fmt::format(
        "(core 0's passes: each of the {} cores runs the same on its share of the batch, so the "
        "epoch's energy is theirs together)\n",
        cores);
  }
  return out;
}

nlohmann::json PassJson(const std::vector<PassRow>& rows, uint64_t steps,
                        const config::TpuConfig& c) {
  nlohmann::json j = nlohmann::json::array();
  for (const PassRow& p : rows) {
    const report::RunRow& r = p.row;
    nlohmann::json categories = nlohmann::json::object();
    for (const auto& [k, v] : r.Categories(c.array_dim, c.mxus_per_core)) categories[k] = v;
    j.push_back({{"pass", r.name},
                 {"steps", steps},
                 {"useful_macs", r.macs},
                 {"counters", report::CountersJson(r.counters)},
                 {"tpu_v1_categories", categories},
                 {"dram_bytes", r.DramBytes()},
                 {"bound", p.bound.ToJson()},
                 {"energy_pj", r.energy.Total()},
                 {"energy_components_pj", r.energy.ToJson()}});
  }
  return j;
}

// What makes a run on the chip this one, for its checkpoint (not --epochs: a finished run
// can be given more).
nlohmann::json RunSettings(const TrainArgs& a, const config::TpuConfig& c,
                           const train::TrainNet& net, const train::Optimizer& opt) {
  return {{"config", c.name},
          {"array_dim", c.array_dim},
          {"arch", a.arch},
          {"model", a.model},
          {"widths", net.Describe()},
          {"dataset", a.dataset},
          {"limit", a.limit},
          {"batch", a.opt.batch},
          {"seed", a.opt.seed},
          {"optimizer", opt.Name()},
          {"lr", opt.lr},
          {"cores", train::TrainingCores(c, a.cores)}};
}

nlohmann::json EpochJson(const train::ChipEpochResult& r, double test_acc, double clock_mhz,
                         double joules) {
  return {{"loss", r.Loss()},
          {"train_accuracy", r.Accuracy()},
          {"test_accuracy", test_acc},
          {"steps", r.steps},
          {"cycles", r.cycles},
          {"verified_steps", r.verified},
          {"seconds_simulated", static_cast<double>(r.cycles) / (clock_mhz * 1e6)},
          {"energy_j", joules},
          {"seconds_wall", r.seconds}};
}

// The checkpoint folder of a run writing `out`: OUT.checkpoint beside it.
std::string CheckpointDirOf(std::string out) {
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out + ".checkpoint";
}

// The values of each tensor the model's layers keep (KeptOf), for its checkpoint.
std::vector<int64_t> KeptSizes(const nn::Model& m) {
  std::vector<int64_t> sizes;
  for (const auto& t : train::KeptOf(m)) sizes.push_back(static_cast<int64_t>(t.size()));
  return sizes;
}

// A run resuming from the checkpoint `at` in `dir`: refused with --gradients past the first
// step; its line, unless --quiet.
void Resuming(const TrainArgs& a, const std::string& dir, const train::Checkpoint& at) {
  if (!a.gradients.empty() && at.state.step > 0) {
    throw UsageError("--gradients writes the first step's, but the run resumes from " + dir +
                     " after step " + std::to_string(at.state.step) +
                     ": remove that folder to start afresh");
  }
  if (!a.quiet) {
    std::cout << fmt::format("resuming from {}: epoch {}, {} steps done ({} in all)\n", dir,
                             at.epoch, at.done.steps, at.state.step);
  }
}

// The chip, its trainer and where the run stands (a checkpoint's, or the start).
struct ChipRun {
  config::TpuConfig config;
  train::TrainNet net;
  train::Optimizer opt;
  std::unique_ptr<engine::ChipEngine> chip;
  std::unique_ptr<train::ChipTrainer> trainer;
  train::Checkpoint at;
  std::string checkpoint_dir;
  nn::Model initial;  // the weights before the first step (--gradients)
};

// --state-in's place of a graph's state (UsageError for another value, or for a network the
// graph step does not train).
train::StateAt StateAtOf(const TrainArgs& a, const train::TrainNet& net) {
  static const std::map<std::string, train::StateAt> kAt = {
      {"auto", train::StateAt::kAny},
      {"buffer", train::StateAt::kBuffer},
      {"hbm", train::StateAt::kHbm},
      {"hbm-with-f", train::StateAt::kHbmWithF},
      {"hbm-with-maps", train::StateAt::kHbmWithMaps}};
  const auto it = kAt.find(a.state_in);
  if (it == kAt.end()) {
    throw UsageError(fmt::format(
        "--state-in {}: use auto, buffer, hbm, hbm-with-f or hbm-with-maps (docs/training.md, "
        "\"The state in HBM\")",
        a.state_in));
  }
  if (it->second != train::StateAt::kAny && net.kind != train::TrainNet::Kind::kGraph) {
    throw UsageError(
        "--state-in is a graph's (--arch residual, or --model): the perceptron's and the CNN's "
        "steps keep their state in the unified buffer");
  }
  return it->second;
}

// The chip and the trainer of `model`'s step on it, its state not yet loaded.
ChipRun MakeChipRun(const TrainArgs& a, const nn::Model& model) {
  ChipRun r;
  r.config = ResolveConfig(a.chip);
  r.net = train::TrainNetOf(model);
  r.net.state_at = StateAtOf(a, r.net);
  r.opt = train::Optimizer::Parse(a.optimizer, a.lr_option->count()
                                                   ? a.opt.learning_rate
                                                   : (a.optimizer == "sgd" ? 0.0625 : 1e-3));
  r.chip = engine::MakeChipEngine(ResolveEngine(a.chip), r.config, EngineOptionsFrom(a.chip));
  r.trainer = std::make_unique<train::ChipTrainer>(
      r.chip.get(),
      r.net.Compile(a.opt.batch, r.opt, r.config, train::TrainingCores(r.config, a.cores)), r.opt);
  return r;
}

// MakeChipRun's, with the state of the checkpoint beside --out where one is (else the
// model's) loaded.
ChipRun StartOnChip(const TrainArgs& a, const nn::Model& model) {
  ChipRun r = MakeChipRun(a, model);
  r.checkpoint_dir = CheckpointDirOf(a.out);
  r.initial = model;
  r.at.run = RunSettings(a, r.config, r.net, r.opt);
  if (auto c = train::ReadCheckpoint(r.checkpoint_dir, r.at.run, r.net.Params(), r.opt,
                                     KeptSizes(model))) {
    r.at = std::move(*c);
    Resuming(a, r.checkpoint_dir, r.at);
  } else {
    r.at.state = train::FreshState(model, r.opt);
    r.at.report = {{"config", r.config.name},
                   {"engine", r.chip->Name()},
                   {"model", model.name},
                   {"widths", r.net.Describe()},
                   {"optimizer", r.opt.Name()},
                   {"lr", r.opt.lr},
                   {"batch", a.opt.batch},
                   {"cores", r.trainer->Cores()},
                   {"passes", r.trainer->Passes()},
                   {"epochs", nlohmann::json::array()},
                   {"state_in_hbm", r.trainer->Programs().state_in_hbm},
                   {"in_hbm_too", r.trainer->Programs().in_hbm_too}};
  }
  r.trainer->Start(r.at.state);
  return r;
}

// One epoch (or what is left of it), checkpointed as it goes; the state after it.
train::ChipEpochResult ChipEpoch(const TrainArgs& a, ChipRun& r, const data::MnistSet& train,
                                 int e) {
  ProgressBar bar(fmt::format("epoch {}/{}", e, a.opt.epochs), !a.quiet);
  train::ChipEpochOptions o;
  o.batch = a.opt.batch;
  o.seed = a.opt.seed;
  o.verify = a.verify;
  o.progress = [&bar](double f, double loss, double acc) {
    bar.Update(f, fmt::format("loss {:.4f} acc {:.2f} %", loss, 100 * acc));
  };
  o.checkpoint_every = a.checkpoint_every;
  if (!a.gradients.empty()) {
    o.after_step = [&](const std::vector<int64_t>& images, const train::StepOut& out) {
      if (r.trainer->StepCount() != 1) return;
      train::WriteGradients(a.gradients, r.initial, r.trainer->Gradients(), out.mean, images);
      if (!a.quiet) std::cout << "wrote " << a.gradients << " (the first step's gradients)\n";
    };
  }
  o.checkpoint = [&](const train::ChipEpochResult& done) {
    train::WriteCheckpoint(r.checkpoint_dir, {r.at.run, e, done, r.trainer->State(), r.at.report});
  };
  train::ChipEpochResult done = e == r.at.epoch ? r.at.done : train::ChipEpochResult{};
  train::TrainChipEpoch(r.trainer.get(), r.net, train, e, o, &r.at.state, &done);
  bar.Finish();
  return done;
}

// --timeline: a timeline that records step --timeline-step of the run, whose steps are 1 to
// `last` (`steps`: what they are), or nullptr without --timeline. Throws UsageError when the
// run does not reach that step or a resumed run is past it.
std::unique_ptr<engine::Timeline> TraceStep(const TrainArgs& a, ChipRun& r, const nn::Model& model,
                                            int64_t last, const std::string& steps) {
  if (a.timeline.empty()) return nullptr;
  if (a.timeline_step < 1 || a.timeline_step > last) {
    throw UsageError(fmt::format("--timeline-step {}: the run has steps 1 to {} ({})",
                                 a.timeline_step, last, steps));
  }
  if (a.timeline_step <= r.at.state.step) {
    throw UsageError(fmt::format(
        "--timeline-step {}: the run resumes from {} after step {}; give a later step, or "
        "remove that folder to start afresh",
        a.timeline_step, r.checkpoint_dir, r.at.state.step));
  }
  auto t = std::make_unique<engine::Timeline>(r.config.clock_mhz, r.config.mxus_per_core,
                                              /*vector_unit=*/true);
  t->NameLayerTrack("passes (forward, loss, backward, update)");
  r.trainer->TraceStep(a.timeline_step, t.get(), PassNames(*r.trainer, model));
  return t;
}

void WriteTimeline(const TrainArgs& a, const ChipRun& r, engine::Timeline* t) {
  if (!t) return;
  t->Note("engine", r.chip->Name());
  t->Note("config", r.config.ToJson());
  t->Note("step", a.timeline_step);
  t->Write(a.timeline);
  if (!a.quiet) {
    std::cout << fmt::format("wrote {} (step {}'s timeline: Perfetto, chrome://tracing)\n",
                             a.timeline, a.timeline_step);
  }
}

// Which of the chip's cores the run's steps take, in how many passes, and where the state is
// where not in the unified buffer, for its first line.
std::string CoresNote(const config::TpuConfig& c, const train::DensePrograms& p, int batch) {
  const int cores = p.cores, passes = p.passes;
  const std::string in =
      passes > 1 ? fmt::format(" in {} passes of {}", passes, batch / cores / passes) : "";
  const std::string too = p.in_hbm_too == "hbm-with-maps"
                              ? ", every layer's output, gradient and F too"
                              : (p.in_hbm_too == "hbm-with-f" ? ", each layer's F too" : "");
  const size_t parts = p.parts[0][1].size() + 1;
  const std::string hbm =
      (p.state_in_hbm ? fmt::format("; the weights and optimizer state in HBM{}", too) : "") +
      (parts > 1 ? fmt::format("; a step in {} programs (parts of whole passes)", parts) : "");
  if (cores > 1) {
    return fmt::format(" ({} cores, {} images each{}, the gradients summed{})", cores,
                       batch / cores, in, hbm);
  }
  if (passes > 1) return fmt::format(" ({} images{}, the gradients summed{})", batch, in, hbm);
  if (p.state_in_hbm) return fmt::format(" ({})", hbm.substr(2));
  return c.cores > 1 ? fmt::format(" (core 0 of its {})", c.cores) : "";
}

// Training on the chip (--config): the perceptron's steps as chip programs
// (host/train/dense_step.h), the weights in the chip between the steps; a checkpoint beside
// --out after every --checkpoint-every steps and every epoch, resumed by the same command.
void RunOnChip(const TrainArgs& a, nn::Model model, const data::MnistSet& train,
               const data::MnistSet& test, const report::EnergyTable& table) {
  ChipRun r = StartOnChip(a, model);
  const int64_t per_epoch = train::StepsOfEpoch(train, a.opt.batch);
  const std::unique_ptr<engine::Timeline> timeline = TraceStep(
      a, r, model, a.opt.epochs * per_epoch,
      fmt::format("{} epoch(s) of {} steps of {} images", a.opt.epochs, per_epoch, a.opt.batch));
  train::SetDenseWeights(r.at.state, &model);  // a resumed run's, should no epoch be left
  const report::ProgramBound bound =
      report::BoundPrograms(r.trainer->Programs().WholeStep(), r.config);
  if (!a.quiet) {
    std::cout << fmt::format(
        "training {} ({} parameters) on {}{}, {} engine: {} images, {} epochs, batch {}, {} lr "
        "{}, seed {}{}\n",
        model.name, Grouped(model.ParamCount()), r.config.name,
        CoresNote(r.config, r.trainer->Programs(), a.opt.batch), r.chip->Name(), train.count,
        a.opt.epochs, a.opt.batch, r.opt.Name(), r.opt.lr, a.opt.seed,
        a.verify ? ", checked step by step" : "");
  }
  for (int e = r.at.epoch; e <= a.opt.epochs; ++e) {
    const train::ChipEpochResult done = ChipEpoch(a, r, train, e);
    const train::DenseState now = r.trainer->State();
    if (a.verify && !(now == r.at.state)) {
      throw RuntimeError(
          fmt::format("epoch {}: the chip's weights differ from the CPU reference's "
                      "(the losses agreed): a bug, please report it",
                      e));
    }
    train::SetDenseWeights(now, &model);
    const double test_acc = nn::EvaluateFp32(model, test, a.opt.threads);
    const double joules = EpochJoules(done, r.config, table);
    if (!a.quiet) std::cout << ChipEpochLine(a, r.config, e, done, test_acc, bound, table, joules);
    r.at.report["epochs"].push_back(EpochJson(done, test_acc, r.config.clock_mhz, joules));
    train::WriteCheckpoint(r.checkpoint_dir, {r.at.run, e + 1, {}, now, r.at.report});
  }
  if (r.trainer->Steps() > 0) {
    const std::vector<PassRow> rows = PassRows(*r.trainer, r.config, model, table);
    if (!a.quiet)
      std::cout << "\n" << PassTable(rows, r.trainer->Steps(), r.config, r.trainer->Cores());
    r.at.report["passes"] = PassJson(rows, r.trainer->Steps(), r.config);
  }
  if (!a.json.empty() && r.trainer->Steps() > 0) {
    const auto& exe = r.trainer->Programs().step;
    r.at.report["step"] = report::ExecReportJson(r.trainer->LastStep(), r.config, exe.name,
                                                 StepWords(r.trainer->Programs()), &bound);
    WriteFileAtomically(a.json, r.at.report.dump(2) + "\n");
  }
  WriteTimeline(a, r, timeline.get());
  nn::SaveModel(model, a.out);
  RemoveOutputFolder(r.checkpoint_dir, train::kCheckpointFolder);
  if (!a.quiet) std::cout << fmt::format("wrote {} (fp32 master weights from the chip)\n", a.out);
}

// --gradients on the CPU: the first step's fp32 gradients, as the chip's are written.
void WriteCpuGradients(const TrainArgs& a, const nn::Model& model, const data::MnistSet& train) {
  double loss = 0;
  std::vector<int64_t> images;
  const nn::ParamSet g = nn::FirstStepGradients(model, train, a.opt, &loss, &images);
  std::vector<std::vector<float>> grads;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (!model.layers[i].HasWeights()) continue;
    grads.push_back(g.w[i]);
    grads.back().insert(grads.back().end(), g.b[i].begin(), g.b[i].end());
  }
  train::WriteGradients(a.gradients, model, grads, static_cast<float>(loss), images);
  if (!a.quiet) std::cout << "wrote " << a.gradients << " (the first step's gradients)\n";
}

// What makes a run on the CPU this one, for its checkpoint (not --epochs: a finished run can
// be given more). The threads a step takes are in it: the slices' sums are theirs.
nlohmann::json CpuRunSettings(const TrainArgs& a, const nn::Model& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const nn::Layer& l : m.layers) layers.push_back(l.name);
  return {{"config", "cpu-fp32"},
          {"arch", a.arch},
          {"model", a.model},
          {"widths", layers},
          {"dataset", a.dataset},
          {"limit", a.limit},
          {"batch", a.opt.batch},
          {"seed", a.opt.seed},
          {"optimizer", "adam"},
          {"lr", a.opt.learning_rate},
          {"threads", nn::TrainsByBatch(m) ? 1 : a.opt.threads}};
}

// The CPU trainer's state as a checkpoint holds it (the chip's layout): each weighted layer's
// weights then its bias, Adam's two moments in the same layout, its step count, the layers'
// kept tensors.
train::DenseState CpuState(const nn::Model& m, const nn::AdamState& adam) {
  train::DenseState s;
  s.w = train::DenseWeightsOf(m);
  s.kept = train::KeptOf(m);
  s.slots.resize(2);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    if (!m.layers[i].HasWeights()) continue;
    for (size_t k = 0; k < 2; ++k) {
      std::vector<float> t = (k == 0 ? adam.m_w : adam.v_w)[i];
      const std::vector<float>& b = (k == 0 ? adam.m_b : adam.v_b)[i];
      t.insert(t.end(), b.begin(), b.end());
      s.slots[k].push_back(std::move(t));
    }
  }
  s.step = adam.step;
  return s;
}

// Where a CPU run stands: the model and Adam's state as checkpoint `c` holds them.
void SetCpuState(const train::Checkpoint& c, nn::Model* m, nn::AdamState* adam) {
  train::SetDenseWeights(c.state, m);
  size_t li = 0;
  for (size_t i = 0; i < m->layers.size(); ++i) {
    if (!m->layers[i].HasWeights()) continue;
    const auto n = static_cast<std::ptrdiff_t>(m->layers[i].weights.data.size());
    for (size_t k = 0; k < 2; ++k) {
      const std::vector<float>& t = c.state.slots[k][li];
      (k == 0 ? adam->m_w : adam->v_w)[i].assign(t.begin(), t.begin() + n);
      (k == 0 ? adam->m_b : adam->v_b)[i].assign(t.begin() + n, t.end());
    }
    ++li;
  }
  adam->step = c.state.step;
}

// A CPU epoch's sums as a checkpoint holds them (the chip's fields: its steps the batches,
// its images those seen), and back.
train::ChipEpochResult DoneOf(const nn::EpochSums& s) {
  train::ChipEpochResult d;
  d.steps = s.batches;
  d.images = s.seen;
  d.right = s.right;
  d.loss_sum = s.loss_sum;
  d.seconds = s.seconds;
  return d;
}
nn::EpochSums SumsOf(const train::ChipEpochResult& d) {
  return {d.steps, d.images, d.right, d.loss_sum, d.seconds};
}

// A CPU run: the model, Adam's state and where the run stands (a checkpoint's, or the start).
struct CpuRun {
  nn::Model model;
  nn::AdamState adam;
  train::Checkpoint at;  // its report: each epoch's results and the wall time so far
  std::string checkpoint_dir;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // Wall seconds of the run, those before a resumption included.
  double Seconds() const {
    return at.report.value("seconds", 0.0) +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // Writes the checkpoint: `epoch` in progress with `done` of it.
  void Checkpoint(int epoch, const nn::EpochSums& done) {
    train::Checkpoint c{at.run, epoch, DoneOf(done), CpuState(model, adam), at.report};
    c.report["seconds"] = Seconds();
    train::WriteCheckpoint(checkpoint_dir, c);
  }
};

CpuRun StartOnCpu(const TrainArgs& a, nn::Model model) {
  CpuRun r;
  r.model = std::move(model);
  r.adam = nn::AdamState::For(r.model);
  r.checkpoint_dir = CheckpointDirOf(a.out);
  r.at.run = CpuRunSettings(a, r.model);
  std::vector<int64_t> params;
  for (const auto& w : train::DenseWeightsOf(r.model))
    params.push_back(static_cast<int64_t>(w.size()));
  const train::Optimizer adam = train::Optimizer::Parse("adam", a.opt.learning_rate);
  if (auto c =
          train::ReadCheckpoint(r.checkpoint_dir, r.at.run, params, adam, KeptSizes(r.model))) {
    r.at = std::move(*c);
    SetCpuState(r.at, &r.model, &r.adam);
    Resuming(a, r.checkpoint_dir, r.at);
  } else {
    r.at.report = {{"epochs", nlohmann::json::array()}, {"seconds", 0.0}};
  }
  return r;
}

// Epoch e of a CPU run (or what is left of it), checkpointed as it goes.
nn::EpochResult CpuEpoch(const TrainArgs& a, CpuRun& r, const data::MnistSet& train, int e) {
  ProgressBar bar(fmt::format("epoch {}/{}", e, a.opt.epochs), !a.quiet);
  nn::TrainOptions o = a.opt;
  o.progress = [&bar](int, double f, double loss, double acc) {
    bar.Update(f, fmt::format("loss {:.4f} acc {:.2f} %", loss, 100 * acc));
  };
  o.checkpoint_every = a.checkpoint_every;
  o.checkpoint = [&](const nn::EpochSums& done) { r.Checkpoint(e, done); };
  nn::EpochSums done = e == r.at.epoch ? SumsOf(r.at.done) : nn::EpochSums{};
  const nn::EpochResult result = nn::TrainEpoch(&r.model, train, e, o, &r.adam, &done);
  bar.Finish();
  return result;
}

// Training on the CPU: fp32, Eigen, Adam (host/nn/trainer.h); a checkpoint beside --out
// after every --checkpoint-every steps and every epoch, resumed by the same command.
void RunOnCpu(const TrainArgs& a, nn::Model model, const data::MnistSet& train,
              const data::MnistSet& test, const std::string& dir) {
  CpuRun r = StartOnCpu(a, std::move(model));
  if (!a.quiet) {
    std::cout << fmt::format(
        "training {} ({} parameters) on {} images from {}, {} epochs, "
        "batch {}, Adam lr {}, seed {}, {}\n",
        r.model.name, r.model.ParamCount(), train.count, dir, a.opt.epochs, a.opt.batch,
        a.opt.learning_rate, a.opt.seed,
        nn::TrainsByBatch(r.model) ? "1 thread a step (batch normalization sees each batch whole)"
                                   : fmt::format("{} thread(s)", a.opt.threads));
  }
  if (!a.gradients.empty()) WriteCpuGradients(a, r.model, train);
  for (int e = r.at.epoch; e <= a.opt.epochs; ++e) {
    const nn::EpochResult res = CpuEpoch(a, r, train, e);
    const double test_acc = nn::EvaluateFp32(r.model, test, a.opt.threads);
    if (!a.quiet) {
      std::cout << fmt::format(
          "epoch {}/{}: loss {:.4f}, train accuracy {:.2f} %, test accuracy {:.2f} %, "
          "{:.1f} s (total {:.1f} s)\n",
          e, a.opt.epochs, res.loss, 100 * res.train_accuracy, 100 * test_acc, res.seconds,
          r.Seconds());
    }
    r.at.report["epochs"].push_back({{"loss", res.loss},
                                     {"train_accuracy", res.train_accuracy},
                                     {"test_accuracy", test_acc},
                                     {"seconds_wall", res.seconds}});
    r.Checkpoint(e + 1, {});
  }
  const nlohmann::json& epochs = r.at.report["epochs"];
  const double test_acc = epochs.empty() ? nn::EvaluateFp32(r.model, test, a.opt.threads)
                                         : epochs.back().at("test_accuracy").get<double>();
  nn::SaveModel(r.model, a.out);
  RemoveOutputFolder(r.checkpoint_dir, train::kCheckpointFolder);
  if (!a.quiet) {
    std::cout << fmt::format(
        "wrote {} (fp32, test accuracy {:.2f} %); quantize it with "
        "tpusim quantize --model {} --out DIR\n",
        a.out, 100 * test_acc, a.out);
  }
}

// The wall time of both steps that --timing-only runs, and of step 2 alone.
struct TimedWall {
  double both_s = 0, step2_s = 0;
};

// The line of a step timed by --timing-only: its cycles against its bound, its time at the
// preset's clock, its modelled energy, the wall time its simulation took.
std::string TimedStepLine(const TrainArgs& a, const config::TpuConfig& c,
                          const engine::ExecResult& step, const report::ProgramBound& bound,
                          const report::EnergyTable& table, const TimedWall& wall) {
  const double sim_s = static_cast<double>(step.cycles) / (c.clock_mhz * 1e6);
  const double joules = report::ComputeEnergy(step.counters, c, table).Total() * 1e-12;
  return fmt::format(
      "step 2 (the steady state: its batch read during step 1): {} cycles ({:.2f} x its bound, "
      "{} binds), {:.6f} s at {} MHz ({} images/s), {:.3g} J ({} µJ an image, {}); wall {:.1f} s "
      "for both steps, {:.1f} s for step 2\n",
      Grouped(static_cast<int64_t>(step.cycles)), static_cast<double>(step.cycles) / bound.Cycles(),
      bound.Binds(), sim_s, c.clock_mhz, Grouped(static_cast<int64_t>(a.opt.batch / sim_s)), joules,
      Grouped(static_cast<int64_t>(joules * 1e6 / a.opt.batch)), table.name, wall.both_s,
      wall.step2_s);
}

// --timing-only's report of the step it timed: its line and pass table, its --json.
void ReportTimedStep(const TrainArgs& a, const ChipRun& r, const nn::Model& model,
                     const report::ProgramBound& bound, const report::EnergyTable& table,
                     const TimedWall& wall) {
  const std::vector<PassRow> rows = PassRows(*r.trainer, r.config, model, table);
  if (!a.quiet) {
    std::cout << TimedStepLine(a, r.config, r.trainer->LastStep(), bound, table, wall) << "\n"
              << PassTable(rows, 1, r.config, r.trainer->Cores());
  }
  if (a.json.empty()) return;
  const auto& exe = r.trainer->Programs().step;
  nlohmann::json j = {{"config", r.config.name},
                      {"engine", r.chip->Name()},
                      {"timing_only", true},
                      {"model", model.name},
                      {"batch", a.opt.batch},
                      {"cores", r.trainer->Cores()},
                      {"state_in_hbm", r.trainer->Programs().state_in_hbm},
                      {"in_hbm_too", r.trainer->Programs().in_hbm_too},
                      {"passes", PassJson(rows, 1, r.config)}};
  j["step"] = report::ExecReportJson(r.trainer->LastStep(), r.config, exe.name,
                                     StepWords(r.trainer->Programs()), &bound);
  WriteFileAtomically(a.json, j.dump(2) + "\n");
  if (!a.quiet) std::cout << "wrote " << a.json << "\n";
}

// --timing-only: a step of the steady state timed on the fast engine without values (its
// counters are the ones a run with values counts: the programs do not branch on values), on
// synthetic batches of the model's input, so any input and classes the chip's step takes.
// Steps 1 and 2 run; step 2, whose batch was read during step 1 as every later step's is,
// is the one reported. Writes no model.
void TimeAStep(const TrainArgs& a) {
  if (a.config_option->count() == 0)
    throw UsageError("--timing-only times a training step on the chip: add --config tpu-v2");
  if (!a.out.empty() || a.verify || !a.gradients.empty()) {
    throw UsageError(
        "--timing-only computes no values: it writes no model (--out), checks none (--verify) "
        "and has no gradients (--gradients); leave those out");
  }
  for (const std::string& f : {a.timeline, a.json})
    if (!f.empty()) CheckWritable(f);
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  const nn::Model model = MakeModel(a);
  ChipRun r = MakeChipRun(a, model);
  const std::unique_ptr<engine::Timeline> timeline = TraceStep(
      a, r, model, 2, "step 1 reads its batch first; step 2, the one timed, is the steady state");
  const report::ProgramBound bound =
      report::BoundPrograms(r.trainer->Programs().WholeStep(), r.config);
  if (!a.quiet) {
    std::cout << fmt::format(
        "timing a training step of {} ({} parameters) on {}{}, {} engine without values: batch "
        "{} of synthetic {} x {} x {} images, {} classes, {} lr {}\n",
        model.name, Grouped(model.ParamCount()), r.config.name,
        CoresNote(r.config, r.trainer->Programs(), a.opt.batch), r.chip->Name(), a.opt.batch,
        model.input.h, model.input.w, model.input.c, model.layers.back().out.c, r.opt.Name(),
        r.opt.lr);
  }
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const auto start = Clock::now();
  r.trainer->Start(train::FreshState(model, r.opt));
  train::Batch b;
  b.x.assign(static_cast<size_t>(a.opt.batch * model.input.Size()), 0.0f);
  b.labels.assign(static_cast<size_t>(a.opt.batch), 0);
  r.trainer->Step(b, &b);
  r.trainer->ClearCounters();
  const auto step2 = Clock::now();
  r.trainer->Step(b, &b);
  const TimedWall wall{since(start), since(step2)};
  ReportTimedStep(a, r, model, bound, table, wall);
  WriteTimeline(a, r, timeline.get());
}

void Run(TrainArgs a) {
  if (a.opt.epochs < 1 || a.opt.batch < 1 || a.opt.threads < 1 || !(a.opt.learning_rate > 0)) {
    throw UsageError("--epochs, --batch and --threads must be at least 1 and --lr positive");
  }
  const bool on_chip = a.config_option->count() > 0;
  if (a.arch.empty() && a.model.empty()) a.arch = on_chip ? "mlp" : "lenet5";
  if (a.step_option->count() && a.timeline.empty()) {
    throw UsageError("--timeline-step chooses the step --timeline records: add --timeline FILE");
  }
  if (a.chip.timing_only) return TimeAStep(a);
  if (a.out.empty()) {
    throw UsageError(
        "--out is required: the model folder to write (only --timing-only, which times a "
        "step, writes none)");
  }
  CheckOutputFolder(a.out, nn::kModelFolder);  // before the work, not after it
  if (!on_chip && (a.verify || a.optimizer != "adam" || !a.json.empty() || !a.timeline.empty() ||
                   a.energy_option->count() || a.step_option->count())) {
    throw UsageError(
        "--verify, --optimizer, --json, --timeline, --timeline-step and --energy are for "
        "training on the chip: add --config tpu-v2");
  }
  if (!a.timeline.empty()) CheckWritable(a.timeline);
  // The energy table of the chip's reports, read before the work (a bad one refused then).
  const report::EnergyTable table =
      on_chip ? report::LoadEnergyTable(a.energy) : report::EnergyTable{};
  if (!a.gradients.empty()) CheckOutputFolder(a.gradients, train::kGradientsFolder);
  const data::Dataset dataset = data::ParseDataset(a.dataset);
  nn::Model model = MakeModel(a);
  model.dataset = data::DatasetName(dataset);
  if (on_chip) train::TrainNetOf(model);  // refuse another model before loading the data
  const std::string dir = data::FindDatasetDir(dataset, a.data);
  const data::MnistSet train = data::LoadMnist(dir, /*train=*/true, a.limit);
  const data::MnistSet test = data::LoadMnist(dir, /*train=*/false);
  if (on_chip) return RunOnChip(a, std::move(model), train, test, table);
  RunOnCpu(a, std::move(model), train, test, dir);
}

// The options of training on the chip (--optimizer, --json, ..., --config and the chip's).
void AddChipTrainOptions(CLI::App* cmd, TrainArgs* a) {
  cmd->add_option("--optimizer", a->optimizer,
                  "on the chip: adam (lr 0.001 unless --lr) or sgd (momentum 0.875, lr 0.0625 "
                  "unless --lr)")
      ->capture_default_str();
  cmd->add_option("--json", a->json,
                  "on the chip: write each epoch's results and the last step's counters, cycle "
                  "categories and attainable bound (as tpusim exec --json) to this file");
  cmd->add_option("--state-in", a->state_in,
                  "on the chip, a graph: where the weights, optimizer state and gradients are "
                  "between the steps: auto (the unified buffer where they fit beside one image, "
                  "else HBM, and each layer's F too where needed, and then every layer's output "
                  "and gradient), buffer, hbm, hbm-with-f or hbm-with-maps")
      ->capture_default_str();
  cmd->add_option("--cores", a->cores,
                  "on the chip: the cores a step's batch is split across, each an equal share, "
                  "their weight gradients summed through HBM (1 or 2; default: the chip's)");
  cmd->add_option("--checkpoint-every", a->checkpoint_every,
                  "write a checkpoint (OUT.checkpoint) after every this many steps (0: only "
                  "after each epoch); the same command resumes from it")
      ->capture_default_str();
  cmd->add_option("--gradients", a->gradients,
                  "write the first step's gradients (float32 .npy named as in the "
                  "model folder), the weights before it, its loss and its images' indices to this "
                  "folder (to compare with PyTorch's autograd)");
  cmd->add_flag("--verify", a->verify,
                "on the chip: run the CPU reference of the chip's arithmetic beside it and stop "
                "at the first step whose losses, logits or weights differ by a bit");
  cmd->add_option("--timeline", a->timeline,
                  "on the chip: write one step's instruction timeline, its passes on a track of "
                  "their own (Chrome trace JSON: Perfetto, chrome://tracing)");
  a->step_option =
      cmd->add_option("--timeline-step", a->timeline_step,
                      "on the chip: the step --timeline records, from 1 (2: the first step whose "
                      "batch was read ahead, as every later one's is)")
          ->capture_default_str();
  a->energy_option = cmd->add_option("--energy", a->energy,
                                     "on the chip: energy table for the modelled energy of each "
                                     "epoch and pass (JSON, docs/energy.md)")
                         ->capture_default_str();
  a->chip.engine = "fast";
  AddChipOptions(cmd, &a->chip);
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train on the CPU (fp32, Eigen) or, with --config, on the chip (bf16 with float32 sums "
      "and master weights).");
  cmd->footer(R"(
Deterministic for a given --seed and --threads. Prints a progress bar per epoch and the
test accuracy after each. Writes a checkpoint (OUT.checkpoint) every --checkpoint-every
steps and after each epoch; a run stopped (Ctrl-C, a kill, a Slurm preemption) and started
again with the same command resumes from it and ends with the same weights, bit for bit. MNIST is found through --data, $TPUSIM_DATA, ../shared/data/mnist
or data/mnist (scripts/fetch-mnist downloads it).

On the chip (--config, a bf16 preset: tpu-v2, tpu-v3, tpu-v4): a perceptron (--arch mlp, the
default there), the course material's CNN (--arch lenet5 or wide, at a --batch its unified
buffer holds: at most 86 and 68 on tpu-v2) or a graph (--arch residual: residual adds,
global pooling; or --model DIR, a network from tpusim import: max pooling, concatenation,
depthwise convolutions, batch normalization in training mode (import --keep-batchnorm),
maps of more channels than the array's N in blocks of N, and more classes; every layer's
output and gradient kept in the unified buffer, a batch beyond it taken in passes whose
gradients are summed, but not with batch normalization, which sees a core's share whole;
the weights, optimizer state and gradients in HBM where the buffer does not hold them,
each layer's F too where needed) trains as chip
programs, forward, loss, backward and the optimizer all on the chip, the float32 weights
and optimizer state kept in it between the steps; the host sends each batch and reads the
losses (docs/training.md). On a chip of two cores (tpu-v3, tpu-v4) each core takes half
of the batch and the cores sum their weight gradients through HBM before the update
(--cores 1: core 0 alone). The last incomplete batch of an epoch is left out (the chip's
program has one batch size). Each epoch prints the simulated time at the preset's clock
beside the wall time. --verify checks every step against the CPU reference of the same
arithmetic, bit for bit.

--timing-only (with --config) times one step on the fast engine without values: steps 1
and 2 run on synthetic batches (zeros) and step 2, the steady state, is reported with its
pass table, --json and --timeline as above; the counters are those of a run with values.
So a model folder of any input and classes the chip's step takes can be timed (a run with
values reads MNIST: 32 x 32 x 1 images, 10 classes). It writes no model.

Examples:
  tpusim train --epochs 8 --out my-lenet5
  tpusim train --config tpu-v2 --arch lenet5 --epochs 1 --out chip-lenet5
  tpusim train --dataset fashion-mnist --arch wide --epochs 15 --out my-fashion
  tpusim train --config tpu-v2 --epochs 1 --out my-mlp
  tpusim train --config tpu-v2 --optimizer sgd --limit 6400 --verify --out my-mlp
  tpusim train --config tpu-v2 --arch residual --batch 8 --epochs 1 --out chip-residual
  tpusim import pooled.onnx --out pooled
  tpusim train --config tpu-v2 --model pooled --batch 4 --epochs 1 --out pooled-trained
  tpusim train --config tpu-v3 --arch residual --batch 256 --timing-only)");
  cmd->add_option("--out", a->out, "model folder to write (required, but with --timing-only)");
  cmd->add_option("--data", a->data, "folder with the data set's four IDX files (.gz or not)");
  cmd->add_option("--dataset", a->dataset,
                  "mnist or fashion-mnist (Debian's dataset-fashion-mnist)")
      ->capture_default_str();
  cmd->add_option("--arch", a->arch,
                  "lenet5 (81,194 parameters; the default on the CPU), wide (conv 16 and 32, "
                  "dense 128: for Fashion-MNIST), mlp (dense 256 and 10, 264,970 parameters; "
                  "the default on the chip) or residual (a graph: two residual blocks of 3 x 3 "
                  "convolutions, global average pooling, 9,610 parameters)");
  cmd->add_option("--model", a->model,
                  "start from this model folder instead of an --arch (its graph and float32 "
                  "weights, e.g. from tpusim import of a PyTorch network): its input 32 x 32 x "
                  "1, its last layer a dense layer of the 10 classes with softmax (any input "
                  "and classes with --timing-only)")
      ->excludes("--arch");
  cmd->add_option("--epochs", a->opt.epochs, "passes over the training set")->capture_default_str();
  cmd->add_option("--batch", a->opt.batch,
                  "images per step (on the chip: as many as its accumulators and unified buffer "
                  "hold; a refusal names the most)")
      ->capture_default_str();
  cmd->add_option("--lr", a->opt.learning_rate, "Adam learning rate")->capture_default_str();
  cmd->add_option("--seed", a->opt.seed, "initial weights and shuffling")->capture_default_str();
  cmd->add_option("--threads", a->opt.threads, "threads (data parallel)")->capture_default_str();
  cmd->add_option("--limit", a->limit, "train on the first N images only (0: all 60,000)");
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing but errors");
  AddChipTrainOptions(cmd, a.get());
  a->config_option = cmd->get_option("--config");
  a->config_option->default_str("")->description(
      "train on this chip: a bf16 preset (tpu-v2, tpu-v3, tpu-v4), a .json file, or another "
      "preset with --set dtype=bf16; without it, on the CPU");
  a->lr_option = cmd->get_option("--lr");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
