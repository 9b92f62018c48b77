// NumPy .npy reading and writing (see npy.h). Format:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include "host/common/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "host/common/atomic_file.h"
#include "host/common/errors.h"

namespace tpu {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxElements = int64_t{1} << 31;

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw UsageError(path + ": " + what);
}

// Value that follows 'key': in the header dictionary.
std::string Field(const std::string& path, const std::string& dict, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  size_t p = dict.find(quoted);
  if (p == std::string::npos) Fail(path, "not a valid .npy file (header has no " + quoted + ")");
  p = dict.find(':', p + quoted.size());
  if (p == std::string::npos) Fail(path, "not a valid .npy file (malformed header)");
  ++p;
  while (p < dict.size() && dict[p] == ' ') ++p;
  if (p >= dict.size()) Fail(path, "not a valid .npy file (header ends after " + quoted + ")");
  size_t end;
  if (dict[p] == '\'') {
    end = dict.find('\'', p + 1);
    if (end == std::string::npos) Fail(path, "not a valid .npy file (malformed header)");
    return dict.substr(p + 1, end - p - 1);
  }
  if (dict[p] == '(') {
    end = dict.find(')', p);
    if (end == std::string::npos) Fail(path, "not a valid .npy file (malformed header)");
    return dict.substr(p, end - p + 1);
  }
  end = dict.find_first_of(",}", p);
  return dict.substr(p, end - p);
}

Header ParseHeader(const std::string& path, const std::string& dict) {
  Header h;
  h.descr = Field(path, dict, "descr");
  const std::string fo = Field(path, dict, "fortran_order");
  if (fo != "True" && fo != "False") Fail(path, "not a valid .npy file (bad fortran_order)");
  h.fortran_order = (fo == "True");
  const std::string shape = Field(path, dict, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    Fail(path, "not a valid .npy file (shape '" + shape + "' is not a tuple)");
  }
  std::string inner = shape.substr(1, shape.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    try {
      size_t used = 0;
      long long v = std::stoll(item.substr(a), &used);
      if (v < 0) throw std::out_of_range("negative");
      h.shape.push_back(v);
    } catch (const std::exception&) {
      Fail(path, "not a valid .npy file (bad shape " + shape + ")");
    }
  }
  return h;
}

std::string DtypeName(const std::string& descr) {
  if (descr == "|i1") return "int8";
  if (descr == "|u1") return "uint8";
  if (descr == "<i2") return "int16";
  if (descr == "<i4") return "int32";
  if (descr == "<i8") return "int64";
  if (descr == "<f4") return "float32";
  if (descr == "<f8") return "float64";
  if (descr == "|b1") return "bool";
  return descr;
}

template <typename T>
struct Dtype;
template <>
struct Dtype<int8_t> {
  static constexpr const char* kDescr = "|i1";
  static constexpr const char* kName = "int8";
};
template <>
struct Dtype<int32_t> {
  static constexpr const char* kDescr = "<i4";
  static constexpr const char* kName = "int32";
};
template <>
struct Dtype<float> {
  static constexpr const char* kDescr = "<f4";
  static constexpr const char* kName = "float32";
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The magic, version and header dictionary at the start of the .npy file `in`, parsed.
Header ReadHeader(std::ifstream& in, const std::string& path) {
  char magic[6] = {};
  in.read(magic, 6);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) {
    Fail(path, "not a NumPy .npy file (bad magic); save arrays with numpy.save");
  }
  unsigned char version[2] = {};
  in.read(reinterpret_cast<char*>(version), 2);
  uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char b[2] = {};
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (version[0] == 2 || version[0] == 3) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    Fail(path, "unsupported .npy format version " + std::to_string(version[0]));
  }
  if (!in || header_len > (1u << 20)) Fail(path, "not a valid .npy file (truncated header)");
  std::string dict(header_len, '\0');
  in.read(dict.data(), header_len);
  if (!in) Fail(path, "not a valid .npy file (truncated header)");
  return ParseHeader(path, dict);
}

