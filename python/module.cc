// tpusim._core: the simulator's C++ behind the Python package (python/tpusim/__init__.py,
// docs/python.md). NumPy arrays in and out; tpusim's UsageError becomes ValueError (bad
// input, with the CLI's message) and its RuntimeError RuntimeError; the GIL is released
// while an engine runs.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "host/gemm/gemm_engines.h"
#include "host/gemm/gemm_runner.h"
#include "host/nn/bf16.h"
#include "host/report/gemm_report.h"

namespace py = pybind11;

// libsystemc.so (linked through the RTL models) refers to sc_main, which its main() would
// call; a Python process never runs that main(), but the library must resolve the name to
// load. Visible, since pybind11 hides the module's symbols.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) { return 1; }

namespace tpu::python {
namespace {

// A preset (or config file) with fields replaced: `overrides` is a JSON object of field
// names and values, checked as a config file's are.
config::TpuConfig MakeConfig(const std::string& name, const std::string& overrides) {
  nlohmann::json j = config::LoadConfig(name).ToJson();
  const nlohmann::json o = nlohmann::json::parse(overrides);
  for (const auto& [key, value] : o.items()) j[key] = value;
  return config::FromJson(j, name, "tpusim.Config('" + name + "')");
}

// The operand `arg` as a matrix of T (int8_t, or float32 rounded to bfloat16 bits):
// TypeError for another dtype, ValueError for another rank, a non-contiguous array or (in
// bf16) a NaN or infinity, each naming the argument.
template <class T>
Matrix<T> Operand(const py::array& x, const char* arg, const config::TpuConfig& c) {
  const bool bf16 = sizeof(T) == 2;
  const bool ok = bf16 ? py::isinstance<py::array_t<float>>(x) : py::isinstance<py::array_t<int8_t>>(x);
  if (!ok) {
    throw py::type_error(fmt::format(
        "{} is a {} array; config '{}' is an {} chip, whose tpusim.gemm takes {} arrays{}", arg,
        std::string(py::str(x.dtype())), c.name, bf16 ? "bf16" : "int8",
        bf16 ? "float32" : "int8",
        bf16 ? "" : " (a bf16 chip such as Config('tpu-v2') takes float32)"));
  }
  if (x.ndim() != 2) {
    throw py::value_error(fmt::format("{} must be 2-D (rows x columns), not {}-D", arg, x.ndim()));
  }
  if (!(x.flags() & py::array::c_style)) {
    throw py::value_error(fmt::format(
        "{} is not C-contiguous (a transposed or sliced view?); pass np.ascontiguousarray({})",
        arg, arg));
  }
  Matrix<T> m;
  m.rows = x.shape(0);
  m.cols = x.shape(1);
  m.data.resize(static_cast<size_t>(m.rows * m.cols));
  if constexpr (sizeof(T) == 1) {
    std::memcpy(m.data.data(), x.data(), m.data.size());
  } else {
    const auto* f = static_cast<const float*>(x.data());
    for (size_t i = 0; i < m.data.size(); ++i) {
      if (!std::isfinite(f[i])) {
        throw py::value_error(fmt::format("{}[{}, {}] is {}; operands must be finite numbers",
                                          arg, static_cast<int64_t>(i) / m.cols,
                                          static_cast<int64_t>(i) % m.cols, f[i]));
      }
      m.data[i] = nn::Bf16OfFp32(nn::BitsOfFloat(f[i]));
    }
  }
  return m;
}

// C = A x B on the config's matrix unit: (C, the report as JSON text).
template <class T>
py::tuple Gemm(const py::array& a_in, const py::array& b_in, const config::TpuConfig& c,
               const std::string& engine_name) {
  const Matrix<T> a = Operand<T>(a_in, "a", c), b = Operand<T>(b_in, "b", c);
  if (a.cols != b.rows) {
    throw py::value_error(fmt::format("a is {} x {} but b is {} x {}: a's columns must equal b's rows",
                                      a.rows, a.cols, b.rows, b.cols));
  }
  if (engine_name == "systemc") {
    throw py::value_error(
        "engine 'systemc' elaborates a SystemC system once per process; use 'rtl' (the same "
        "RTL, Verilated, a fresh model each call) or 'fast'");
  }
  const gemm::GemmPlan plan = gemm::PlanGemm({a.rows, a.cols, b.cols}, c.array_dim, c.acc_depth_rows);
  const auto engine = gemm::MakeGemmEngine(engine_name, c, 8 * static_cast<int>(sizeof(T)));
  gemm::GemmRunResult r;
  {
    py::gil_scoped_release release;
    if constexpr (sizeof(T) == 1) {
      r = gemm::RunGemm(plan, a, b, *engine, {});
    } else {
      r = gemm::RunGemmBf16(plan, a, b, *engine, {});
    }
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
      o[i] = nn::FloatOfBits(static_cast<uint32_t>(r.c.data[i]));
    return py::make_tuple(out, report);
  }
}

}  // namespace
}  // namespace tpu::python

PYBIND11_MODULE(_core, m) {
  using namespace tpu;  // NOLINT(google-build-using-namespace): the module's one namespace
  m.doc() = "tpusim's C++ core (use the package tpusim)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  py::class_<config::TpuConfig>(m, "Config")
      .def(py::init(&python::MakeConfig), py::arg("name"), py::arg("overrides") = "{}")
      .def_readonly("name", &config::TpuConfig::name)
      .def_readonly("array_dim", &config::TpuConfig::array_dim)
      .def("json", [](const config::TpuConfig& c) { return c.ToJson().dump(); })
      .def("is_bf16", [](const config::TpuConfig& c) { return c.dtype == hw::Dtype::kBf16; });
  m.def(
      "gemm",
      [](const py::array& a, const py::array& b, const config::TpuConfig& c,
         const std::string& engine) {
        return c.dtype == hw::Dtype::kBf16 ? python::Gemm<uint16_t>(a, b, c, engine)
                                           : python::Gemm<int8_t>(a, b, c, engine);
      },
      py::arg("a"), py::arg("b"), py::arg("config"), py::arg("engine"));
}
