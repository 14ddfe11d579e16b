// Every lane runs once per Run, concurrently, and Run waits for all.
#include "core/step_pool.h"

#include <atomic>
#include <chrono>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(StepPoolTest, RunsEveryLaneOncePerRound) {
  for (int lanes : {1, 2, 3, 5}) {
    StepPool pool(lanes);
    std::vector<int> hits(lanes, 0);
    for (int round = 0; round < 200; ++round) {
      pool.Run([&](int lane) { ++hits[lane]; });
    }
    for (int lane = 0; lane < lanes; ++lane) EXPECT_EQ(hits[lane], 200);
  }
}

TEST(StepPoolTest, LanesRunOnDistinctThreadsAndRunWaits) {
  StepPool pool(3);
  std::atomic<int> arrived{0};
  std::set<std::thread::id> ids;
  std::mutex mu;
  pool.Run([&](int) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    ++arrived;
    // Every lane waits for the others: only possible if they run at once.
    while (arrived.load() < 3) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 3);
  EXPECT_EQ(ids.size(), 3u);
}

// Memory that runs out on a lane (std::bad_alloc) reaches the caller, after
// every lane has returned, instead of ending the process; the pool runs on.
TEST(StepPoolTest, ALanesExceptionIsRethrownToTheCaller) {
  StepPool pool(3);
  std::atomic<int> finished{0};
  try {
    pool.Run([&](int lane) {
      if (lane == 2) throw std::bad_alloc();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++finished;
    });
    ADD_FAILURE() << "Run returned";
  } catch (const std::bad_alloc&) {
  }
  EXPECT_EQ(finished.load(), 2) << "rethrown before the other lanes ended";
  // The caller's own lane, and two at once: one is rethrown.
  EXPECT_THROW(pool.Run([](int lane) {
    if (lane == 0) throw std::runtime_error("lane 0");
  }),
               std::runtime_error);
  EXPECT_THROW(pool.Run([](int lane) {
    if (lane > 0) throw std::bad_alloc();
  }),
               std::bad_alloc);
  // Nothing carried into the next round.
  std::atomic<int> ran{0};
  pool.Run([&](int) { ++ran; });
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace lockstep
