// What threads working for one caller threw, carried to that caller: the
// fork/join pools (core/step_pool, kernels/cpu/threading) and the gradient
// buckets' thread run work through it, and the thread that waits for them
// rethrows the first exception (std::bad_alloc) instead of the process
// ending.
#ifndef LOCKSTEP_BASE_FIRST_EXCEPTION_H_
#define LOCKSTEP_BASE_FIRST_EXCEPTION_H_

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace lockstep {

class FirstException {
 public:
  // Calls fn(); what it throws is kept (the first one; later ones are
  // dropped) instead of propagating. True when fn threw. Thread-safe.
  template <typename Fn>
  bool Run(Fn&& fn) {
    try {
      std::forward<Fn>(fn)();
      return false;
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      set_.store(true, std::memory_order_release);
      return true;
    }
  }
  // Rethrows the kept exception and forgets it; nothing when none was
  // thrown (one atomic load). Call once the threads that Run are done.
  void RethrowIfAny() {
    if (!set_.load(std::memory_order_acquire)) return;
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::swap(error, error_);
      set_.store(false, std::memory_order_relaxed);
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  std::atomic<bool> set_{false};
  std::mutex mu_;
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace lockstep

#endif  // LOCKSTEP_BASE_FIRST_EXCEPTION_H_
