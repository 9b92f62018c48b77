// tpusim._core: the simulator's C++ behind the Python package (python/tpusim/__init__.py,
// docs/python.md). NumPy arrays in and out; tpusim's UsageError becomes ValueError (bad
// input, with the CLI's message) and its RuntimeError RuntimeError; the GIL is released
// while an engine runs.
#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>

#include "host/common/errors.h"
#include "host/config/tpu_config.h"
#include "python/core.h"

namespace py = pybind11;

// libsystemc.so (linked through the RTL models) refers to sc_main, which its main() would
// call; a Python process never runs that main(), but the library must resolve the name to
// load. Visible, since pybind11 hides the module's symbols.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char**) { return 1; }

namespace tpu::python {

config::TpuConfig MakeConfig(const std::string& name, const std::string& overrides) {
  nlohmann::json j = config::LoadConfig(name).ToJson();
  const nlohmann::json o = nlohmann::json::parse(overrides);
  for (const auto& [key, value] : o.items()) j[key] = value;
  return config::FromJson(j, name, "tpusim.Config('" + name + "')");
}

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
  python::AddGemm(m);
  python::AddModels(m);
  python::AddTeach(m);
  m.def("source_dir", [] { return std::string(TPUSIM_SOURCE_DIR); });
  m.def("cli_path", [] { return std::string(TPUSIM_CLI_PATH); });
}
