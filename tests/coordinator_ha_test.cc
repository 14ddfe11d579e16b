// Coordinators in standby behind an etcd lease (DESIGN "Coordinator high
// availability"), with a real etcd, real coordinators and workers: an
// etcd member and then the leader killed mid-job (a standby leads within
// 3 s, the lease's TTL being 2 s, and the job ends on the uninterrupted
// run's fingerprint, in its first generation, every sample seen once),
// and the leader paused past its lease (the old one, woken, writes
// nothing and steps down). Each prints its figures for docs/failure.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/etcd_server.h"
#include "tests/fault_fixture.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::Clock;
using fault_fixture::FaultJob;
using fault_fixture::Since;
using testing::Runfile;
using testing::RunResult;
using testing::Subprocess;

constexpr char kLeading[] = "leading the coordinators";

// How often `word` occurs in `text`.
int CountOf(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos;
       at = text.find(word, at + 1)) {
    ++n;
  }
  return n;
}

class CoordinatorHaTest : public fault_fixture::FaultTest {
 protected:
  void SetUp() override {
    const std::string missing = testing::EtcdMissing();
    if (!missing.empty()) GTEST_SKIP() << missing;
  }

  // etcd (`members` of it), two coordinators on one storage (the first
  // leads) and two workers that know both.
  void StartHa(int members = 1) {
    dir_ = testing::NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    etcd_ = std::make_unique<testing::EtcdCluster>(members, dir_ + "/etcd");
    ASSERT_TRUE(etcd_->ok()) << etcd_->error();
    for (int i = 0; i < 2; ++i) {
      addresses_.push_back("127.0.0.1:" + std::to_string(testing::FreePort()));
      StartCoordinator(i);
      if (i == 0) {
        ASSERT_TRUE(coordinators_[0]->WaitForOutput(kLeading, 30))
            << coordinators_[0]->Stdout() << coordinators_[0]->Stderr();
      }
    }
    ASSERT_TRUE(coordinators_[1]->WaitForOutput(
        "standing by: the leader is " + addresses_[0], 30))
        << coordinators_[1]->Stdout() << coordinators_[1]->Stderr();
    leader_ = 0;
    for (int i = 0; i < 2; ++i) {
      workers_.push_back(std::make_unique<Subprocess>(
          std::vector<std::string>{
              Runfile("client/lockstep"), "worker", "--coordinator",
              addresses_[0] + "," + addresses_[1], "--threads", "1"},
          dir_));
    }
    for (auto& w : workers_) {
      ASSERT_TRUE(w->WaitForOutput("registered with " + addresses_[0], 30))
          << w->Stdout() << w->Stderr();
    }
  }

  void StartCoordinator(int i) {
    coordinators_.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{
            Runfile("client/lockstep"), "coordinator", "--listen",
            addresses_[i], "--storage", dir_ + "/storage", "--etcd",
            etcd_->Endpoints(), "--etcd-prefix", "/lockstep/ha"},
        dir_));
  }

  // The verbs go to the coordinator that leads, or with
  // `clients_follow_` to both, as a user gives them (the CLI follows).
  RunResult Client(std::vector<std::string> args,
                   double timeout = 120) override {
    std::vector<std::string> argv = {Runfile("client/lockstep")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--coordinator");
    argv.push_back(clients_follow_ ? addresses_[0] + "," + addresses_[1]
                                   : addresses_[leader_]);
    return testing::RunProcess(argv, dir_, timeout);
  }
  std::string StorageDir() override { return dir_ + "/storage"; }

  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Subprocess>> coordinators_, workers_;
  int leader_ = 0;
  bool clients_follow_ = false;
};

