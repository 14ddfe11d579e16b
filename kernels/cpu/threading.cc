// A fork/join pool with persistent threads: a ParallelFor costs two
// condition-variable handoffs, not thread creation.
#include "kernels/cpu/threading.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {
namespace {

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

class Pool {
 public:
  explicit Pool(int workers) {
    threads_.reserve(workers);
    for (int w = 0; w < workers; ++w) {
      threads_.emplace_back([this, w] { Loop(w + 1); });
    }
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  // Calls fn(i) for i in [0, chunks), chunks <= workers() + 1; the caller
  // runs chunk 0. Blocks until every chunk is done.
  void Run(int chunks, absl::FunctionRef<void(int)> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      chunks_ = chunks;
      pending_ = chunks - 1;
      ++generation_;
    }
    start_cv_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  void Loop(int chunk) {
    int64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (chunk >= chunks_) continue;
      const absl::FunctionRef<void(int)>* fn = fn_;
      lock.unlock();
      (*fn)(chunk);
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const absl::FunctionRef<void(int)>* fn_ = nullptr;
  int chunks_ = 0;
  int pending_ = 0;
  int64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

std::atomic<int> g_threads{0};  // 0: not set yet (every core)
std::mutex g_pool_mu;           // held while the pool runs or is rebuilt
std::unique_ptr<Pool> g_pool;
thread_local bool t_inside = false;

}  // namespace

void SetNumThreads(int n) {
  if (n <= 0) n = HardwareThreads();
  std::lock_guard<std::mutex> lock(g_pool_mu);
  g_threads.store(n);
  if (g_pool != nullptr && g_pool->workers() != n - 1) g_pool.reset();
  openblas_set_num_threads(n);
}

int NumThreads() {
  const int n = g_threads.load();
  return n > 0 ? n : HardwareThreads();
}

void ParallelFor(int64_t n, int64_t min_grain,
                 absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  min_grain = std::max<int64_t>(min_grain, 1);
  const int threads = NumThreads();
  const int64_t chunks = std::min<int64_t>(threads, n / min_grain);
  if (chunks <= 1 || t_inside) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(g_pool_mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    fn(0, n);
    return;
  }
  if (g_pool == nullptr || g_pool->workers() != threads - 1) {
    g_pool = std::make_unique<Pool>(threads - 1);
  }
  g_pool->Run(static_cast<int>(chunks), [&](int c) {
    const bool was_inside = t_inside;
    t_inside = true;
    fn(n * c / chunks, n * (c + 1) / chunks);
    t_inside = was_inside;
  });
}

}  // namespace lockstep
