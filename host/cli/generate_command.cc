// `tpusim generate`: greedy decoding with a GPT-style decoder (host/nn/generate.h) on the
// CPU in fp32, the reference for the chip's decoding (docs/transformers.md).
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

namespace tpu::cli {
namespace {

struct GenerateArgs : OutputOptions {
  std::string model, prompt, out, config;
  int64_t tokens = 16;
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

void Run(const GenerateArgs& a) {
  if (!a.config.empty())
    throw UsageError(
        "--config: decoding on a chip, with its key/value cache, is still to come; tpusim "
        "generate decodes on the CPU in fp32, and tpusim run runs the model on a bf16 chip "
        "(docs/transformers.md)");
  for (const std::string* p : {&a.json, &a.out})
    if (!p->empty()) CheckWritable(*p);
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
  if (!a.out.empty()) {
    Tensor<int32_t> t;
    t.shape = {static_cast<int64_t>(g.tokens.size())};
    for (const int64_t id : g.tokens) t.data.push_back(static_cast<int32_t>(id));
    WriteNpyTensor(a.out, t);  // all or nothing (npy.h)
  }
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
      "generate", "Generate tokens with a GPT-style decoder, greedily, on the CPU (fp32).");
  cmd->footer(R"(
The model is a decoder imported from PyTorch whose input is N x T int64 token ids and whose
output is each position's logits (models/onnx/make_transformers.py --models gpt). Each new
token is the largest logit at the last position of the context; the context is run whole
each step, padded to the T the model was exported for, which bounds prompt + --tokens. The
model must be causal: the first step checks that the padding does not change the logits.
This is the reference the chip's decoding with a key/value cache will be checked against;
decoding on a chip is still to come (tpusim run runs the decoder's forward pass on a bf16
chip; docs/transformers.md).

Examples:
  tpusim generate --model gpt --prompt prompt.txt --tokens 16
  tpusim generate --model gpt --prompt prompt.npy --tokens 64 --out tokens.npy --json g.json)");
  cmd->add_option("--model", a->model, "the decoder's model folder (tpusim import)")->required();
  cmd->add_option("--prompt", a->prompt,
                  "the prompt's token ids: a text file of integers, or a .npy (T or 1 x T)")
      ->required();
  cmd->add_option("--tokens", a->tokens, "how many tokens to generate")->capture_default_str();
  cmd->add_option("--out", a->out, "write the new tokens as a .npy of int32");
  cmd->add_option("--config", a->config,
                  "a chip: refused for now (decoding on a chip is still to come)");
  AddOutputOptions(cmd, a.get(), "write the prompt, the tokens and the time as JSON");
  cmd->callback([a] { Run(*a); });
}

}  // namespace tpu::cli
