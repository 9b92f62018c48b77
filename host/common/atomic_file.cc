// All-or-nothing output files (see atomic_file.h).
#include "host/common/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "host/common/errors.h"
#include "host/common/interrupt.h"
#include "host/common/leftovers.h"

namespace tpu {
namespace fs = std::filesystem;

void CheckWritable(const std::string& path) {
  if (path.empty()) throw RuntimeError("empty output path");
  if (fs::is_directory(path)) {
    throw RuntimeError("cannot write '" + path + "': it is a folder; give a file name");
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent)) {
    throw RuntimeError("cannot write '" + path + "': folder '" + parent.string() +
                       "' does not exist");
  }
  if (::access(parent.c_str(), W_OK) != 0) {
    throw RuntimeError("cannot write '" + path + "': no permission to write in '" +
                       parent.string() + "'");
  }
}

void WriteFileAtomically(const std::string& path, const std::string& contents) {
  CheckWritable(path);
  const fs::path target(path);
  // What a writer of this file that was killed outright left.
  std::error_code ignored;
  for (const fs::path& p : LeftBehind(target.parent_path(), target.filename().string() + ".tmp")) {
    if (fs::is_regular_file(fs::symlink_status(p))) fs::remove(p, ignored);
  }
  const std::string tmp = path + ".tmp" + TempSuffix();
  const RemoveOnInterrupt cleanup(tmp);
  std::optional<TempLock> lock;  // until the rename
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw RuntimeError("cannot write '" + path + "': " + std::strerror(errno));
    }
    lock.emplace(tmp);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw RuntimeError("cannot write '" + path + "': write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw RuntimeError("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace tpu
