// IDX reading (see idx.h). Format: http://yann.lecun.com/exdb/mnist/ (bottom of the page).
#include "host/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "host/common/errors.h"

namespace tpu::data {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw UsageError(path + ": " + what);
}

// The whole file, decompressed. gzread passes uncompressed files through unchanged.
std::vector<uint8_t> Slurp(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) Fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      Fail(path, std::string("is corrupted or truncated (") + msg + ")");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  // A gzip stream cut short reads as a clean end of file in some zlib versions.
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    Fail(path, std::string("is corrupted or truncated (") + msg + ")");
  }
  return bytes;
}

}  // namespace

IdxArray ReadIdx(const std::string& path, int rank) {
  const std::vector<uint8_t> b = Slurp(path);
  if (b.size() < 4)
    Fail(path, "is too short to be an IDX file (" + std::to_string(b.size()) + " bytes)");
  if (b[0] != 0 || b[1] != 0) {
    Fail(path, "bad magic number (IDX files start with two zero bytes); is this an MNIST file?");
  }
  if (b[2] != 0x08) {
    Fail(path, "element type 0x" + std::to_string(b[2]) + " is not 0x08 (unsigned byte)");
  }
  if (b[3] != rank) {
    Fail(path, "has " + std::to_string(b[3]) + " dimensions, expected " + std::to_string(rank));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (b.size() < header) Fail(path, "is truncated inside its header");
  IdxArray a;
  uint64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* p = &b[4 + 4 * i];
    const uint32_t d =
        (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    if (d == 0 || d > (1u << 24)) {
      Fail(path, "dimension " + std::to_string(i) + " is " + std::to_string(d) + ", not plausible");
    }
    a.dims.push_back(static_cast<int32_t>(d));
    count *= d;
  }
  if (b.size() != header + count) {
    Fail(path, "length is " + std::to_string(b.size()) + " bytes but its header promises " +
                   std::to_string(header + count) + " (" +
                   (b.size() < header + count ? "truncated" : "extra bytes at the end") + ")");
  }
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

}  // namespace tpu::data
