// An elastic job on a real local cluster (issue "Elastic jobs"): 3 workers
// of a {"min": 2, "max": 3} job; kill -9 one and the job goes on with the
// two survivors from their memory once the rejoin grace is over; start a
// fresh worker and it grows back to 3 at a step boundary; the job
// SUCCEEDS with its membership history in result.json and a test accuracy
// within 0.005 of the same job trained by 3 replicas throughout, and its
// sample audit shows every sample of every epoch used exactly once.
#include <signal.h>
#include <stdio.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/fault_fixture.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::Clock;
using fault_fixture::FaultJob;
using fault_fixture::FaultTest;
using fault_fixture::Since;
using testing::RunResult;
using testing::Subprocess;

// FaultJob (8,000 samples, 4 epochs) as 2 to 3 workers: a global batch of
// 3 x 16 whatever the world (at 2 workers each replica takes 24 samples in
// micro-batches of 16 and 8), 668 steps; a rejoin grace of 2 s.
constexpr double kRejoinGrace = 2;
nlohmann::json ElasticJob() {
  return FaultJob(nlohmann::json::parse(R"({
    "cluster": {"workers": {"min": 2, "max": 3}, "rejoin_grace_seconds": 2,
                "start_grace_seconds": 30}})"));
}

// How many lines of `text` match `re`.
int CountLines(const std::string& text, const std::string& re) {
  const std::regex r(re);
  int n = 0;
  std::string line;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    line = text.substr(at,
                       end == std::string::npos ? std::string::npos : end - at);
    if (std::regex_search(line, r)) ++n;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return n;
}

