// Fork/join over persistent lanes.
#include "core/step_pool.h"

namespace lockstep {

StepPool::StepPool(int lanes) : lanes_(lanes < 1 ? 1 : lanes) {
  for (int lane = 1; lane < lanes_; ++lane) {
    threads_.emplace_back([this, lane] { Loop(lane); });
  }
}

StepPool::~StepPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void StepPool::Run(const std::function<void(int)>& fn) {
  if (lanes_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    pending_ = lanes_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  thrown_.Run([&] { fn(0); });
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
  }
  thrown_.RethrowIfAny();
}

void StepPool::Loop(int lane) {
  int64_t seen = 0;
  while (true) {
    const std::function<void(int)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return shutdown_ || generation_ != seen; });
      if (shutdown_) return;
      seen = generation_;
      fn = fn_;
    }
    thrown_.Run([&] { (*fn)(lane); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace lockstep
