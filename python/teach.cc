// tpusim._core's teach (docs/python.md): a GEMM on a teaching build of the matrix unit,
// every PE of every cycle read from the RTL, returned as the data `tpusim teach --html`
// shows (teach::TeachJson), or as the page itself.
#include "host/teach/teach.h"

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "host/common/errors.h"
#include "python/core.h"
#include "python/operands.h"

namespace py = pybind11;

namespace tpu::python {
namespace {

// Dataflows by name: ws, os, or both.
std::vector<teach::Dataflow> DataflowsOf(const std::string& name) {
  if (name == "ws") return {teach::Dataflow::kWeightStationary};
  if (name == "os") return {teach::Dataflow::kOutputStationary};
  if (name == "both")
    return {teach::Dataflow::kWeightStationary, teach::Dataflow::kOutputStationary};
  throw py::value_error("dataflow must be 'ws', 'os' or 'both', not '" + name + "'");
}

template <class T>
std::vector<std::unique_ptr<teach::Recording>> Record(const py::array& a_in, const py::array& b_in,
                                                      int dim, const std::string& dataflow) {
  const bool bf16 = sizeof(T) == 2;
  const std::string takes = "tpusim.teach takes int8 arrays, or float32 ones (bfloat16 lesson)";
  const Matrix<T> a = Operand<T>(a_in, "a", takes), b = Operand<T>(b_in, "b", takes);
  CheckInner(a, b);
  if (bf16 && dataflow != "ws") {
    throw py::value_error(
        "a bfloat16 lesson (float32 a and b) shows the chip's weight-stationary array; the "
        "output-stationary teaching array is int8 only (use dataflow='ws')");
  }
  std::vector<std::unique_ptr<teach::Recording>> runs;
  for (teach::Dataflow d : DataflowsOf(dataflow)) {
    const uint64_t cycles = teach::PredictTeachCycles(d, a.rows, a.cols, b.cols, dim);
    if (cycles > teach::kMaxTeachCycles) {
      throw py::value_error(fmt::format(
          "this product takes {} cycles on a {} x {} array; teach records at most {}: use "
          "smaller matrices (tpusim.gemm runs any size)",
          cycles, dim, dim, teach::kMaxTeachCycles));
    }
    py::gil_scoped_release release;
    runs.push_back(teach::Record(d, a, b, dim));
  }
  return runs;
}

// (the lesson's data as JSON text, one entry per dataflow; the HTML page).
py::tuple Teach(const py::array& a, const py::array& b, int dim, const std::string& dataflow) {
  if (dim < 2 || dim > 256) {
    throw py::value_error(fmt::format("array={} is out of range; use 2 to 8 for teaching", dim));
  }
  const bool bf16 = py::isinstance<py::array_t<float>>(a);
  const auto runs =
      bf16 ? Record<uint16_t>(a, b, dim, dataflow) : Record<int8_t>(a, b, dim, dataflow);
  nlohmann::json data = nlohmann::json::array();
  std::vector<const teach::Recording*> shown;
  for (const auto& r : runs) {
    if (!r->matches_reference) throw RuntimeError("the RTL result differs from the reference");
    data.push_back(teach::TeachJson(*r));
    shown.push_back(r.get());
  }
  return py::make_tuple(data.dump(), teach::TeachHtml(shown));
}

}  // namespace

void AddTeach(py::module_& m) {
  m.def("teach", &Teach, py::arg("a"), py::arg("b"), py::arg("array"), py::arg("dataflow"));
}

}  // namespace tpu::python