TEST_F(CoordinatorHaTest, AStandbyLeadsWhenTheLeaderIsKilledAndTheJobGoesOn) {
  const std::string reference = ReferenceFingerprint();
  // Three etcd members, of which one dies first: the coordinators go on
  // with the other two.
  StartHa(3);
  clients_follow_ = true;
  // With the sample audit on, every step's samples reach a coordinator
  // before its collective: none is lost or taken twice over the failover.
  const nlohmann::json job = fault_fixture::Audited(FaultJob());
  RunResult submitted = Client({"submit", WriteJob(job)});
  ASSERT_EQ(submitted.exit.exit_code, 0) << submitted.out << submitted.err;
  WaitForStep(100);
  etcd_->Kill(0);
  WaitForStep(150);
  const int step_at_kill = StatusStep(Client({"status", "ft"}).out);
  coordinators_[0]->Signal(SIGKILL);
  const Clock::time_point killed = Clock::now();
  ASSERT_TRUE(coordinators_[0]->Wait(10).exited);
  // A job submitted while no coordinator leads is refused with an error
  // that says to retry, or accepted (once: names are identities).
  const std::string other = WriteJob(FaultJob({{"name", "ft2"}}), "ft2.json");
  RunResult during = Client({"submit", other}, 60);
  std::printf("submitted during the failover: exit %d\n%s%s\n",
              during.exit.exit_code, during.out.c_str(), during.err.c_str());
  if (during.exit.exit_code != 0) {
    EXPECT_TRUE(std::regex_search(
        during.err, std::regex("UNAVAILABLE|unreachable|standby|replaying")))
        << during.err;
  }
  // The lease's TTL is 2 s; etcd expires it and the standby, polling the
  // key every 0.2 s, takes it.
  ASSERT_TRUE(coordinators_[1]->WaitForOutput(kLeading, 10))
      << coordinators_[1]->Stdout() << coordinators_[1]->Stderr();
  const double took = Since(killed);
  std::printf("the standby led %.2f s after the leader was killed\n", took);
  EXPECT_LT(took, testing::Scaled(3.0));
  leader_ = 1;
  // The first progress report the new leader accepted: a later step.
  WaitForStep(step_at_kill + 1);
  std::printf("its first progress report accepted %.2f s after the kill\n",
              Since(killed));
  std::string last;
  ASSERT_TRUE(WaitForStatus("SUCCEEDED", 180, &last)) << last;
  // The workers trained on in generation 1: no restart, no step redone.
  EXPECT_NE(last.find("job ft: SUCCEEDED (generation 1)"), std::string::npos)
      << last;
  const std::string taken =
      "coordinator restarted: RUNNING at generation 1 taken over from the "
      "journal";
  RunResult watched = Client({"watch", "ft"}, 30);
  EXPECT_NE(watched.out.find(taken), std::string::npos) << watched.out;
  EXPECT_EQ(Result()["fingerprint"], reference);
  ExpectExactlyOnce(4);
  // The new leader's checkpoints record its term, a later one than the
  // killed leader's (a late commit of the killed one could not undo them).
  std::string terms[2];  // each coordinator's, from its log
  for (int c : {0, 1}) {
    const std::string log = coordinators_[c]->Stdout();
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(log, m,
                          std::regex(R"(leading the coordinators )"
                                     R"(\(etcd key [^,]+, term (\d+))")))
        << log;
    terms[c] = m[1];
  }
  EXPECT_GT(std::stoll(terms[1]), std::stoll(terms[0]));
  const std::string final_state = testing::ReadFileOrEmpty(
      StorageDir() + "/jobs/ft/checkpoints/" +
      testing::ReadFileOrEmpty(StorageDir() + "/jobs/ft/checkpoints/latest")
          .substr(0, 13) +
      "/state.json");
  EXPECT_NE(final_state.find("\"term\": " + terms[1] + ","), std::string::npos)
      << final_state;
  // Submitted again: one job ft2, whichever way the first try went.
  RunResult again = Client({"submit", other});
  EXPECT_EQ(again.exit.exit_code, 0) << again.out << again.err;
  RunResult list = Client({"list"});
  EXPECT_EQ(CountOf(list.out, "\nft2 "), 1) << list.out;
  Client({"cancel", "ft2"});
}

