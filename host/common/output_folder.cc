// Output folders written beside their target and renamed into place (see output_folder.h).
#include "host/common/output_folder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "host/common/errors.h"
#include "host/common/interrupt.h"
#include "host/common/leftovers.h"

namespace tpu {
namespace fs = std::filesystem;
namespace {

// The folder `dir` names, without a trailing separator; refuses names that are no folder
// of their own (".", "..", "/", the current folder or one above it).
fs::path Target(const std::string& dir, const OutputKind& kind) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.empty() && !p.has_filename()) p = p.parent_path();
  const std::string leaf = p.filename().string();
  std::error_code ec;
  const fs::path here = fs::current_path(ec), full = fs::weakly_canonical(p, ec);
  const bool holds_here =
      !ec && std::mismatch(full.begin(), full.end(), here.begin(), here.end()).first == full.end();
  if (p.empty() || leaf == "." || leaf == ".." || p == p.root_path() || holds_here) {
    throw UsageError(fmt::format(
        "cannot write {} '{}': it is the current folder or one above it; give the name of a "
        "new folder, e.g. '{}'",
        kind.name, dir, kind.name == "model folder" ? "my-model" : "out"));
  }
  return p;
}

// Every string in the manifest that is a plain file name: the files a previous output holds.
void CollectNames(const nlohmann::json& j, std::set<std::string>* names) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (!s.empty() && s.find('/') == std::string::npos && s != "." && s != "..") names->insert(s);
  } else if (j.is_structured()) {
    for (const auto& v : j) CollectNames(v, names);
  }
}

// The files of `dir` that a previous output of `kind` wrote: its manifest, if it parses,
// and the regular files the manifest names. Empty when `dir` has no manifest.
std::set<std::string> OwnedFiles(const fs::path& dir, const OutputKind& kind) {
  std::set<std::string> owned;
  const fs::path manifest = dir / kind.manifest;
  if (!fs::is_regular_file(fs::symlink_status(manifest))) return owned;
  std::ifstream in(manifest);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return owned;
  CollectNames(j, &owned);
  owned.insert(kind.manifest);
  return owned;
}

// The entries of `dir` that are not files of a previous output of `kind` (folders end in /).
std::vector<std::string> ForeignEntries(const fs::path& dir, const OutputKind& kind) {
  const std::set<std::string> owned = OwnedFiles(dir, kind);
  std::vector<std::string> foreign;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool file = fs::is_regular_file(e.symlink_status());
    if (!file || !owned.count(name)) foreign.push_back(name + (e.is_directory() ? "/" : ""));
  }
  std::sort(foreign.begin(), foreign.end());
  return foreign;
}

void Check(const fs::path& p, const std::string& dir, const OutputKind& kind) {
  const fs::file_status s = fs::symlink_status(p);
  if (!fs::exists(s)) return;
  if (!fs::is_directory(s)) {
    throw UsageError(fmt::format("cannot write {} '{}': a {} is in its place; give another name",
                                 kind.name, dir, fs::is_symlink(s) ? "link" : "file"));
  }
  const std::vector<std::string> foreign = ForeignEntries(p, kind);
  if (foreign.empty()) return;
  std::string list;
  for (size_t i = 0; i < std::min<size_t>(foreign.size(), 4); ++i) {
    list += (i ? ", " : "") + foreign[i];
  }
  if (foreign.size() > 4) list += fmt::format(" and {} more", foreign.size() - 4);
  throw UsageError(fmt::format(
      "cannot write {} '{}': it holds what tpusim did not write as a {} ({}); nothing was "
      "written or removed: give a new or empty folder",
      kind.name, dir, kind.name, list));
}

// A name beside `p` that nothing has: `.NAME.WHAT<pid>-<n>`.
fs::path Beside(const fs::path& p, const std::string& what) {
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  for (int n = 0;; ++n) {
    const fs::path c =
        parent / fmt::format(".{}.{}{}-{}", p.filename().string(), what, ::getpid(), n);
    if (!fs::exists(fs::symlink_status(c))) return c;
  }
}