TEST_F(FaultTest, ElasticJobShrinksOnAKillAndGrowsWhenAWorkerJoins) {
  // The same job with 3 replicas throughout, for the accuracy.
  nlohmann::json fixed = FaultJob(nlohmann::json::parse(
      R"({"cluster": {"workers": 1, "replicas_per_worker": 3}})"));
  const nlohmann::json alone =
      TrainAlone(fixed, testing::NewTempDir("fixed_world"));
  ASSERT_TRUE(alone.is_object());
  ASSERT_EQ(alone["steps"], 668);

  Start();  // 2 workers
  std::string why;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  // With the sample audit on (asserted at the end).
  ASSERT_EQ(Client({"submit", WriteJob(fault_fixture::Audited(ElasticJob()))})
                .exit.exit_code,
            0);
  // What a user watching the job sees, from before the change to the end.
  Subprocess watch({testing::Runfile("client/lockstep"), "watch", "ft",
                    "--coordinator", cluster_->address()},
                   testing::NewTempDir("elastic_watch"));
  std::string last;
  // All 3 registered: it starts with its max at once (no start grace).
  ASSERT_TRUE(WaitForStatus("rank 2 ", 20, &last)) << last;
  WaitForStep(100);
  Subprocess* victim = RankProcess(2);
  ASSERT_NE(victim, nullptr);
  victim->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  // `status` while it waits for a replacement within the rejoin grace:
  // what it waits for and how long, the last progress without a speed or
  // an ETA (none runs), and the membership so far.
  ASSERT_TRUE(
      WaitForStatus("waiting for a replacement worker: the rejoin "
                    "grace, then 2 go on: \\d s left",
                    20, &last))
      << last;
  EXPECT_TRUE(std::regex_search(
      last, std::regex(R"(last progress \(generation 1, not running now\): )"
                       R"(\[ft\] step \d+/668)")))
      << last;
  EXPECT_EQ(last.find("ETA"), std::string::npos) << last;
  EXPECT_EQ(last.find("samples/s"), std::string::npos) << last;
  EXPECT_NE(last.find("  membership: generation 1 from step 0: 3 workers (3 "
                      "replicas): start"),
            std::string::npos)
      << last;
  ASSERT_TRUE(
      WaitForStatus("RUNNING.*generation 2|generation 2.*RUNNING", 20, &last))
      << last;
  // Detection (a broken stream) + the rejoin grace + the start.
  const double resumed_after = Since(killed);
  EXPECT_LT(resumed_after, testing::Scaled(kRejoinGrace + 2.0)) << last;
  printf("generation 2 (2 workers) running %.2f s after the kill\n",
         resumed_after);
  // Grow: a fresh worker registers once the two have trained a while.
  WaitForStep(300);
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  std::smatch m;
  // The shrink: from the survivors' memory, only the broken step redone;
  // or from the latest checkpoint when it is the same step (1 run in 50).
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(
          R"(RUNNING generation 2 from step (\d+) (\(rank \d's memory)?)")))
      << w.out;
  const int shrink_step = std::stoi(m[1]);
  EXPECT_GE(shrink_step, 100);
  EXPECT_TRUE(m[2].matched || shrink_step % 50 == 0) << m[0];
  EXPECT_NE(w.out.find("membership: 3 -> 2 workers (of 2-3) from step " +
                       std::to_string(shrink_step) + ": rank 2 "),
            std::string::npos)
      << w.out;
  // The grow: at a step boundary, from the ranks' memory (or the latest
  // checkpoint, when the boundary is one: 1 run in 50), no restart.
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(
          R"(RUNNING generation 3 from step (\d+) (\(rank \d's memory; )"
          R"(the latest checkpoint is step \d+\) )?\(the world grows, )"
          R"([\d.]+ s later, no restart counted; no step is done again)")))
      << w.out;
  const int grow_step = std::stoi(m[1]);
  EXPECT_GE(grow_step, 300);
  EXPECT_TRUE(m[2].matched || grow_step % 50 == 0) << m[0];
  EXPECT_NE(w.out.find("1 idle worker can join: generation 2 ends at the "
                       "next step boundary to grow from 2 to 3 workers"),
            std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("membership: 2 -> 3 workers (of 2-3) from step " +
                       std::to_string(grow_step) +
                       ": 1 idle worker joins, from 2 to 3 workers"),
            std::string::npos)
      << w.out;
  // The shrink counted no restart, nor did the grow.
  EXPECT_NE(w.out.find("(the world shrinks from 3 to 2 workers "),
            std::string::npos)
      << w.out;

  // The watch that ran through both changes: each state change once (no
  // line repeated while the job waits), a countdown, no progress line while
  // nothing runs, the grow worded as a grow.
  ASSERT_TRUE(watch.Wait(60).exited);
  const std::string seen = watch.Stdout();
  printf("what lockstep watch printed:\n%s", seen.c_str());
  EXPECT_EQ(CountLines(seen, R"(^\[ft\] RECOVERING: rank 2 )"), 1) << seen;
  // The grow is worded as a grow: its event, once; its RECOVERING
  // (growing) state may pass between two snapshots of the watch.
  EXPECT_EQ(CountLines(seen, R"(^growing: generation 2 ended after step \d+: )"
                             R"(1 idle worker joins, from 2 to 3 workers \(no )"
                             R"(restart counted)"),
            1)
      << seen;
  EXPECT_LE(CountLines(seen, R"(^\[ft\] RECOVERING \(growing\): )"), 1) << seen;
  EXPECT_GE(CountLines(seen, R"(^\[ft\] waiting for a replacement worker: )"
                             R"(the rejoin grace, then 2 go on: \d s left$)"),
            1)
      << seen;
  EXPECT_EQ(CountLines(seen, R"(RECOVERING.*(failed|lost).*grow)"), 0) << seen;
  std::vector<std::string> lines = absl::StrSplit(seen, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].rfind("[ft] ", 0) == 0) {
      EXPECT_NE(lines[i], lines[i - 1]) << "repeated: " << lines[i];
    }
  }
  // `status` after the end: the whole membership history.
  const std::string st = Client({"status", "ft"}).out;
  EXPECT_NE(st.find("  membership: generation 2 from step " +
                    std::to_string(shrink_step) +
                    ": 2 workers (2 replicas): rank 2 "),
            std::string::npos)
      << st;
  EXPECT_NE(st.find("  membership: generation 3 from step " +
                    std::to_string(grow_step) +
                    ": 3 workers (3 replicas): 1 idle worker joins"),
            std::string::npos)
      << st;
  EXPECT_EQ(st.find(" restarts"), std::string::npos) << st;
  EXPECT_NE(w.out.find("job ft SUCCEEDED: 668 steps"), std::string::npos)
      << w.out;
  const nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["global_batch_size"], 48);
  const nlohmann::json& history = res["membership"];
  ASSERT_EQ(history.size(), 3u) << res.dump(2);
  EXPECT_EQ(history[0]["from_step"], 0);
  EXPECT_EQ(history[0]["workers"], 3);
  EXPECT_EQ(history[1]["from_step"], shrink_step);
  EXPECT_EQ(history[1]["workers"], 2);
  EXPECT_EQ(history[2]["from_step"], grow_step);
  EXPECT_EQ(history[2]["workers"], 3);
  // The whole job's wall time (generation 1 started before the kill; the
  // last generation only began after the grow), and each generation's
  // start.
  EXPECT_GT(res["wall_seconds"].get<double>(), Since(killed)) << res.dump(2);
  EXPECT_EQ(res["resumed_from_step"], 0);
  for (const nlohmann::json& g : history) {
    EXPECT_TRUE(g["started_at"].is_string()) << g;
  }
  printf("elastic: %s\nfixed world: test accuracy %.4f\n", res.dump(2).c_str(),
         alone["test_accuracy"].get<double>());
  EXPECT_NEAR(res["test_accuracy"].get<double>(),
              alone["test_accuracy"].get<double>(), 0.005)
      << res.dump(2);
  // Every sample of the 4 epochs once across the three worlds: 3 replicas,
  // then 2 (each taking 24 of the global batch's 48), then 3 again.
  const std::string audit = ExpectExactlyOnce(4);
  EXPECT_NE(audit.find("generations 1 from step 0 on 3 replicas, 2 from step " +
                       std::to_string(shrink_step) +
                       " on 2 replicas, 3 from "
                       "step " +
                       std::to_string(grow_step) + " on 3 replicas"),
            std::string::npos)
      << audit;
}

