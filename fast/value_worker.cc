// The fast engine's values on a second thread (see value_worker.h).
#include "fast/value_worker.h"

#include <utility>

namespace tpu::fast {

ValueWorker::~ValueWorker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ValueWorker::Apply(const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    if (s.d != nullptr) {
      s.values->Issue(*s.d);
    } else if (s.hbm) {
      s.values->HbmWrite(s.addr, s.ub_row);
    } else {
      s.values->HostWrite(s.addr, s.ub_row);
    }
  }
}

void ValueWorker::WaitIdle() {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [this] { return !busy_ && queued_.empty(); });
  if (error_) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    lock.unlock();
    pending_.clear();
    std::rethrow_exception(e);
  }
}

void ValueWorker::Hand() {
  {
    std::lock_guard<std::mutex> lock(m_);
    queued_.insert(queued_.end(), pending_.begin(), pending_.end());
  }
  pending_.clear();
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
}

void ValueWorker::Finish() {
  if (thread_.joinable()) WaitIdle();
  std::vector<Step> rest = std::move(pending_);
  pending_.clear();
  Apply(rest);
}

void ValueWorker::Loop() {
  std::vector<Step> working;
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    cv_.wait(lock, [this] { return !queued_.empty() || stop_; });
    if (queued_.empty()) return;  // stopped
    working.swap(queued_);
    busy_ = true;
    const bool failed = error_ != nullptr;  // then the rest are dropped until Finish reports it
    lock.unlock();
    std::exception_ptr error;
    if (!failed) {
      try {
        Apply(working);
      } catch (...) {
        error = std::current_exception();
      }
    }
    working.clear();
    lock.lock();
    if (error) error_ = error;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace tpu::fast
