// See checkpoint.h.
#include "host/train/checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "host/common/errors.h"
#include "host/common/npy.h"

namespace tpu::train {
namespace {

std::string TensorName(int slot, int layer) {
  return slot < 0 ? fmt::format("w{}.npy", layer) : fmt::format("slot{}_w{}.npy", slot, layer);
}

nlohmann::json SumsJson(const ChipEpochResult& r) {
  std::vector<uint64_t> counters;
  for (int i = 0; i < hw::kNumCounters; ++i) counters.push_back(r.counters[i]);
  return {{"counters", counters},   {"steps", r.steps},    {"images", r.images},
          {"loss_sum", r.loss_sum}, {"right", r.right},    {"cycles", r.cycles},
          {"verified", r.verified}, {"seconds", r.seconds}};
}

ChipEpochResult SumsOf(const nlohmann::json& j) {
  ChipEpochResult r;
  r.steps = j.at("steps");
  r.images = j.at("images");
  r.loss_sum = j.at("loss_sum");
  r.right = j.at("right");
  r.cycles = j.at("cycles");
  r.verified = j.at("verified");
  r.seconds = j.at("seconds");
  const std::vector<uint64_t> counters = j.at("counters");
  if (counters.size() != static_cast<size_t>(hw::kNumCounters))
    throw UsageError(
        "a checkpoint of another tpusim version (its counters): remove it to start afresh");
  for (int i = 0; i < hw::kNumCounters; ++i) r.counters[i] = counters[static_cast<size_t>(i)];
  return r;
}

std::vector<float> ReadTensor(const std::string& path, int64_t values) {
  Tensor<float> t = ReadNpyTensor<float>(path);
  if (t.Size() != values) {
    throw UsageError(
        fmt::format("{}: {} values where the network has {}; the checkpoint is of "
                    "another network: remove its folder to start afresh",
                    path, t.Size(), values));
  }
  return t.data;
}

}  // namespace

void WriteCheckpoint(const std::string& dir, const Checkpoint& c) {
  OutputFolder out(dir, kCheckpointFolder);
  nlohmann::json j = {{"format", "tpusim-training-checkpoint"},
                      {"run", c.run},
                      {"epoch", c.epoch},
                      {"done", SumsJson(c.done)},
                      {"step", c.state.step},
                      {"report", c.report},
                      {"tensors", nlohmann::json::array()}};
  for (int s = -1; s < static_cast<int>(c.state.slots.size()); ++s) {
    const auto& ts = s < 0 ? c.state.w : c.state.slots[static_cast<size_t>(s)];
    for (size_t l = 0; l < ts.size(); ++l) {
      const std::string name = TensorName(s, static_cast<int>(l));
      WriteNpyTensor(out.File(name), Tensor<float>{{static_cast<int64_t>(ts[l].size())}, ts[l]});
      j["tensors"].push_back(name);
    }
  }
  for (size_t k = 0; k < c.state.kept.size(); ++k) {
    const std::string name = fmt::format("kept{}.npy", k);
    WriteNpyTensor(out.File(name),
                   Tensor<float>{{static_cast<int64_t>(c.state.kept[k].size())}, c.state.kept[k]});
    j["tensors"].push_back(name);
  }
  {
    std::ofstream f(out.File(kCheckpointFolder.manifest));
    f << j.dump(2) << "\n";
    if (!f) throw RuntimeError("cannot write the checkpoint in '" + dir + "'");
  }
  out.Commit();
}

std::optional<Checkpoint> ReadCheckpoint(const std::string& dir, const nlohmann::json& run,
                                         const std::vector<int64_t>& params, const Optimizer& opt,
                                         const std::vector<int64_t>& kept) {
  const std::string manifest = dir + "/" + kCheckpointFolder.manifest;
  if (!std::filesystem::exists(manifest)) return std::nullopt;
  std::ifstream f(manifest);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("run")) {
    throw UsageError(manifest + " is not a training checkpoint tpusim wrote; move it away");
  }
  // Settings that the checkpoints of earlier versions lack, as those versions ran: one core.
  const nlohmann::json earlier = {{"cores", 1}};
  for (const auto& [key, value] : run.items()) {
    const nlohmann::json there = j["run"].value(key, earlier.value(key, nlohmann::json()));
    if (there != value) {
      throw UsageError(fmt::format(
          "{} holds the checkpoint of another run ({} {} there, {} now): run the same command "
          "to resume it, or remove that folder to start afresh",
          dir, key, there.dump(), value.dump()));
    }
  }
  Checkpoint c;
  c.run = j["run"];
  c.epoch = j.at("epoch");
  c.done = SumsOf(j.at("done"));
  c.report = j.at("report");
  c.state.step = j.at("step");
  c.state.slots.resize(static_cast<size_t>(opt.Slots()));
  for (int s = -1; s < opt.Slots(); ++s) {
    auto& ts = s < 0 ? c.state.w : c.state.slots[static_cast<size_t>(s)];
    for (size_t l = 0; l < params.size(); ++l)
      ts.push_back(ReadTensor(dir + "/" + TensorName(s, static_cast<int>(l)), params[l]));
  }
  for (size_t k = 0; k < kept.size(); ++k)
    c.state.kept.push_back(ReadTensor(fmt::format("{}/kept{}.npy", dir, k), kept[k]));
  return c;
}

}  // namespace tpu::train
