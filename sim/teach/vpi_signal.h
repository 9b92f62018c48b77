// Reading a Verilated model's signals by hierarchical name through VPI (models built with
// --vpi --public-flat-rw: the teaching models). Shared by sim/teach/mxu_probe.h and
// sim/teach/os_probe.h.
#pragma once

#include <verilated_vpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tpu::sim::vpi {

// Verilator's VPI spells generate-loop scopes either as its generated code does,
// gen_row__BRA__0__KET__ for gen_row[0], or with the brackets (Verilator 5.006 does both,
// depending on how the scope was flattened); Find tries both.
inline std::string Index(const std::string& scope, int i);

// The hierarchical prefix of PE (r, c) of an array generated as gen_row[r].gen_col[c].u_pe
// (both teaching arrays): "ARRAY.gen_row[r].gen_col[c].u_pe."
inline std::string PePath(const std::string& array, int r, int c) {
  return array + Index("gen_row", r) + "." + Index("gen_col", c) + ".u_pe.";
}

inline std::string Index(const std::string& scope, int i) {
  return scope + "__BRA__" + std::to_string(i) + "__KET__";
}

inline std::string WithBrackets(std::string name) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"__BRA__", "["}, {"__KET__", "]"}}) {
    for (size_t at = 0; (at = name.find(from, at)) != std::string::npos;)
      name.replace(at, from.size(), to);
  }
  return name;
}

inline vpiHandle Find(const std::string& name) {
  vpiHandle h = vpi_handle_by_name(const_cast<PLI_BYTE8*>(name.c_str()), nullptr);
  if (!h) {
    const std::string bracketed = WithBrackets(name);
    h = vpi_handle_by_name(const_cast<PLI_BYTE8*>(bracketed.c_str()), nullptr);
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

}  // namespace tpu::sim::vpi
