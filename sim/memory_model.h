// An external memory of the TPU system (host memory, weight memory): bytes plus a timing
// model of latency and bandwidth, and traffic counters. Plain C++; the TPU system
// (tpu_system.h) serves its TLM socket and, through MemoryPort, the chip's DMA engines
// from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpu::sim {

struct MemoryTiming {
  uint32_t latency_cycles = 0;   // from request to first byte
  uint32_t bytes_per_cycle = 8;  // bandwidth once data flows, >= 1

  // Cycles to move `bytes` bytes in one transfer: latency + ceil(bytes / bandwidth).
  uint64_t TransferCycles(uint64_t bytes) const {
    return latency_cycles + (bytes + bytes_per_cycle - 1) / bytes_per_cycle;
  }
};

class MemoryModel {
 public:
  // Throws std::invalid_argument for a zero size or bandwidth.
  MemoryModel(std::string name, uint64_t size_bytes, MemoryTiming timing);

  const std::string& Name() const { return name_; }
  uint64_t SizeBytes() const { return bytes_.size(); }
  const MemoryTiming& Timing() const { return timing_; }
  bool InRange(uint64_t addr, uint64_t len) const {
    return addr <= bytes_.size() && len <= bytes_.size() - addr;
  }

  // Throw std::out_of_range naming the memory and the range when it does not fit.
  void Write(uint64_t addr, const uint8_t* data, uint64_t len);
  void Read(uint64_t addr, uint8_t* data, uint64_t len);
  // Debug access: the same, without counting traffic.
  void Peek(uint64_t addr, uint8_t* data, uint64_t len) const;

  uint64_t BytesRead() const { return bytes_read_; }
  uint64_t BytesWritten() const { return bytes_written_; }

 private:
  void Check(uint64_t addr, uint64_t len, const char* what) const;

  std::string name_;
  MemoryTiming timing_;
  std::vector<uint8_t> bytes_;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace tpu::sim
