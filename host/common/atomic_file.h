// Writing output files all-or-nothing: the bytes go to a temporary file next to the
// target, which is renamed over it only when complete.
#pragma once

#include <string>

namespace tpu {

// Throws RuntimeError naming the path when the file cannot be written.
void WriteFileAtomically(const std::string& path, const std::string& contents);

// Throws RuntimeError when `path` could not be created (missing folder, no permission,
// a folder in its place), so a long run can fail before it starts.
void CheckWritable(const std::string& path);

}  // namespace tpu
