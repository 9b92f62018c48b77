// `tpusim compile`: the TPU jobs of a model for its first inputs, written as assembly plus
// the host and weight memory images `tpusim exec` loads.
#include "host/cli/compile_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "arith/int8.h"
#include "host/cli/options.h"
#include "host/common/atomic_file.h"
#include "host/common/errors.h"
#include "host/common/output_folder.h"
#include "host/compiler/compile_jobs.h"
#include "host/data/mnist.h"
#include "host/isa/assembler.h"
#include "host/nn/inputs.h"

namespace tpu::cli {
namespace {

struct CompileArgs : WorkloadOptions {
  ChipOptions chip;
  std::string out;
  bool host_im2col = false;
};

// compile's folder: jobs.json names every other file in it.
const OutputKind kJobsFolder{"jobs folder", "jobs.json"};

void Compile(const CompileArgs& a) {
  if (a.images < 1) throw UsageError("--images and --batch must be at least 1");
  const config::TpuConfig config = ResolveConfig(a.chip);
  OutputFolder out(a.out, kJobsFolder);
  const nn::Model model = nn::LoadModel(a.model);
  nn::RequireQuantized(model);
  const nn::InputSet set = LoadInputs(a, model);
  const int batch = static_cast<int>(set.count);
  const nn::RowMatrix<int8_t> x = nn::Int8Inputs(model, set, 0, batch);
  nlohmann::json manifest = nlohmann::json::array();
  auto write_job = [&](const std::string& name, const compiler::LayerJob& lj) {
    const engine::ExecJob& job = lj.exec;
    WriteFileAtomically(out.File(name + ".asm"),
                        "; " + lj.summary + "\n" + isa::Disassemble(job.program));
    WriteFileAtomically(out.File(name + ".host.bin"),
                        std::string(job.host_image.begin(), job.host_image.end()));
    WriteFileAtomically(out.File(name + ".weights.bin"),
                        std::string(job.weight_image.begin(), job.weight_image.end()));
    manifest.push_back({{"name", name},
                        {"program", name + ".asm"},
                        {"host_in", name + ".host.bin"},
                        {"weights_in", name + ".weights.bin"},
                        {"instructions", job.program.words.size()},
                        {"host_out_addr", job.host_out_addr},
                        {"host_out_bytes", job.host_out_bytes}});
    std::cout << fmt::format(
        "{}: {} instructions -> {}.asm (+ .host.bin, .weights.bin; outputs "
        "at host 0x{:x}, {} bytes)\n",
        name, job.program.words.size(), (std::filesystem::path(a.out) / name).string(),
        job.host_out_addr, job.host_out_bytes);
  };
  const compiler::CompiledJobs c = compiler::CompileJobs(
      model, config, std::vector<int8_t>(x.data(), x.data() + x.size()), batch, a.host_im2col);
  if (!c.layer_jobs_why.empty()) std::cout << "layer jobs: " << c.layer_jobs_why << "\n";
  for (const compiler::NamedJob& j : c.jobs) write_job(j.name, j.job);
  WriteFileAtomically(
      out.File("jobs.json"),
      nlohmann::json{
          {"model", model.name}, {"config", config.name}, {"images", batch}, {"jobs", manifest}}
              .dump(2) +
          "\n");
  out.Commit();
}

}  // namespace

void AddCompileCommand(CLI::App& app) {
  auto a = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compile", "Lower a model to TPU jobs (assembly and memory images) for tpusim exec.");
  cmd->footer(R"(
Writes the program of the first --images inputs (test images, --inputs or --synthetic) as
tpusim run runs them: the
whole network as one job where it fits (network.asm: windows formed on the chip,
activations kept in the unified buffer; docs/compiler.md), else, or with --host-im2col,
one job per conv or dense layer (2 x 2 pooling fused into the conv before it) whose input
rows the host lays out (im2col), run one after another with the host in between. Each job
is NAME.asm (readable assembly), NAME.host.bin and NAME.weights.bin (memory images), and
jobs.json says where each leaves its outputs.

Examples:
  tpusim compile --config small-16 --images 4 --out lenet
  tpusim exec lenet/network.asm --host-in lenet/network.host.bin \
      --weights-in lenet/network.weights.bin
  tpusim compile --config small-16 --images 4 --out lenet-jobs --host-im2col)");
  AddWorkloadOptions(cmd, a.get(), 1);
  AddChipOptions(cmd, &a->chip, /*engine=*/false);
  cmd->add_option("--out", a->out, "folder to write the jobs to")->required();
  cmd->add_flag("--host-im2col", a->host_im2col,
                "one job per layer with its rows formed on the host (the lowering before "
                "on-chip windows)");
  cmd->callback([a] { Compile(*a); });
}

}  // namespace tpu::cli