TEST_F(CoordinatorHaTest, APausedLeaderWakesUpWritesNothingAndStepsDown) {
  const std::string reference = ReferenceFingerprint();
  StartHa();
  RunResult submitted = Client({"submit", WriteJob(FaultJob())});
  ASSERT_EQ(submitted.exit.exit_code, 0) << submitted.out << submitted.err;
  WaitForStep(100);
  const int step_at_pause = StatusStep(Client({"status", "ft"}).out);
  coordinators_[0]->Signal(SIGSTOP);
  const Clock::time_point paused = Clock::now();
  ASSERT_TRUE(coordinators_[1]->WaitForOutput(kLeading, 10))
      << coordinators_[1]->Stdout() << coordinators_[1]->Stderr();
  leader_ = 1;
  // The workers give the paused one up within seconds (with several
  // coordinators their connections ping every 2 s; their reports wait 5 s),
  // calls in flight included (a checkpoint upload waited 15 s for the
  // default keepalive before), and report to the new leader.
  WaitForStep(step_at_pause + 1);
  const double reached = Since(paused);
  std::printf("a later step reached the new leader %.2f s after the pause\n",
              reached);
  EXPECT_LT(reached, testing::Scaled(8.0));
  std::string last;
  // The job goes on under the new leader; the old one stays paused past
  // its workers' timeout (8 s), so that when it wakes it believes them
  // lost and tries to end their generation.
  WaitForStep(StatusStep(Client({"status", "ft"}).out) + 50);
  while (Since(paused) < 10) usleep(100000);
  coordinators_[0]->Signal(SIGCONT);
  const testing::ExitInfo e = coordinators_[0]->Wait(20);
  ASSERT_TRUE(e.exited) << coordinators_[0]->Stdout();
  EXPECT_EQ(e.exit_code, 1);
  const std::string old_log = coordinators_[0]->Stdout();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      old_log, m,
      std::regex(R"(stepping down: this coordinator's etcd lease (may have )?)"
                 R"(expired[^\n]*\((\d+) journal writes refused\))")))
      << old_log;
  std::printf("the old leader stepped down: %s\n", m[0].str().c_str());
  EXPECT_EQ(old_log.find("RUNNING generation 2"), std::string::npos) << old_log;
  ASSERT_TRUE(WaitForStatus("SUCCEEDED", 180, &last)) << last;
  // Nothing the old leader did took effect: no restart, same bytes.
  EXPECT_NE(last.find("job ft: SUCCEEDED (generation 1)"), std::string::npos)
      << last;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

// A coordinator without --etcd and coordinators with it on one storage
// would each keep a journal of its own: whichever comes second is refused,
// naming the other (as a second coordinator without --etcd is).
TEST_F(CoordinatorHaTest, ModesAreNotMixedOnOneStorage) {
  dir_ = testing::NewTempDir("mixed");
  etcd_ = std::make_unique<testing::EtcdCluster>(1, dir_ + "/etcd");
  ASSERT_TRUE(etcd_->ok()) << etcd_->error();
  const std::string storage = dir_ + "/storage";
  auto plain = [&] {
    return std::vector<std::string>{Runfile("client/lockstep"),
                                    "coordinator",
                                    "--listen",
                                    "127.0.0.1:0",
                                    "--storage",
                                    storage};
  };
  auto with_etcd = [&] {
    std::vector<std::string> argv = plain();
    argv.insert(argv.end(), {"--etcd", etcd_->Endpoints()});
    return argv;
  };
  {
    Subprocess alone(plain(), dir_);
    ASSERT_TRUE(alone.WaitForOutput("coordinator listening on", 30))
        << alone.Stderr();
    RunResult refused = testing::RunProcess(with_etcd(), dir_, 30);
    EXPECT_EQ(refused.exit.exit_code, 1);
    EXPECT_TRUE(std::regex_search(
        refused.err,
        std::regex("--storage " + storage +
                   R"( is in use by a coordinator without --etcd \(pid \d+ )")))
        << refused.err;
    // Nor does a second one without --etcd start beside it.
    RunResult second = testing::RunProcess(plain(), dir_, 30);
    EXPECT_EQ(second.exit.exit_code, 1);
    EXPECT_TRUE(std::regex_search(
        second.err,
        std::regex(
            "--storage " + storage +
            R"( is in use by another coordinator \(pid \d+ on \S+ since )")))
        << second.err;
    alone.Signal(SIGTERM);
    ASSERT_TRUE(alone.Wait(30).exited);
  }
  // The refused one left no mark: the plain one starts again.
  {
    Subprocess again(plain(), dir_);
    ASSERT_TRUE(again.WaitForOutput("coordinator listening on", 30))
        << again.Stderr();
    again.Signal(SIGTERM);
    ASSERT_TRUE(again.Wait(30).exited);
  }
  Subprocess ha(with_etcd(), dir_);
  ASSERT_TRUE(ha.WaitForOutput(kLeading, 30)) << ha.Stderr();
  RunResult refused = testing::RunProcess(plain(), dir_, 30);
  EXPECT_EQ(refused.exit.exit_code, 1);
  EXPECT_NE(refused.err.find("--storage " + storage +
                             " belongs to coordinators with --etcd (" +
                             etcd_->Endpoints() + " prefix /lockstep)"),
            std::string::npos)
      << refused.err;
}

}  // namespace
}  // namespace lockstep