template <typename T>
Tensor<T> ReadTensor(const std::string& path) {
  const std::string want_descr = Dtype<T>::kDescr;
  const std::string want_name = Dtype<T>::kName;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  }
  const Header h = ReadHeader(in, path);

  if (h.descr != want_descr) {
    Fail(path, "dtype is " + DtypeName(h.descr) + " ('" + h.descr + "') but " + want_name + " ('" +
                   want_descr + "') is needed; convert with a.astype(np." + want_name + ")");
  }
  Tensor<T> t;
  t.shape = h.shape;
  int64_t count = 1;
  for (int64_t d : t.shape) {
    if (d != 0 && count > kMaxElements / d) Fail(path, "is too large (over 2^31 elements)");
    count *= d;
  }
  // The data must be in the file before anything is allocated for it.
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const int64_t available = static_cast<int64_t>(in.tellg() - data_start);
  in.seekg(data_start);
  if (available < count * static_cast<int64_t>(sizeof(T))) {
    Fail(path, "is truncated: expected " + std::to_string(count * sizeof(T)) +
                   " data bytes for shape " + ShapeText(t.shape) + ", found " +
                   std::to_string(available));
  }
  t.data.resize(static_cast<size_t>(count));
  in.read(reinterpret_cast<char*>(t.data.data()), count * static_cast<int64_t>(sizeof(T)));
  if (in.gcount() != count * static_cast<int64_t>(sizeof(T))) {
    Fail(path, "is truncated: expected " + std::to_string(count * sizeof(T)) +
                   " data bytes for shape " + ShapeText(t.shape) + ", found " +
                   std::to_string(in.gcount()));
  }
  if (in.peek() != std::char_traits<char>::eof()) {
    Fail(path, "has extra bytes after the data for shape " + ShapeText(t.shape));
  }
  if (h.fortran_order && t.shape.size() > 1) {  // column-major on disk: reorder to row-major
    std::vector<T> rm(t.data.size());
    const size_t rank = t.shape.size();
    std::vector<int64_t> idx(rank, 0);
    for (int64_t f = 0; f < count; ++f) {
      // f is the Fortran-order position of idx; compute its C-order position.
      int64_t c = 0;
      for (size_t k = 0; k < rank; ++k) c = c * t.shape[k] + idx[k];
      rm[static_cast<size_t>(c)] = t.data[static_cast<size_t>(f)];
      for (size_t k = 0; k < rank; ++k) {  // first index varies fastest in Fortran order
        if (++idx[k] < t.shape[k]) break;
        idx[k] = 0;
      }
    }
    t.data.swap(rm);
  }
  return t;
}

template <typename T>
Matrix<T> ReadNpy(const std::string& path) {
  Tensor<T> t = ReadTensor<T>(path);
  if (t.shape.size() != 2) {
    Fail(path, "has " + std::to_string(t.shape.size()) +
                   " dimensions but a 2-D matrix is needed (reshape it to rows x cols)");
  }
  Matrix<T> m;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  if (m.rows == 0 || m.cols == 0) {
    Fail(path, "shape (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                   ") is empty; every dimension must be at least 1");
  }
  m.data = std::move(t.data);
  return m;
}

template <typename T>
void WriteTensor(const std::string& path, const std::vector<int64_t>& shape, const T* data,
                 size_t count) {
  std::string dict = std::string("{'descr': '") + Dtype<T>::kDescr +
                     "', 'fortran_order': False, 'shape': " + ShapeText(shape) + ", }";
  // Pad so that magic + version + length + dict + '\n' is a multiple of 64 bytes.
  const size_t unpadded = 6 + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string bytes(kMagic, 6);
  bytes.push_back('\x01');
  bytes.push_back('\x00');
  bytes.push_back(static_cast<char>(dict.size() & 0xff));
  bytes.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  bytes += dict;
  bytes.append(reinterpret_cast<const char*>(data), count * sizeof(T));
  WriteFileAtomically(path, bytes);
}

}  // namespace

Matrix<int8_t> ReadNpyInt8(const std::string& path) { return ReadNpy<int8_t>(path); }
Matrix<int32_t> ReadNpyInt32(const std::string& path) { return ReadNpy<int32_t>(path); }
void WriteNpyInt32(const std::string& path, const Matrix<int32_t>& m) {
  WriteTensor(path, {m.rows, m.cols}, m.data.data(), m.data.size());
}
void WriteNpyInt8(const std::string& path, const Matrix<int8_t>& m) {
  WriteTensor(path, {m.rows, m.cols}, m.data.data(), m.data.size());
}

template <typename T>
Tensor<T> ReadNpyTensor(const std::string& path) {
  return ReadTensor<T>(path);
}
template <typename T>
void WriteNpyTensor(const std::string& path, const Tensor<T>& t) {
  if (t.Size() != static_cast<int64_t>(t.data.size())) {
    throw std::invalid_argument("WriteNpyTensor: shape does not match the data size");
  }
  WriteTensor(path, t.shape, t.data.data(), t.data.size());
}
template Tensor<float> ReadNpyTensor<float>(const std::string&);
template Tensor<int8_t> ReadNpyTensor<int8_t>(const std::string&);
template Tensor<int32_t> ReadNpyTensor<int32_t>(const std::string&);
template void WriteNpyTensor<float>(const std::string&, const Tensor<float>&);
template void WriteNpyTensor<int8_t>(const std::string&, const Tensor<int8_t>&);
template void WriteNpyTensor<int32_t>(const std::string&, const Tensor<int32_t>&);

}  // namespace tpu
