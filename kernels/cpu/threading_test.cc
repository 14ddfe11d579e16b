#include "kernels/cpu/threading.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

void ExpectCoversOnce(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(n);
  for (auto& h : hits) h = 0;
  std::atomic<int> calls{0};
  ParallelFor(n, grain, [&](int64_t b, int64_t e) {
    ++calls;
    EXPECT_LE(0, b);
    EXPECT_LT(b, e);
    EXPECT_LE(e, n);
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << i;
  EXPECT_LE(calls.load(), NumThreads());
  if (n == 0) {
    EXPECT_EQ(calls.load(), 0);
  }
}

TEST(ThreadingTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    SetNumThreads(threads);
    EXPECT_EQ(NumThreads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64}) ExpectCoversOnce(n, grain);
    }
  }
}

TEST(ThreadingTest, DefaultIsEveryCore) {
  SetNumThreads(0);
  EXPECT_GE(NumThreads(), 1);
  EXPECT_EQ(NumThreads(), static_cast<int>(std::max(
                              1u, std::thread::hardware_concurrency())));
}

TEST(ThreadingTest, SmallRangesRunInline) {
  SetNumThreads(4);
  std::thread::id caller = std::this_thread::get_id();
  ParallelFor(10, 100, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
}

TEST(ThreadingTest, NestedAndConcurrentCallsComplete) {
  SetNumThreads(3);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 50; ++rep) {
      ParallelFor(30, 1, [&](int64_t b, int64_t e) {
        ParallelFor(e - b, 1,
                    [&](int64_t b2, int64_t e2) { total += e2 - b2; });
      });
    }
  };
  std::thread t1(work), t2(work);
  work();
  t1.join();
  t2.join();
  EXPECT_EQ(total.load(), 3 * 50 * 30);
}

// A chunk that throws on a pool thread (std::bad_alloc in a kernel's
// scratch) reaches the caller once every chunk is done, instead of
// ending the process; the pool and the caller's thread go on as before.
TEST(ThreadingTest, AChunksExceptionReachesTheCaller) {
  SetNumThreads(3);
  for (int thrower : {0, 2}) {  // the caller's chunk, a pool thread's
    std::atomic<int> finished{0};
    EXPECT_THROW(ParallelFor(3, 1,
                             [&](int64_t b, int64_t) {
                               if (b == thrower) throw std::bad_alloc();
                               std::this_thread::sleep_for(
                                   std::chrono::milliseconds(10));
                               ++finished;
                             }),
                 std::bad_alloc)
        << thrower;
    EXPECT_EQ(finished.load(), 2) << "rethrown before the other chunks ended";
    EXPECT_FALSE(InsideParallelFor());
  }
  ExpectCoversOnce(3000, 1);
}

TEST(ThreadingTest, ChunksAreSplitEvenly) {
  SetNumThreads(4);
  std::vector<std::pair<int64_t, int64_t>> ranges(4, {-1, -1});
  std::atomic<int> idx{0};
  ParallelFor(10, 1, [&](int64_t b, int64_t e) { ranges[idx++] = {b, e}; });
  EXPECT_EQ(idx.load(), 4);
  std::sort(ranges.begin(), ranges.end());
  EXPECT_EQ(ranges[0], std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(ranges[1], std::make_pair(int64_t{2}, int64_t{5}));
  EXPECT_EQ(ranges[2], std::make_pair(int64_t{5}, int64_t{7}));
  EXPECT_EQ(ranges[3], std::make_pair(int64_t{7}, int64_t{10}));
}

}  // namespace
}  // namespace lockstep
