// Writing an output folder (a model folder, compile's jobs) all-or-nothing and without
// losing anything of the user's: the folder is written whole beside its target and renamed
// into place; a target that holds anything but a previous output of the same kind is
// refused before anything is written. What a writer stopped outright (SIGKILL) left beside the
// target is cleared by the next write (leftovers.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace tpu {

class RemoveOnInterrupt;
class TempLock;

// What an output folder is: its name in messages ("model folder") and its manifest, the
// JSON file every such folder holds, whose string values name the folder's other files.
// A folder holding the manifest and only files it names is a previous output of the kind.
struct OutputKind {
  std::string name;      // "model folder"
  std::string manifest;  // "model.json"
};

// Throws UsageError unless `dir` may receive an output of `kind`: it does not exist, is an
// empty folder, or is a previous output of the same kind (which the write replaces). The
// message names what is in the way. Commands call it before a long run, so that the run
// does not end in a refusal.
void CheckOutputFolder(const std::string& dir, const OutputKind& kind);

// Removes `dir` when it is a previous output of `kind` (its manifest and only files the
// manifest names): those files, then the folder. Anything else there keeps it all: returns
// false and removes nothing. A `dir` that does not exist is true.
bool RemoveOutputFolder(const std::string& dir, const OutputKind& kind);

class OutputFolder {
 public:
  // Checks `dir` (CheckOutputFolder) and creates the temporary folder beside it (and the
  // folders above it that do not exist yet).
  OutputFolder(const std::string& dir, OutputKind kind);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  // The path of a file in the folder being written; an interrupt removes it.
  std::string File(const std::string& name);
  // Moves the folder into place. A previous output there is removed file by file, only the
  // files its manifest names, so that nothing else is ever deleted.
  void Commit();

 private:
  std::filesystem::path dir_, tmp_;
  OutputKind kind_;
  std::unique_ptr<RemoveOnInterrupt> guard_;
  std::unique_ptr<TempLock> lock_;
  std::vector<std::unique_ptr<RemoveOnInterrupt>> files_;
  bool committed_ = false;
};

}  // namespace tpu
