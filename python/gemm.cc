// tpusim._core's gemm (docs/python.md): C = A x B on the chip's matrix unit, NumPy arrays in
// and out, on the fast model or a fresh Verilated model per call.
#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <cmath>
#include <cstring>
#include <string>

#include "arith/bf16.h"
#include "host/common/errors.h"
#include "host/gemm/gemm_engines.h"
#include "host/gemm/gemm_runner.h"
#include "host/report/gemm_report.h"
#include "python/core.h"
#include "python/operands.h"

namespace py = pybind11;

namespace tpu::python {
namespace {

// C = A x B on the config's matrix unit: (C, the report as JSON text).
template <class T>
py::tuple Gemm(const py::array& a_in, const py::array& b_in, const config::TpuConfig& c,
               const std::string& engine_name) {
  const bool bf16 = sizeof(T) == 2;
  const std::string takes =
      fmt::format("config '{}' is an {} chip, whose tpusim.gemm takes {} arrays{}", c.name,
                  bf16 ? "bf16" : "int8", bf16 ? "float32" : "int8",
                  bf16 ? "" : " (a bf16 chip such as Config('tpu-v2') takes float32)");
  const Matrix<T> a = Operand<T>(a_in, "a", takes), b = Operand<T>(b_in, "b", takes);
  CheckInner(a, b);
  if (engine_name == "systemc") {
    throw py::value_error(
        "engine 'systemc' elaborates a SystemC system once per process; use 'rtl' (the same "
        "RTL, Verilated, a fresh model each call) or 'fast'");
  }
  const gemm::GemmPlan plan =
      gemm::PlanGemm({a.rows, a.cols, b.cols}, c.array_dim, c.acc_depth_rows);
  const auto engine = gemm::MakeGemmEngine(engine_name, c, 8 * static_cast<int>(sizeof(T)));
  gemm::GemmRunResult r;
  {
    py::gil_scoped_release release;
    r = gemm::RunGemm(plan, a, b, *engine, {});
  }
  if (!r.matches_reference) {
    throw RuntimeError("the " + r.engine + " engine's result differs from the reference");
  }
  const std::string report = report::GemmReportJson(r, c).dump();
  if constexpr (sizeof(T) == 1) {
    py::array_t<int32_t> out({r.c.rows, r.c.cols});
    std::memcpy(out.mutable_data(), r.c.data.data(), r.c.data.size() * sizeof(int32_t));
    return py::make_tuple(out, report);
  } else {
    py::array_t<float> out({r.c.rows, r.c.cols});
    float* o = out.mutable_data();
    for (size_t i = 0; i < r.c.data.size(); ++i)
      o[i] = arith::FloatOfBits(static_cast<uint32_t>(r.c.data[i]));
    return py::make_tuple(out, report);
  }
}

}  // namespace

void AddGemm(py::module_& m) {
  m.def(
      "gemm",
      [](const py::array& a, const py::array& b, const config::TpuConfig& c,
         const std::string& engine) {
        return c.dtype == hw::Dtype::kBf16 ? Gemm<uint16_t>(a, b, c, engine)
                                           : Gemm<int8_t>(a, b, c, engine);
      },
      py::arg("a"), py::arg("b"), py::arg("config"), py::arg("engine"));
}

}  // namespace tpu::python
