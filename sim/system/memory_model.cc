// External memory model (see memory_model.h).
#include "sim/system/memory_model.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace tpu::sim {

namespace {

uint64_t CheckedSize(const std::string& name, uint64_t size_bytes, const MemoryTiming& timing) {
  if (size_bytes == 0) throw std::invalid_argument(name + ": memory size must be at least 1 byte");
  if (timing.bytes_per_cycle == 0) {
    throw std::invalid_argument(name + ": bandwidth must be at least 1 byte per cycle");
  }
  return size_bytes;
}

}  // namespace

MemoryModel::MemoryModel(std::string name, uint64_t size_bytes, MemoryTiming timing)
    : name_(std::move(name)),
      timing_(timing),
      size_(CheckedSize(name_, size_bytes, timing)),
      bytes_(size_bytes) {}

namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

void MemoryModel::Check(uint64_t addr, uint64_t len, const char* what) const {
  if (!InRange(addr, len)) {
    throw std::out_of_range(name_ + ": " + what + " of " + std::to_string(len) + " bytes at " +
                            Hex(addr) + " is outside its " + std::to_string(size_) + " bytes");
  }
}

void MemoryModel::Write(uint64_t addr, const uint8_t* data, uint64_t len) {
  Check(addr, len, "write");
  std::memcpy(&bytes_[addr], data, len);
  bytes_written_ += len;
}

void MemoryModel::Read(uint64_t addr, uint8_t* data, uint64_t len) {
  Peek(addr, data, len);
  bytes_read_ += len;
}

void MemoryModel::Peek(uint64_t addr, uint8_t* data, uint64_t len) const {
  Check(addr, len, "read");
  std::memcpy(data, &bytes_[addr], len);
}

}  // namespace tpu::sim
