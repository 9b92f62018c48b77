// Reading IDX files (the MNIST format), gzip-compressed or not, with every field checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::data {

// An IDX file of unsigned bytes: dims[0] items of dims[1] x dims[2] ... bytes each.
struct IdxArray {
  std::vector<int32_t> dims;
  std::vector<uint8_t> data;
};

// Reads `path` (.gz through zlib, or uncompressed) and checks it: magic number 0x0000,
// type 0x08 (unsigned byte), `rank` dimensions, each positive, and a length of exactly
// header + product(dims) bytes. Throws UsageError naming the file and what is wrong.
IdxArray ReadIdx(const std::string& path, int rank);

}  // namespace tpu::data
