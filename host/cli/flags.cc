// Fields as flags (see flags.h). tests/host/cli/flags_cli_test.cc checks that every field
// named in the sources is here and that every flag here is one of tpusim's options.
#include "host/cli/flags.h"

#include "host/common/errors.h"

namespace tpu::cli {

const std::map<std::string, std::string, std::less<>>& FieldFlags() {
  static const std::map<std::string, std::string, std::less<>> kFlags = {
      {"array", "--array"},
      {"batch", "--batch"},
      {"data", "--data"},
      {"dataset", "--dataset"},
      {"engine", "--engine"},
      {"host_im2col", "--host-im2col"},
      {"inputs", "--inputs"},
      {"set", "--set"},
      {"synthetic", "--synthetic"},
      {"timeline", "--timeline"},
      {"timing_only", "--timing-only"},
      {"topology", "--topology"},
      {"trace", "--trace"},
      {"trace_end", "--trace-end"},
      {"trace_start", "--trace-start"},
  };
  return kFlags;
}

std::string InFlagTerms(std::string_view marked) {
  return ShowFields(marked, [](std::string_view field) {
    const auto it = FieldFlags().find(field);
    return it == FieldFlags().end() ? std::string(field) : it->second;
  });
}

}  // namespace tpu::cli
