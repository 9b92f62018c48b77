// `tpusim generate`: greedy decoding with a GPT-style decoder on the CPU in fp32
// (host/nn/generate.h) or, with --config, on a bf16 chip with a key/value cache
// (host/run/generate_run.h; docs/transformers.md).
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/cli/nn_commands.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/npy.h"
#include "host/common/progress_bar.h"
#include "host/common/revision.h"
#include "host/nn/generate.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"
#include "host/run/generate_run.h"
#include "host/run/session.h"

namespace tpu::cli {
namespace {

struct GenerateArgs : OutputOptions {
  std::string model, prompt, out;
  std::string energy = report::DefaultEnergyTablePath();
  int64_t tokens = 16;
  ChipOptions chip;  // its config empty: on the CPU
  TraceOptions trace;
  GenerateArgs() { chip.config.clear(); }
};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A .npy of token ids (float32, as make_transformers.py writes its inputs, or int32; one
// sequence), or a text file of integers separated by spaces, commas or lines.
std::vector<int64_t> ReadPrompt(const std::string& path) {
  std::vector<int64_t> ids;
  if (EndsWith(path, ".npy")) {
    const Tensor<float> t = ReadNpyTensor<float>(path);
    if (t.shape.size() > 2 || (t.shape.size() == 2 && t.shape[0] != 1))
      throw UsageError(path + ": the prompt must be one sequence of token ids (T or 1 x T)");
    for (const float v : t.data) {
      if (v != static_cast<float>(static_cast<int64_t>(v)))
        throw UsageError(fmt::format("{}: {} is not a token id (an integer)", path, v));
      ids.push_back(static_cast<int64_t>(v));
    }
    return ids;
  }
  std::ifstream f(path);
  if (!f) throw UsageError("cannot open the prompt '" + path + "'");
  std::stringstream text;
  text << f.rdbuf();
  std::string word;
  std::string all = text.str();
  for (char& c : all)
    if (c == ',') c = ' ';
  std::istringstream words(all);
  while (words >> word) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size())
      throw UsageError(
          fmt::format("{}: '{}' is not a token id (the prompt is integers separated "
                      "by spaces, commas or lines, or a .npy)",
                      path, word));
    ids.push_back(id);
  }
  return ids;
}

void WriteTokens(const std::string& path, const std::vector<int64_t>& tokens) {
  Tensor<int32_t> t;
  t.shape = {static_cast<int64_t>(tokens.size())};
  for (const int64_t id : tokens) t.data.push_back(static_cast<int32_t>(id));
  WriteNpyTensor(path, t);  // all or nothing (npy.h)
}

// The decode steps against the bound of reading the weights and the cache.
std::string DecodeLine(const run::ChipGeneration& g) {
  const auto steps = static_cast<double>(g.decode.images);
  const double cycles = static_cast<double>(g.decode.chip_cycles) / steps;
  const double bound = g.decode_bound.Cycles() / steps;
  return fmt::format(
      "  decode     {:.0f} cycles a token, {:.2f} x the bound of reading the weights and the "
      "cache ({:.0f} cycles a token: weights {:.0f}, cache {:.0f}; docs/transformers.md)\n",
      cycles, cycles / bound, bound, g.decode_bound.weights / steps, g.decode_bound.cache / steps);
}

// On the chip: the prefill and the decode steps, each reported as tpusim run reports a run.
void RunOnChip(const GenerateArgs& a) {
  if (a.chip.timing_only && !a.out.empty())
    throw UsageError("--out needs the tokens' values; drop --timing-only");
  const report::EnergyTable table = report::LoadEnergyTable(a.energy);
  run::ChipSession session(SessionSpecFrom(a.chip, a.trace, /*progress=*/false));
  const nn::Model m = nn::LoadModel(a.model);
  const std::vector<int64_t> prompt = ReadPrompt(a.prompt);
  ProgressBar bar("generate", !a.quiet);
  const run::ChipGeneration g =
      run::GenerateOnTpu(m, session.engine(), prompt, a.tokens, [&](int64_t done, int64_t n) {
        bar.Update(static_cast<double>(done) / static_cast<double>(n));
      });
  bar.Finish();
  session.Finish();
  const auto report = [&](const run::TpuRunResult& r) {
    return report::BuildRunReport(r, m.name, session.engine().Name(), session.config(), table, 1);
  };
  const report::RunReport pre = report(g.prefill), dec = report(g.decode);
  if (!a.out.empty()) WriteTokens(a.out, g.tokens);
  if (!a.json.empty()) {
    const nlohmann::json j = {
        {"tool", "tpusim generate"},
        {"revision", kGitRevision},
        {"model", a.model},
        {"prompt", prompt},
        {"tokens", g.tokens},
        {"context", g.context},
        {"vocabulary", g.vocabulary},
        {"backend", session.config().name},
        {"checked", g.checked},
        {"mismatches", g.mismatches},
        {"seconds", g.wall_seconds},
        {"prefill", report::RunReportJson(pre)},
        {"decode", report::RunReportJson(dec)},
        {"decode_bound", {{"weights", g.decode_bound.weights}, {"cache", g.decode_bound.cache}}}};
    WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
  if (!a.quiet) {
    std::cout << fmt::format(
        "tpusim generate: {} tokens after a prompt of {} ({}; context {}, vocabulary {}), "
        "greedy, on {} ({} engine{}), {:.2f} s\n  tokens  {}\n\nprefill (the prompt, one "
        "program):\n{}\ndecode ({} steps, a program a token):\n{}",
        a.tokens, prompt.size(), a.model, g.context, g.vocabulary, session.config().name,
        session.engine().Name(), g.checked ? "" : ", timing only: no tokens", g.wall_seconds,
        g.checked ? fmt::format("{}", fmt::join(g.tokens, " ")) : "(none: no values)",
        report::FormatRunText(pre), g.decode.images, report::FormatRunText(dec));
    if (g.decode.images > 0) std::cout << DecodeLine(g);
  }
  if (g.mismatches != 0)
    throw RuntimeError(fmt::format("{} positions' logits differ from the CPU bf16 reference ({})",
                                   g.mismatches, g.first_mismatch));
}

void Run(const GenerateArgs& a) {
  for (const std::string* p : {&a.json, &a.out})
    if (!p->empty()) CheckWritable(*p);
  if (!a.chip.config.empty()) return RunOnChip(a);
  if (a.chip.timing_only || !a.chip.sets.empty() || a.chip.array || !a.trace.wave.empty() ||
      !a.trace.timeline.empty())
    throw UsageError(
        "--timing-only, --set, --array, --trace and --timeline are for a chip: add --config "
        "(a bf16 chip, e.g. -c tpu-v4), or drop them to decode on the CPU");
  const nn::Model m = nn::LoadModel(a.model);
  const std::vector<int64_t> prompt = ReadPrompt(a.prompt);
  ProgressBar bar("generate", !a.quiet);
  const auto start = std::chrono::steady_clock::now();
  const nn::Generated g = nn::GenerateGreedy(m, prompt, a.tokens, [&](int64_t done, int64_t n) {
    bar.Update(static_cast<double>(done) / static_cast<double>(n));
  });
  bar.Finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!a.out.empty()) WriteTokens(a.out, g.tokens);
  if (!a.quiet) {
    std::cout << fmt::format(
        "tpusim generate: {} tokens after a prompt of {} ({}; context {}, vocabulary {}), "
        "greedy, cpu-fp32, {:.2f} s\n  tokens  {}\n",
        g.tokens.size(), prompt.size(), a.model, g.context, g.vocabulary, seconds,
        fmt::join(g.tokens, " "));
  }
  if (!a.json.empty()) {
    const nlohmann::json j = {
        {"tool", "tpusim generate"},  {"revision", kGitRevision}, {"model", a.model},
        {"prompt", prompt},           {"tokens", g.tokens},       {"context", g.context},
        {"vocabulary", g.vocabulary}, {"backend", "cpu-fp32"},    {"seconds", seconds}};
    WriteFileAtomically(a.json, j.dump(2) + "\n");
  }
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate tokens with a GPT-style decoder, greedily, on the CPU (fp32) or on a bf16 chip "
      "with a key/value cache.");
  cmd->footer(R"(
The model is a decoder imported from PyTorch whose input is N x T int64 token ids and whose
output is each position's logits (models/onnx/make_transformers.py --models gpt). Each new
token is the largest logit at the last position of the context. On the CPU the context is
run whole each step, padded to the T the model was exported for, which bounds prompt +
--tokens; the model must be causal: the first step checks that the padding does not change
the logits.

With --config (a bf16 chip), the prompt runs as one program (the prefill) and each new token
as one more (a decode step of its position only), the keys and values of every block kept in
the chip's unified buffer between them; the host sends each token's id and reads its
logits. Every position's logits are checked bit for bit against the CPU bf16 reference (exit
1 where one differs). The report shows the prefill and the decode steps apart, each a
tpusim run table, and the decode steps against the bound of reading the weights and the
cache (docs/transformers.md, "Decoding on the chip").

Examples:
  tpusim generate --model gpt --prompt prompt.txt --tokens 16
  tpusim generate --model gpt --prompt prompt.npy --tokens 64 --out tokens.npy --json g.json
  tpusim generate --model gpt --prompt prompt.txt --tokens 64 -c tpu-v4 --engine fast)");
  cmd->add_option("--model", a->model, "the decoder's model folder (tpusim import)")->required();
  cmd->add_option("--prompt", a->prompt,
                  "the prompt's token ids: a text file of integers, or a .npy (T or 1 x T)")
      ->required();
  cmd->add_option("--tokens", a->tokens, "how many tokens to generate")->capture_default_str();
  cmd->add_option("--out", a->out, "write the new tokens as a .npy of int32");
  AddChipOptions(cmd, &a->chip);
  cmd->get_option("--config")
      ->description(
          "decode on this bf16 chip (tpu-v2, tpu-v3, tpu-v4, or a .json) with a key/value cache, "
          "checked against the CPU bf16 reference; without it, on the CPU in fp32");
  cmd->add_option("--energy", a->energy, "energy table (docs/energy.md) for the chip's reports")
      ->capture_default_str();
  AddTraceOptions(cmd, &a->trace, "the RTL's signals over the whole generation (--engine rtl)");
  AddOutputOptions(cmd, a.get(),
                   "write the prompt, the tokens and the time (on a chip: the prefill's and "
                   "the decode steps' reports) as JSON");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
