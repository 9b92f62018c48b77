// NumPy matrices as the simulator's operands (tpusim.gemm, tpusim.teach).
#pragma once

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include <cmath>
#include <cstring>
#include <string>

#include "arith/bf16.h"
#include "host/common/npy.h"

namespace tpu::python {

namespace py = pybind11;

// The operand `arg` as a matrix of T (int8_t, or float32 rounded to bfloat16 bits):
// TypeError for another dtype, ValueError for another rank, a non-contiguous array or (in
// bf16) a NaN or infinity, each naming the argument.
// `takes` says what the call takes instead, after "a is a float64 array; ".
template <class T>
Matrix<T> Operand(const py::array& x, const char* arg, const std::string& takes) {
  const bool bf16 = sizeof(T) == 2;
  const bool ok =
      bf16 ? py::isinstance<py::array_t<float>>(x) : py::isinstance<py::array_t<int8_t>>(x);
  if (!ok) {
    throw py::type_error(
        fmt::format("{} is a {} array; {}", arg, std::string(py::str(x.dtype())), takes));
  }
  if (x.ndim() != 2) {
    throw py::value_error(fmt::format("{} must be 2-D (rows x columns), not {}-D", arg, x.ndim()));
  }
  if (!(x.flags() & py::array::c_style)) {
    throw py::value_error(fmt::format(
        "{} is not C-contiguous (a transposed or sliced view?); pass np.ascontiguousarray({})", arg,
        arg));
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
        throw py::value_error(fmt::format("{}[{}, {}] is {}; operands must be finite numbers", arg,
                                          static_cast<int64_t>(i) / m.cols,
                                          static_cast<int64_t>(i) % m.cols, f[i]));
      }
      m.data[i] = arith::Bf16OfFp32(arith::BitsOfFloat(f[i]));
    }
  }
  return m;
}

// ValueError unless a's columns equal b's rows (C = A x B).
template <class T>
void CheckInner(const Matrix<T>& a, const Matrix<T>& b) {
  if (a.cols != b.rows) {
    throw py::value_error(
        fmt::format("a is {} x {} but b is {} x {}: a's columns must equal b's rows", a.rows,
                    a.cols, b.rows, b.cols));
  }
}

}  // namespace tpu::python
