// A perceptron's training step as chip programs (docs/training.md): the compiler from a
// DenseNet to three programs for one core of a bf16 chip, and a trainer that runs them on
// any chip engine with the state kept in the unified buffer between steps.
//
//   init  reads the constants and the state (weights, optimizer state) into the buffer;
//   step  reads one batch (images, labels, the step's scalars) over the host link, runs the
//         forward pass, the loss, the backward pass and the update, and writes the losses
//         and logits back: the host's whole part of a step, as a TPU's infeed;
//   save  writes the state back to host memory (checkpoints, the end);
//   grads writes the last step's weight gradients back (tpusim train --gradients).
//
// The arithmetic is dense_reference.h's, bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/config/tpu_config.h"
#include "host/engine/chip_engine.h"
#include "host/engine/cycle_attribution.h"
#include "host/train/dense_net.h"

namespace tpu::train {

struct DensePrograms {
  engine::Executable init, save;
  // steps[b][prefetch]: the step on batch buffer b (0 or 1), reading the next batch into the
  // other buffer behind the backward pass with `prefetch` (the infeed); step is
  // steps[0][1], the step of an epoch's steady state; fetch[b] reads a batch into buffer b
  // (an epoch's first step, a resumed run's).
  engine::Executable steps[2][2], fetch[2], step;
  engine::Executable grads;  // writes the last step's weight gradients (bfloat16) back
  int64_t ub_rows = 0;       // unified-buffer rows the step uses (a core's)
  int cores = 1;             // the cores the batch is split across (programs of each step)
  int passes = 1;  // the passes a core makes over its share, their gradients summed (graphs)
  // Where the weights and the optimizer's state are between the steps: the unified buffer,
  // or HBM (graphs whose state does not fit beside their maps: step_shell.h's StateRows).
  bool state_in_hbm = false;
  // What of a graph's step is in HBM besides (tpusim train --state-in's names): "hbm-with-f"
  // each layer's F, "hbm-with-maps" every layer's output, gradient and F; "" nothing.
  std::string in_hbm_too;
  // The step's passes, in program order: "layer L forward", "loss", "batch in" (the next
  // batch's read, and the fetch programs), "layer L weight gradient", "layer L input
  // gradient", "layer L update" (L from 1), "results out", and the pass of each of the
  // step's instructions (an index into pass_names).
  std::vector<std::string> pass_names;
  std::vector<int32_t> pass_of, pass_of_last;  // with prefetch, without
  std::vector<int64_t> pass_macs;              // each pass's useful MACs a step
  // A step of more instructions than a core's program region holds (a graph's of many
  // passes) in parts of whole passes, run one after another: steps[b][prefetch] the first,
  // parts[b][prefetch] the rest, each part's instructions' passes in parts_pass_of[prefetch].
  std::vector<engine::Executable> parts[2][2];
  std::vector<std::vector<int32_t>> parts_pass_of[2];
  // The steady state's step whole (step and its parts one after another): each core's
  // program, and its instructions' passes.
  std::vector<isa::Program> WholeStep() const;
  std::vector<int32_t> WholePassOf() const;
};

// The programs for `net` at `batch` images a step on core 0 of `config` (a bf16 chip), or
// with `cores` 2 on both of its cores: each its half of the batch, the weight gradients
// summed through HBM before the update (EmitGradientSum; ReferenceStep's `cores`). Throws
// UsageError when the net, the batch, the cores or the buffer do not fit (CheckDense,
// CheckTrainingCores), naming what to change.
DensePrograms CompileDense(const DenseNet& net, int batch, const Optimizer& opt,
                           const config::TpuConfig& config, int cores = 1);

// The host's side of a step's programs: the bytes their host regions take and give.
class StepImages {
 public:
  virtual ~StepImages() = default;
  // The "state" region's bytes holding `s` (the weights and the optimizer's state), and
  // back (the step count is the caller's).
  virtual std::vector<uint8_t> StateBytes(const DenseState& s) const = 0;
  virtual DenseState ReadState(const std::vector<uint8_t>& bytes) const = 0;
  // A batch region's bytes ("batch0", "batch1") holding `b`, the batch of step `step`
  // (from 1: Adam's scalars are the step's).
  virtual std::vector<uint8_t> BatchBytes(const Batch& b, int64_t step) const = 0;
  // The results of a step ("out"), and the last step's gradients ("grads"), per layer as its
  // parameters (dense_net.h's layout): the bfloat16 values the update took.
  virtual StepOut ReadOut(const std::vector<uint8_t>& bytes) const = 0;
  virtual std::vector<std::vector<float>> ReadGrads(const std::vector<uint8_t>& bytes) const = 0;
};

// A step compiled: its programs and their host side.
struct CompiledStep {
  DensePrograms programs;
  std::shared_ptr<const StepImages> images;
};

// CompileDense's programs with their host side.
CompiledStep CompileDenseStep(const DenseNet& net, int batch, const Optimizer& opt,
                              const config::TpuConfig& config, int cores = 1);

// Runs a step's programs on `engine`: Start loads the state, Step runs one batch, State
// reads the state back. The counters of every run are summed in totals().
class ChipTrainer {
 public:
  ChipTrainer(engine::ChipEngine* engine, const DenseNet& net, int batch, const Optimizer& opt);
  ChipTrainer(engine::ChipEngine* engine, CompiledStep step, const Optimizer& opt);
  void Start(const DenseState& state);
  // One step on `b`; with `next`, the next step's batch goes into the chip during this one
  // (and that step must be given it). A step whose batch was not given before reads it
  // first (the fetch program), and its cycles and counters include that read's.
  StepOut Step(const Batch& b, const Batch* next = nullptr);
  DenseState State();
  // The weight gradients of the last step, per layer as its parameters (dense_net.h): the
  // bfloat16 values the update took.
  std::vector<std::vector<float>> Gradients();
  const engine::ExecResult& LastStep() const { return last_; }
  // Forgets the steps run so far: Steps() and PassCounters() count from the next step on
  // (tpusim train --timing-only times a step of the steady state, after a first).
  void ClearCounters();
  uint64_t Steps() const { return steps_; }    // run by this trainer
  int64_t StepCount() const { return step_; }  // the state's: from the first step of training
  const DensePrograms& Programs() const { return programs_; }
  const Optimizer& optimizer() const { return opt_; }
  // Every step's counters split by pass (DensePrograms::pass_names), summed over the steps
  // run since; the rows add up to core 0's counters (the core that runs the step) exactly.
  const std::vector<hw::ChipCounters>& PassCounters() const { return attribution_.Rows(); }
  int ArrayDim() const { return engine_->Config().array_dim; }
  int Cores() const { return programs_.cores; }    // the cores a step's batch is split across
  int Passes() const { return programs_.passes; }  // the passes a core makes over its share
  // Records step `step` (StepCount's numbering, from 1) in `timeline` when it runs: its runs
  // (its batch's fetch where it has one, then the step) with each pass a slice on the layers
  // track, named by `names` (pass_names' order). nullptr: record none.
  void TraceStep(int64_t step, engine::Timeline* timeline, std::vector<std::string> names) {
    trace_step_ = step;
    trace_ = timeline;
    trace_names_ = std::move(names);
  }

 private:
  engine::CycleAttribution FreshAttribution() const;  // no run observed yet
  engine::ExecResult RunLoaded(const engine::Executable& exe);
  // Loads and runs `exe` with its instructions' passes `pass_of` observed.
  engine::ExecResult RunObserved(const engine::Executable& exe, std::vector<int32_t> pass_of);
  int32_t BatchInPass() const;

  engine::ChipEngine* engine_;
  Optimizer opt_;
  DensePrograms programs_;
  std::shared_ptr<const StepImages> images_;
  int64_t step_ = 0;
  uint64_t steps_ = 0;
  engine::ExecResult last_;
  engine::CycleAttribution attribution_;
  int parity_ = 0;                   // the batch buffer of the next step
  std::optional<Batch> prefetched_;  // the batch already in it
  int64_t trace_step_ = 0;           // TraceStep's
  engine::Timeline* trace_ = nullptr;
  std::vector<std::string> trace_names_;
};

}  // namespace tpu::train
