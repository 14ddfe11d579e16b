// Every lane runs once per Run, concurrently, and Run waits for all.
#include "core/step_pool.h"

#include <atomic>
#include <set>
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

}  // namespace
}  // namespace lockstep
