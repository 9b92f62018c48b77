// Zero-filled memory for the chip's memories, mapped from the OS rather than allocated: the
// pages cost nothing until they are touched (tpu-v1 has 8 GiB of weight memory, of which a
// run touches what it uses), a page after the end faults on an overrun, and a sanitizer
// build does not poison a shadow for it (ASan's allocator writes 1 GiB of shadow for each
// 8 GiB calloc, per chip made, which made tpu-v1 runs under ASan a thousand times slower).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>

namespace tpu {

template <class T>
class ZeroedMemory {
 public:
  explicit ZeroedMemory(uint64_t count) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t bytes = (count * sizeof(T) + page - 1) / page * page;
    mapped_ = static_cast<size_t>(bytes + page);  // + the guard page
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (mprotect(static_cast<char*>(p) + bytes, static_cast<size_t>(page), PROT_NONE) != 0) {
      munmap(p, mapped_);
      throw std::bad_alloc();
    }
    data_ = static_cast<T*>(p);
  }
  ~ZeroedMemory() { munmap(data_, mapped_); }
  ZeroedMemory(const ZeroedMemory&) = delete;
  ZeroedMemory& operator=(const ZeroedMemory&) = delete;

  T* get() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t mapped_ = 0;
};

}  // namespace tpu
