// A fork/join pool with persistent threads. Between jobs a worker spins for
// a short while before it sleeps on a condition variable: the kernels of one
// training step call ParallelFor back to back (a GEMM, then its bias pass,
// ...), and waking a sleeping thread costs tens of microseconds on a VM,
// as much as a small job itself.
#include "kernels/cpu/threading.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/first_exception.h"

namespace lockstep {
namespace {

// How long an idle worker (or the caller waiting for workers) spins before
// blocking: long enough to bridge the gaps inside a step, short enough not
// to hold a core from other work between steps.
constexpr std::chrono::microseconds kSpin(200);

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

inline void CpuRelax() {
#ifdef __SSE2__
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
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
      stop_.store(true);
    }
    start_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  // Calls fn(i) for i in [0, chunks), chunks <= workers() + 1; the caller
  // runs chunk 0. Blocks until every chunk is done; then rethrows what a
  // chunk threw (std::bad_alloc), the first of them.
  void Run(int chunks, absl::FunctionRef<void(int)> fn) {
    fn_ = &fn;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    {
      // Under the lock so that a worker about to sleep sees the new job.
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t counter = job_.load(std::memory_order_relaxed) / kJobStep;
      job_.store((counter + 1) * kJobStep + chunks, std::memory_order_release);
      if (sleepers_ > 0) start_cv_.notify_all();
    }
    thrown_.Run([&] { fn(0); });
    auto done = [this] {
      return pending_.load(std::memory_order_acquire) == 0;
    };
    if (!SpinUntil(done)) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, done);
    }
    thrown_.RethrowIfAny();
  }

 private:
  // job_ packs a job counter with the job's chunk count (low bits), so a
  // worker reads both in one load and never pairs one job's counter with the
  // next job's count.
  static constexpr int64_t kJobStep = int64_t{1} << 16;

  void Loop(int chunk) {
    int64_t seen = 0;
    auto ready = [&] {
      return stop_.load(std::memory_order_relaxed) ||
             job_.load(std::memory_order_acquire) != seen;
    };
    for (;;) {
      if (!SpinUntil(ready)) {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        start_cv_.wait(lock, ready);
        --sleepers_;
      }
      if (stop_.load()) return;
      seen = job_.load(std::memory_order_acquire);
      // fn_ is this job's: the caller cannot start another until this
      // worker's chunk is counted down.
      if (chunk >= seen % kJobStep) continue;
      thrown_.Run([&] { (*fn_)(chunk); });
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Under the lock so the caller cannot miss the wake-up between its
        // check and its wait.
        std::lock_guard<std::mutex> lock(mu_);
        done_cv_.notify_one();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const absl::FunctionRef<void(int)>* fn_ = nullptr;
  std::atomic<int64_t> job_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  FirstException thrown_;  // what the job's chunks threw, for Run
  int sleepers_ = 0;       // guarded by mu_
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
}

int NumThreads() {
  const int n = g_threads.load();
  return n > 0 ? n : HardwareThreads();
}

bool InsideParallelFor() { return t_inside; }

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
    struct Inside {  // restored when fn throws too
      bool was = t_inside;
      Inside() { t_inside = true; }
      ~Inside() { t_inside = was; }
    } inside;
    fn(n * c / chunks, n * (c + 1) / chunks);
  });
}

}  // namespace lockstep
