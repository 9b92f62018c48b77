// A one-line progress bar on stderr, drawn only when stderr is a terminal (so logs and
// pipes stay clean) and only for runs that last long enough to need one.
#pragma once

#include <chrono>
#include <string>

namespace tpu {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool enabled = true);
  ~ProgressBar();
  // fraction in [0, 1]; `note` is shown after the bar (e.g. the running loss).
  void Update(double fraction, const std::string& note = "");
  void Finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tpu
