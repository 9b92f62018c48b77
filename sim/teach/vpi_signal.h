// Reading a Verilated model's signals by hierarchical name through VPI (models built with
// --vpi --public-flat-rw: the teaching models). Shared by sim/teach/mxu_probe.h and
// sim/teach/os_probe.h.
#pragma once

#include <verilated_vpi.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "contract/tpu_signals.h"

namespace tpu::sim::vpi {

// Verilator's VPI spells generate-loop scopes either with the brackets, gen_row[0], or as
// its generated code does, gen_row__BRA__0__KET__ (Verilator 5.006 does both, depending on
// how the scope was flattened); Find tries both.
inline std::string Replace(std::string name, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = name.find(from, at)) != std::string::npos; at += to.size())
    name.replace(at, from.size(), to);
  return name;
}

inline vpiHandle Find(const std::string& name) {
  vpiHandle h = vpi_handle_by_name(const_cast<PLI_BYTE8*>(name.c_str()), nullptr);
  if (!h) {
    const std::string mangled = Replace(Replace(name, "[", "__BRA__"), "]", "__KET__");
    h = vpi_handle_by_name(const_cast<PLI_BYTE8*>(mangled.c_str()), nullptr);
  }
  if (!h) {
    throw std::runtime_error("the teaching model has no signal " + name +
                             " (it must be built with --vpi --public-flat-rw)");
  }
  return h;
}

// The handles a probe looks up, released with it (Verilator allocates an object for each
// vpi_handle_by_name, which LeakSanitizer reports if it is never released).
class HandleSet {
 public:
  HandleSet() = default;
  HandleSet(const HandleSet&) = delete;
  HandleSet& operator=(const HandleSet&) = delete;
  ~HandleSet() {
    for (vpiHandle h : handles_) vpi_release_handle(h);
  }
  vpiHandle Find(const std::string& name) {
    handles_.push_back(vpi::Find(name));
    return handles_.back();
  }

 private:
  std::vector<vpiHandle> handles_;
};

// `width` bits from bit `lsb` of a signal, as an unsigned number (width <= 32).
inline uint32_t Bits(vpiHandle h, int lsb, int width) {
  s_vpi_value v;
  v.format = vpiVectorVal;
  vpi_get_value(h, &v);
  const int words = (vpi_get(vpiSize, h) + 31) / 32;
  const int w = lsb / 32;
  const uint64_t lo = static_cast<uint32_t>(v.value.vector[w].aval);
  const uint64_t hi = w + 1 < words ? static_cast<uint32_t>(v.value.vector[w + 1].aval) : 0;
  const uint64_t bits = ((hi << 32) | lo) >> (lsb % 32);
  return static_cast<uint32_t>(bits & ((uint64_t{1} << width) - 1));
}

// Bits for a row index of an array of n rows (at least 1).
inline int BitsFor(int n) {
  int b = 0;
  while ((1 << b) < n) ++b;
  return b > 0 ? b : 1;
}

// The registers of every PE and the array-level signals of a teaching model, looked up
// once by the names of a probe in contract/tpu_signals.toml (checked against the RTL at
// build time): `pe` is a PE's scope with {r} and {c}, `regs` its registers, `signals`
// paths below the top.
class ArrayProbe {
 public:
  ArrayProbe(int dim, std::string_view scope, std::string_view pe,
             std::initializer_list<std::string_view> regs,
             std::initializer_list<std::string_view> signals)
      : dim_(dim), regs_(regs.size()) {
    const std::string top(scope);
    for (int r = 0; r < dim; ++r) {
      for (int c = 0; c < dim; ++c) {
        const std::string at = top + hw::signals::Fill(hw::signals::Fill(pe, 'r', r), 'c', c);
        for (std::string_view reg : regs) pe_.push_back(handles_.Find(at + std::string(reg)));
      }
    }
    for (std::string_view s : signals) signals_.push_back(handles_.Find(top + std::string(s)));
  }

  int dim() const { return dim_; }
  // `width` bits of register `reg` (its place in `regs`) of the PE at row-major index i.
  uint32_t Pe(size_t i, size_t reg, int width) const {
    return Bits(pe_[i * regs_ + reg], 0, width);
  }
  // `width` bits from bit `lsb` of signal `i` (its place in `signals`).
  uint32_t Signal(size_t i, int lsb, int width) const { return Bits(signals_[i], lsb, width); }

 private:
  HandleSet handles_;  // first: released after the handles below are dropped
  int dim_;
  size_t regs_;
  std::vector<vpiHandle> pe_, signals_;
};

}  // namespace tpu::sim::vpi