// Removes a previous output of `kind` in `old` file by file, only the files its manifest
// names; the folder goes only if that empties it.
void RemovePrevious(const fs::path& old, const OutputKind& kind) {
  std::error_code ec;
  for (const std::string& name : OwnedFiles(old, kind)) {
    if (name != kind.manifest) fs::remove(old / name, ec);
  }
  fs::remove(old / kind.manifest, ec);
  fs::remove(old, ec);
}

// Clears what a writer of `p` that was stopped outright (SIGKILL) left beside it
// (leftovers.h): a commit stopped between its two renames puts the previous output back in
// place; a temporary folder loses its files, and goes if that empties it.
void ClearLeftovers(const fs::path& p, const OutputKind& kind) {
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string base = "." + p.filename().string() + ".";
  std::error_code ec;
  for (const fs::path& old : LeftBehind(parent, base + "old")) {
    if (!fs::is_directory(fs::symlink_status(old))) continue;
    if (!fs::exists(fs::symlink_status(p))) {
      fs::rename(old, p, ec);
    } else {
      RemovePrevious(old, kind);
    }
  }
  for (const fs::path& tmp : LeftBehind(parent, base + "tmp")) {
    if (!fs::is_directory(fs::symlink_status(tmp))) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(tmp, ec)) {
      if (fs::is_regular_file(e.symlink_status())) fs::remove(e.path(), ec);
    }
    fs::remove(tmp, ec);
  }
}

}  // namespace

bool RemoveOutputFolder(const std::string& dir, const OutputKind& kind) {
  const fs::path p = Target(dir, kind);
  ClearLeftovers(p, kind);
  const fs::file_status s = fs::symlink_status(p);
  if (!fs::exists(s)) return true;
  if (!fs::is_directory(s) || !ForeignEntries(p, kind).empty() || OwnedFiles(p, kind).empty()) {
    return false;
  }
  std::error_code ec;
  for (const std::string& name : OwnedFiles(p, kind)) {
    if (name != kind.manifest) fs::remove(p / name, ec);
  }
  fs::remove(p / kind.manifest, ec);
  return fs::remove(p, ec) && !ec;
}

void CheckOutputFolder(const std::string& dir, const OutputKind& kind) {
  Check(Target(dir, kind), dir, kind);
}

OutputFolder::OutputFolder(const std::string& dir, OutputKind kind)
    : dir_(Target(dir, kind)), kind_(std::move(kind)) {
  ClearLeftovers(dir_, kind_);
  Check(dir_, dir, kind_);
  std::error_code ec;
  if (dir_.has_parent_path()) fs::create_directories(dir_.parent_path(), ec);
  tmp_ = Beside(dir_, "tmp");
  guard_ = std::make_unique<RemoveOnInterrupt>(tmp_.string());
  if (ec || !fs::create_directory(tmp_, ec)) {
    throw RuntimeError(fmt::format("cannot create {} '{}': {}", kind_.name, dir,
                                   ec ? ec.message() : "the temporary folder exists"));
  }
  lock_ = std::make_unique<TempLock>(tmp_);
}

OutputFolder::~OutputFolder() {
  std::error_code ec;
  if (!committed_) fs::remove_all(tmp_, ec);
}

std::string OutputFolder::File(const std::string& name) {
  const std::string p = (tmp_ / name).string();
  files_.push_back(std::make_unique<RemoveOnInterrupt>(p));
  return p;
}

void OutputFolder::Commit() {
  Check(dir_, dir_.string(), kind_);  // again: the folder may have changed since
  std::error_code ec;
  const bool had = fs::exists(fs::symlink_status(dir_));
  const fs::path old = Beside(dir_, "old");
  std::optional<TempLock> old_lock;  // moves with the folder
  if (had) {
    old_lock.emplace(dir_);
    fs::rename(dir_, old, ec);
  }
  if (!ec) fs::rename(tmp_, dir_, ec);
  if (ec) {
    std::error_code ignored;
    if (had && !fs::exists(dir_)) fs::rename(old, dir_, ignored);
    throw RuntimeError(
        fmt::format("cannot write {} '{}': {}", kind_.name, dir_.string(), ec.message()));
  }
  committed_ = true;
  files_.clear();
  guard_.reset();
  lock_.reset();
  if (had) RemovePrevious(old, kind_);
}

}  // namespace tpu
