// An external memory of the TPU system (host memory, weight memory): bytes plus a timing
// model of latency and bandwidth, and traffic counters. Plain C++; the TPU system
// (tpu_system.h) serves its TLM socket and, through MemoryPort, the chip's DMA engines
// from it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "host/common/zeroed_memory.h"

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
  // Throws std::invalid_argument for a zero size or bandwidth, std::bad_alloc when the
  // address space cannot be reserved. The bytes are zero and take memory only once
  // written (the allocator maps large blocks lazily), so an 8 GiB weight memory that a job
  // fills with 30 MB costs 30 MB.
  MemoryModel(std::string name, uint64_t size_bytes, MemoryTiming timing);

  const std::string& Name() const { return name_; }
  uint64_t SizeBytes() const { return size_; }
  const MemoryTiming& Timing() const { return timing_; }
  bool InRange(uint64_t addr, uint64_t len) const { return addr <= size_ && len <= size_ - addr; }

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
  uint64_t size_ = 0;
  ZeroedMemory<uint8_t> bytes_;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
};

}  // namespace tpu::sim
