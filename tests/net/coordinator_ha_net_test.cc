// Coordinators in standby on hosts of their own (tests/net/netlab.h): etcd
// on host 0, coordinators A and B on hosts 1 and 2, workers on 3 and 4,
// the CLI on 5. The leader A is cut off from etcd alone (a blackhole both
// ways between hosts 1 and 0), while it still reaches the workers: it
// must stop answering and step down once its lease may have lapsed, B
// must lead, and the job must end SUCCEEDED in its first generation on
// the fingerprint of an uninterrupted `lockstep train`. Prints its
// figures for docs/failure.md.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/etcd_server.h"
#include "tests/fault_fixture.h"
#include "tests/net/netlab.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using fault_fixture::Clock;
using fault_fixture::FaultJob;
using fault_fixture::Since;
using testing::NetLab;
using testing::RunResult;
using testing::Subprocess;

constexpr int kEtcdHost = 0, kLeaderHost = 1, kStandbyHost = 2, kClientHost = 5;

class CoordinatorHaNetTest : public fault_fixture::FaultTest {
 protected:
  void SetUp() override {
    const std::string missing = NetLab::MissingTools();
    ASSERT_EQ(missing, "") << missing;
    const std::string why = NetLab::Unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
    const std::string no_etcd = testing::EtcdMissing();
    if (!no_etcd.empty()) GTEST_SKIP() << no_etcd;
  }
  void TearDown() override {
    workers_.clear();
    coordinators_.clear();
    etcd_.reset();
    lab_.reset();
  }

  std::string Coordinator(int host) const {
    return lab_->address(host) + ":7070";
  }

  RunResult Client(std::vector<std::string> args,
                   double timeout = 120) override {
    std::vector<std::string> argv = {testing::Runfile("client/lockstep")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--coordinator");
    argv.push_back(Coordinator(kLeaderHost) + "," + Coordinator(kStandbyHost));
    return testing::RunProcess(lab_->In(kClientHost, argv), dir_, timeout);
  }
  std::string StorageDir() override { return dir_ + "/storage"; }

  std::unique_ptr<NetLab> lab_;
  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::vector<std::unique_ptr<Subprocess>> coordinators_, workers_;
};

TEST_F(CoordinatorHaNetTest, ALeaderCutOffFromEtcdStepsDownAndTheJobGoesOn) {
  const std::string reference = ReferenceFingerprint();
  dir_ = testing::NewTempDir(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
  lab_ = std::make_unique<NetLab>(6);
  ASSERT_TRUE(lab_->ok()) << lab_->error();
  testing::EtcdPlacement in_lab;
  in_lab.hosts = {lab_->address(kEtcdHost)};
  in_lab.wrap = [this](int, std::vector<std::string> argv) {
    return lab_->In(kEtcdHost, std::move(argv));
  };
  etcd_ = std::make_unique<testing::EtcdCluster>(1, dir_ + "/etcd", in_lab);
  ASSERT_TRUE(etcd_->ok()) << etcd_->error();
  for (int host : {kLeaderHost, kStandbyHost}) {
    coordinators_.push_back(std::make_unique<Subprocess>(
        lab_->In(host, {testing::Runfile("client/lockstep"), "coordinator",
                        "--listen", Coordinator(host), "--storage",
                        dir_ + "/storage", "--etcd", etcd_->Endpoints(),
                        "--etcd-prefix", "/lockstep/net"}),
        dir_));
    if (host == kLeaderHost) {
      ASSERT_TRUE(
          coordinators_[0]->WaitForOutput("leading the coordinators", 30))
          << coordinators_[0]->Stdout() << coordinators_[0]->Stderr();
    }
  }
  ASSERT_TRUE(coordinators_[1]->WaitForOutput("standing by", 30))
      << coordinators_[1]->Stdout() << coordinators_[1]->Stderr();
  for (int host : {3, 4}) {
    workers_.push_back(std::make_unique<Subprocess>(
        lab_->In(
            host,
            {testing::Runfile("client/lockstep"), "worker", "--coordinator",
             Coordinator(kLeaderHost) + "," + Coordinator(kStandbyHost),
             "--listen", lab_->address(host) + ":7071", "--name",
             "host" + std::to_string(host), "--threads", "1"}),
        dir_));
  }
  for (auto& w : workers_) {
    ASSERT_TRUE(w->WaitForOutput("registered with", 30))
        << w->Stdout() << w->Stderr();
  }
  RunResult submitted = Client({"submit", WriteJob(FaultJob())});
  ASSERT_EQ(submitted.exit.exit_code, 0) << submitted.out << submitted.err;
  WaitForStep(150);

  // A and etcd cannot reach each other; A still reaches everyone else.
  ASSERT_TRUE(lab_->Block(kLeaderHost, kEtcdHost)) << lab_->error();
  ASSERT_TRUE(lab_->Block(kEtcdHost, kLeaderHost)) << lab_->error();
  const Clock::time_point cut = Clock::now();
  // Whichever comes first: the leader's exit or the standby's lead.
  double stepped_down = -1, led = -1;
  testing::ExitInfo e;
  while ((stepped_down < 0 || led < 0) && Since(cut) < testing::Scaled(15)) {
    if (stepped_down < 0) {
      e = coordinators_[0]->Wait(0.02);
      if (e.exited) stepped_down = Since(cut);
    }
    if (led < 0 &&
        coordinators_[1]->WaitForOutput("leading the coordinators", 0.02)) {
      led = Since(cut);
    }
  }
  ASSERT_GE(stepped_down, 0) << coordinators_[0]->Stdout();
  ASSERT_GE(led, 0) << coordinators_[1]->Stdout();
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_NE(coordinators_[0]->Stdout().find(
                "stepping down: this coordinator's etcd lease may have "
                "expired (no keep-alive answered for 2 s;"),
            std::string::npos)
      << coordinators_[0]->Stdout();
  std::printf(
      "FIGURE cut from etcd: the leader stepped down %.2f s after the cut, "
      "the standby led %.2f s after it\n",
      stepped_down, led);
  EXPECT_LT(stepped_down, testing::Scaled(4.0));
  std::string last;
  ASSERT_TRUE(WaitForStatus("SUCCEEDED", 180, &last)) << last;
  EXPECT_NE(last.find("job ft: SUCCEEDED (generation 1)"), std::string::npos)
      << last;
  EXPECT_EQ(Result()["fingerprint"], reference);
}

}  // namespace
}  // namespace lockstep
