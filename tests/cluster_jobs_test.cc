// Jobs on a real local cluster, driven by the client verbs: status, list
// and cancel, a job that waits for enough workers, a running job
// cancelled (its workers free again), and refusals (unknown job, nccl on
// CPU workers, a bad job, another protocol version, no coordinator, a
// duplicate submit). The fixture is in cluster_fixture.h.
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "rpc/rpc_util.h"
#include "tests/cluster_fixture.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using cluster_fixture::Binary;
using cluster_fixture::ClusterTest;
using cluster_fixture::TinyJob;
using testing::RunProcess;
using testing::RunResult;

TEST_F(ClusterTest, PendingUntilEnoughWorkersAndCancellable) {
  StartWorkers(1, /*replicas=*/2);
  RunResult sub = Client(
      {"submit",
       WriteJob(TinyJob({{"name", "wide"}, {"cluster", {{"workers", 3}}}}))});
  ASSERT_EQ(sub.exit.exit_code, 0) << sub.err;
  EXPECT_NE(sub.out.find("submitted job wide: PENDING"), std::string::npos)
      << sub.out;
  RunResult st = Client({"status", "wide"});
  EXPECT_NE(st.out.find("job wide: PENDING"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("needs 3 with >= 1 replicas each; 1 idle qualify"),
            std::string::npos)
      << st.out;
  RunResult c = Client({"cancel", "wide"});
  EXPECT_EQ(c.exit.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("job wide: CANCELLED"), std::string::npos) << c.out;
  // A job the single worker can run alone still runs afterwards, with two
  // replicas on it.
  RunResult one =
      Client({"submit",
              WriteJob(TinyJob(
                  {{"name", "solo"},
                   {"epochs", 1},
                   {"cluster", {{"workers", 1}, {"replicas_per_worker", 2}}}})),
              "--wait"});
  EXPECT_EQ(one.exit.exit_code, 0) << one.out << one.err;
  EXPECT_EQ(Result(storage_, "solo")["replicas"], 2);
}

TEST_F(ClusterTest, CancelStopsARunningJobAndFreesTheWorkers) {
  StartWorkers(2);
  nlohmann::json slow = TinyJob(nlohmann::json::parse(R"({
    "name": "slow", "epochs": 40,
    "model": {"input_shape": [8, 8, 1], "layers": [
      {"type": "flatten"},
      {"type": "dense", "units": 256, "activation": "relu"},
      {"type": "dense", "units": 10}]},
    "data": {"train_samples": 4000}})"));
  ASSERT_EQ(Client({"submit", WriteJob(slow)}).exit.exit_code, 0);
  std::string last;
  ASSERT_TRUE(WaitForStatus("slow", R"(step [1-9]\d*/)", 30, &last)) << last;
  // status names both ranks, their hosts, heartbeats and shards.
  EXPECT_NE(last.find("job slow: RUNNING (generation 1)"), std::string::npos)
      << last;
  EXPECT_TRUE(std::regex_search(
      last,
      std::regex(
          R"(rank 1 w2\s+\S+ pid \d+\s+127\.0\.0\.1:\d+\s+1 replicas\s+heartbeat \d+\.\ds ago)")))
      << last;
  EXPECT_NE(last.find("replicas 1-1 of 2: samples [16, 32) of each global "
                      "batch of 32"),
            std::string::npos)
      << last;
  // The running job's name with the same spec again: that job, nothing
  // new; with another spec: refused, naming the field.
  RunResult dup = Client({"submit", WriteJob(slow, "dup.json")});
  EXPECT_EQ(dup.exit.exit_code, 0) << dup.err;
  EXPECT_TRUE(std::regex_search(
      dup.out, std::regex(R"(job slow is already RUNNING at step \d+ )"
                          R"(\(generation 1\): following it)")))
      << dup.out;
  nlohmann::json changed = slow;
  changed["seed"] = 99;
  RunResult other = Client({"submit", WriteJob(changed, "other.json")});
  EXPECT_EQ(other.exit.exit_code, 2);
  EXPECT_TRUE(std::regex_search(
      other.err,
      std::regex(R"(job "slow" is already RUNNING at step \d+ with another )"
                 R"(spec: seed \(\d+ -> 99\); cancel it first)")))
      << other.err;

  RunResult c = Client({"cancel", "slow"});
  EXPECT_EQ(c.exit.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("job slow: CANCELLED (cancelled at step"),
            std::string::npos)
      << c.out;
  for (auto& w : workers_) {
    EXPECT_TRUE(w->WaitForOutput(
        "job slow generation 1: this worker's part ended (the coordinator "
        "stopped it): ",
        20))
        << w->Stdout();
  }
  // Both workers are free again: the next job runs to the end.
  RunResult next =
      Client({"submit", WriteJob(TinyJob({{"name", "after"}, {"epochs", 1}})),
              "--wait"});
  EXPECT_EQ(next.exit.exit_code, 0) << next.out << next.err;
  RunResult w = Client({"watch", "slow"});
  EXPECT_EQ(w.exit.exit_code, 1);  // watching a cancelled job: not a success
  EXPECT_NE(w.out.find("job slow CANCELLED"), std::string::npos) << w.out;
}

TEST_F(ClusterTest, RefusalsSayWhatIsWrong) {
  RunResult st = Client({"status", "nope"});
  EXPECT_EQ(st.exit.exit_code, 2);
  EXPECT_NE(st.err.find("no job named \"nope\""), std::string::npos) << st.err;
  RunResult c = Client({"cancel", "nope"});
  EXPECT_EQ(c.exit.exit_code, 2);
  EXPECT_NE(c.err.find("no job named \"nope\""), std::string::npos) << c.err;

  // CPU workers cannot run an NCCL job: it waits, saying for what.
  RunResult nccl = Client(
      {"submit", WriteJob(TinyJob({{"name", "gpuonly"},
                                   {"cluster", {{"collective", "nccl"}}}}))});
  EXPECT_EQ(nccl.exit.exit_code, 0) << nccl.err;
  RunResult pending = Client({"status", "gpuonly"});
  EXPECT_NE(pending.out.find("offer too few GPUs that can run NCCL"),
            std::string::npos)
      << pending.out;
  EXPECT_EQ(Client({"cancel", "gpuonly"}).exit.exit_code, 0);

  RunResult bad = Client(
      {"submit", WriteJob(TinyJob({{"optimizer", {{"learning_rate", -1}}}}))});
  EXPECT_EQ(bad.exit.exit_code, 2);
  EXPECT_NE(bad.err.find("optimizer.learning_rate: must be > 0"),
            std::string::npos)
      << bad.err;

  RunResult old = RunProcess({Binary(), "worker", "--coordinator", address_,
                              "--protocol-version-for-testing", "99"},
                             dir_, 30);
  ASSERT_TRUE(old.exit.exited);
  EXPECT_EQ(old.exit.exit_code, 1);
  EXPECT_NE(old.err.find("protocol version 99 is not this coordinator's (" +
                         std::to_string(kProtocolVersion) + ")"),
            std::string::npos)
      << old.err;
  EXPECT_NE(cluster_->coordinator().Stdout().find("refused worker"),
            std::string::npos);

  RunResult none =
      RunProcess({Binary(), "list", "--coordinator", "127.0.0.1:1"}, dir_, 60);
  EXPECT_EQ(none.exit.exit_code, 1);
  EXPECT_NE(none.err.find("unreachable"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace lockstep
