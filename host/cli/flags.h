// The one place where the fields that libraries name in their messages (Field("batch"),
// host/common/errors.h) become the command line's flags.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace tpu::cli {

// Every field a library names, and the flag that sets it.
const std::map<std::string, std::string, std::less<>>& FieldFlags();
// A library's message in the command line's terms: each field shown as its flag (a field
// with no flag keeps its name).
std::string InFlagTerms(std::string_view marked);

}  // namespace tpu::cli