// The same elastic job with its state sharded (cluster.shard "gradients")
// and each part kept by the next rank too (copies, the default): the grow
// starts generation 2 from the parts the ranks kept at the step they
// stopped at (nothing is done again), re-sharded over 3 workers; after a
// kill -9 of one of the 3 the survivors' parts still make the whole state,
// so the shrink to 2 redoes only the step the kill broke (a survivor that
// the kill stopped at the barrier before that step's update offers both
// steps, so the survivors always share one). Every sample of the 4 epochs
// is used once.
TEST_F(FaultTest, ShardedElasticJobGrowsAndShrinksFromTheRanksParts) {
  nlohmann::json job = fault_fixture::Audited(ElasticJob());
  job["cluster"]["shard"] = "gradients";
  job["cluster"]["start_grace_seconds"] = 0.5;
  Start();  // 2 workers: the job starts with its min
  ASSERT_EQ(Client({"submit", WriteJob(job)}).exit.exit_code, 0);
  WaitForStep(100);
  std::string why, last;
  ASSERT_TRUE(cluster_->StartWorkers(1, 1, 1, &why)) << why;
  ASSERT_TRUE(
      WaitForStatus("RUNNING.*generation 2|generation 2.*RUNNING", 30, &last))
      << last;
  WaitForStep(300);
  Subprocess* victim = RankProcess(2);
  ASSERT_NE(victim, nullptr);
  victim->Signal(SIGKILL);
  RunResult w = WatchToEnd();
  EXPECT_EQ(w.exit.exit_code, 0) << w.out << w.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(R"(RUNNING generation 2 from step (\d+) (\(the parts the )"
                 R"(ranks kept in memory, from ranks \d, \d; the latest )"
                 R"(checkpoint is step \d+\) )?\(the world grows, [\d.]+ s )"
                 R"(later, no restart counted; no step is done again\))")))
      << w.out;
  const int grow_step = std::stoi(m[1]);
  EXPECT_GE(grow_step, 100);
  EXPECT_TRUE(m[2].matched || grow_step % 50 == 0) << m[0];
  ASSERT_TRUE(std::regex_search(
      w.out, m,
      std::regex(R"(RUNNING generation 3 from step (\d+) (\(the parts the )"
                 R"(ranks kept in memory, from ranks \d, \d, \d; the latest )"
                 R"(checkpoint is step \d+\) )?\(the world shrinks from 3 )"
                 R"(to 2 workers [\d.]+ s after the failure, no restart )"
                 R"(counted; ([^)]*)\))")))
      << w.out;
  std::printf("%s\n", m[0].str().c_str());
  if (m[2].matched) {
    EXPECT_EQ(m[3].str(), "only step " + std::to_string(std::stoi(m[1]) + 1) +
                              ", which the failure broke, is done again");
  } else {
    // Memory and the latest checkpoint are the same step (1 run in 50).
    EXPECT_EQ(std::stoi(m[1]) % 50, 0) << w.out;
  }
  EXPECT_EQ(w.out.find("the survivors' memory does not hold"),
            std::string::npos)
      << w.out;
  const int shrink_step = std::stoi(m[1]);
  EXPECT_GE(shrink_step, grow_step);
  EXPECT_NE(w.out.find("job ft SUCCEEDED: 668 steps"), std::string::npos)
      << w.out;
  const nlohmann::json res = Result();
  ASSERT_TRUE(res.is_object());
  EXPECT_EQ(res["shard"], "gradients");
  EXPECT_EQ(res["copies"], true);
  EXPECT_GT(res["test_accuracy"].get<double>(), 0.6) << res.dump(2);
  const std::string audit = ExpectExactlyOnce(4);
  EXPECT_NE(
      audit.find("generations 1 from step 0 on 2 replicas, 2 from step " +
                 std::to_string(grow_step) + " on 3 replicas, 3 from step " +
                 std::to_string(shrink_step) + " on 2 replicas"),
      std::string::npos)
      << audit;
}

}  // namespace
}  // namespace lockstep
