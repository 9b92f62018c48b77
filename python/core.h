// The parts of tpusim._core (python/module.cc registers them): each Add* defines its calls
// on the module.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "host/config/tpu_config.h"

namespace tpu::python {

// tpusim.Config's C++ side: a preset (or config file) with fields replaced; `overrides` is
// a JSON object of field names and values, checked as a config file's are.
config::TpuConfig MakeConfig(const std::string& name, const std::string& overrides);

void AddGemm(pybind11::module_& m);
void AddModels(pybind11::module_& m);  // Model, import_onnx, run (fast engine), compile
void AddTeach(pybind11::module_& m);

}  // namespace tpu::python
