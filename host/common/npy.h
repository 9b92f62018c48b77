// Reading and writing 2-D NumPy .npy arrays (format versions 1.0 to 3.0), so operands
// and results can be made and checked with numpy directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu {

template <typename T>
struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<T> data;  // row-major
  T& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  const T& at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
};

// An N-dimensional array as stored in a .npy file: row-major (C order) data.
template <typename T>
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<T> data;
  int64_t Size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Reads an array of any rank. T is float (<f4), int8_t (|i1) or int32_t (<i4); a file of
// another dtype is a UsageError naming the file, its dtype and the conversion to make.
template <typename T>
Tensor<T> ReadNpyTensor(const std::string& path);
// Writes an array (C order) under a temporary name, then renames it.
template <typename T>
void WriteNpyTensor(const std::string& path, const Tensor<T>& t);

// Reads a 2-D int8 array ('|i1', C or Fortran order). Throws UsageError with the file
// name and what is wrong (missing, unreadable, not .npy, wrong dtype, rank or size).
Matrix<int8_t> ReadNpyInt8(const std::string& path);
// Same for int32 ('<i4').
Matrix<int32_t> ReadNpyInt32(const std::string& path);

// Writes a 2-D int32 array ('<i4', C order) under a temporary name, then renames it.
// Throws RuntimeError when the file cannot be written.
void WriteNpyInt32(const std::string& path, const Matrix<int32_t>& m);
// Same for int8 ('|i1').
void WriteNpyInt8(const std::string& path, const Matrix<int8_t>& m);

}  // namespace tpu
