// tpusim._core's models (docs/python.md): Model (a model folder in memory), import_onnx,
// run on the fast engine in this process (the rtl engine runs in a worker process: the
// tpusim CLI, python/tpusim/__init__.py) and compile.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/common/progress_bar.h"
#include "host/compiler/compile_jobs.h"
#include "host/engine/fast_engine.h"
#include "host/import/onnx_import.h"
#include "host/isa/assembler.h"
#include "host/isa/isa.h"
#include "host/nn/inputs.h"
#include "host/nn/model.h"
#include "host/nn/quantize.h"
#include "host/report/energy.h"
#include "host/report/run_report.h"
#include "host/run/tpu_runner.h"
#include "python/core.h"

namespace py = pybind11;

namespace tpu::python {
namespace {

// What a model runs on, as the CLI's --inputs, --synthetic, --images, --dataset, --data.
struct InputSpec {
  py::object array;    // float32 N x C x H x W, or None
  int64_t images = 0;  // the first images of the set (0: all of it)
  int64_t synthetic = 0;
  uint64_t seed = 1;
  std::string dataset, data;
};

// The inputs as the CLI's LoadInputs makes them; `what` names the argument in messages.
nn::InputSet Inputs(const nn::Model& model, const InputSpec& s, const char* what) {
  if (s.images < 0) throw py::value_error("images must be at least 1 (or None: all)");
  nn::InputSet in;
  if (!s.array.is_none()) {
    if (!py::isinstance<py::array_t<float>>(s.array)) {
      throw py::type_error(fmt::format("{} must be a float32 NumPy array (N x C x H x W), not {}",
                                       what, std::string(py::str(s.array.get_type()))));
    }
    const auto a = py::array_t<float>::ensure(s.array);
    if (!(a.flags() & py::array::c_style)) {
      throw py::value_error(fmt::format(
          "{} is not C-contiguous (a transposed or sliced view?); pass np.ascontiguousarray({})",
          what, what));
    }
    Tensor<float> t;
    t.shape.assign(a.shape(), a.shape() + a.ndim());
    t.data.assign(a.data(), a.data() + a.size());
    in = nn::InputsFromTensor(t, model, what);
    in.source = "inputs from Python";
  } else if (s.synthetic > 0) {
    in = nn::SyntheticInputs(model, s.synthetic, s.seed);
  } else {
    in = nn::InputsFromMnist(nn::LoadTestSet(model, s.dataset, s.data, 0));
  }
  if (s.images > in.count) {
    throw py::value_error(
        fmt::format("images={} is more than the {} {}", s.images, in.count, in.source));
  }
  return s.images == 0 || s.images == in.count ? in : nn::SliceInputs(in, 0, s.images);
}

// The chip's outputs, N x outputs: int8 codes (an int8 chip) or bfloat16 values as float32.
py::array Outputs(const run::TpuRunResult& r, int64_t outputs) {
  if (!r.logits_bf16.empty()) {
    py::array_t<float> y({static_cast<int64_t>(r.logits_bf16.size()), outputs});
    float* p = y.mutable_data();
    for (const auto& row : r.logits_bf16)
      for (uint16_t v : row) *p++ = arith::FloatOfBits(arith::Fp32OfBf16(v));
    return std::move(y);
  }
  py::array_t<int8_t> y({static_cast<int64_t>(r.logits.size()), outputs});
  int8_t* p = y.mutable_data();
  for (const auto& row : r.logits) p = std::copy(row.begin(), row.end(), p);
  return std::move(y);
}

// tpusim run on the fast engine: (outputs or None, output scale, the report's JSON text).
py::tuple RunFast(const nn::Model& model, const config::TpuConfig& config, const InputSpec& spec,
                  int batch, bool timing_only, bool host_im2col, bool progress) {
  const bool fit = batch == 0 && !host_im2col;
  if (batch == 0) batch = 64;
  run::CheckBatch(batch);
  const nn::InputSet inputs = Inputs(model, spec, "inputs");
  const report::EnergyTable table = report::LoadEnergyTable(report::DefaultEnergyTablePath());
  engine::EngineOptions options;
  options.timing_only = timing_only;
  engine::FastEngine engine(config, options);
  run::TpuRunResult r;
  {
    py::gil_scoped_release release;
    ProgressBar bar("run", progress);
    // After each batch: the bar, and Ctrl-C (KeyboardInterrupt) seen by Python.
    const auto after_batch = [&](double f) {
      bar.Update(f);
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    run::CompileChoices how;
    how.layer_jobs = host_im2col;
    how.fit_batch = fit;
    r = run::RunModelOnTpu(model, engine, inputs, inputs.count, batch, after_batch, how);
    bar.Finish();
  }
  report::RunReport rep =
      report::BuildRunReport(r, model.name, engine.Name(), config, table, r.batch);
  rep.inputs = inputs.source;
  const py::object y =
      timing_only ? py::none() : py::object(Outputs(r, model.layers.back().out.Size()));
  return py::make_tuple(y, r.output_scale, report::RunReportJson(rep).dump());
}

py::bytes Bytes(const void* p, size_t n) { return {static_cast<const char*>(p), n}; }

// tpusim compile: the jobs of the first inputs, each as a dict of bytes and text.
py::list Compile(const nn::Model& model, const config::TpuConfig& config, const InputSpec& spec,
                 bool host_im2col) {
  nn::RequireQuantized(model);
  const nn::InputSet set = Inputs(model, spec, "inputs");
  const int batch = static_cast<int>(set.count);
  const auto x = nn::Int8Inputs(model, set, 0, batch);
  const compiler::CompiledJobs c = compiler::CompileJobs(
      model, config, std::vector<int8_t>(x.data(), x.data() + x.size()), batch, host_im2col);
  py::list jobs;
  for (const compiler::NamedJob& j : c.jobs) {
    const engine::ExecJob& e = j.job.exec;
    py::dict d;
    d["name"] = j.name;
    d["summary"] = j.job.summary;
    d["program"] = py::bytes(isa::ProgramBytes(e.program));
    d["disassembly"] = isa::Disassemble(e.program);
    d["instructions"] = e.program.words.size();
    d["host_image"] = Bytes(e.host_image.data(), e.host_image.size());
    d["weight_image"] = Bytes(e.weight_image.data(), e.weight_image.size());
    d["host_out_addr"] = e.host_out_addr;
    d["host_out_bytes"] = e.host_out_bytes;
    d["layer_jobs_why"] = c.layer_jobs_why;
    jobs.append(d);
  }
  return jobs;
}

// tpusim import [--quantize]: calibration on `calibration` (an array) or `synthetic` inputs.
nn::Model Import(const std::string& path, const std::string& name, const std::string& dataset,
                 bool quantize, const InputSpec& cal, int64_t calibration_inputs) {
  import::OnnxImportOptions opt;
  opt.name = name;
  opt.dataset = dataset;
  nn::Model m = import::ImportOnnx(path, opt);
  if (!quantize) return m;
  if (cal.array.is_none() && cal.synthetic == 0) {
    throw py::value_error(
        "quantize=True needs calibration inputs: calibration=<float32 N x C x H x W array> or "
        "synthetic=N");
  }
  if (calibration_inputs < 1) throw py::value_error("calibration_inputs must be at least 1");
  const nn::InputSet set = Inputs(m, cal, "calibration");
  py::gil_scoped_release release;
  nn::Quantize(&m, set, calibration_inputs);
  return m;
}

InputSpec Spec(py::object array, int64_t images, int64_t synthetic, uint64_t seed,
               std::string dataset, std::string data) {
  return {std::move(array), images, synthetic, seed, std::move(dataset), std::move(data)};
}

}  // namespace

void AddModels(py::module_& m) {
  py::class_<nn::Model>(m, "Model")
      .def(py::init(&nn::LoadModel), py::arg("path"))
      .def_readonly("name", &nn::Model::name)
      .def_readonly("quantized", &nn::Model::quantized)
      .def_readonly("dataset", &nn::Model::dataset)
      .def_property_readonly(
          "input_chw",
          [](const nn::Model& x) { return py::make_tuple(x.input.c, x.input.h, x.input.w); })
      .def_property_readonly("outputs",
                             [](const nn::Model& x) { return x.layers.back().out.Size(); })
      .def_property_readonly("layers", [](const nn::Model& x) { return x.layers.size(); })
      // The model ends in a softmax (an ONNX Softmax or LogSoftmax): the chip's outputs are
      // the logits before it.
      .def_property_readonly(
          "final_softmax",
          [](const nn::Model& x) { return x.layers.back().activation == nn::Activation::kSoftmax; })
      .def("summary", &nn::Summary)
      .def("save", [](const nn::Model& x, const std::string& dir) { nn::SaveModel(x, dir); });
  py::class_<InputSpec>(m, "Inputs")
      .def(py::init(&Spec), py::arg("array"), py::arg("images"), py::arg("synthetic"),
           py::arg("seed"), py::arg("dataset"), py::arg("data"));
  m.def("import_onnx", &Import, py::arg("path"), py::arg("name"), py::arg("dataset"),
        py::arg("quantize"), py::arg("calibration"), py::arg("calibration_inputs"));
  m.def("run_fast", &RunFast, py::arg("model"), py::arg("config"), py::arg("inputs"),
        py::arg("batch"), py::arg("timing_only"), py::arg("host_im2col"), py::arg("progress"));
  m.def("compile", &Compile, py::arg("model"), py::arg("config"), py::arg("inputs"),
        py::arg("host_im2col"));
}

}  // namespace tpu::python
