// gRPC health against a real local cluster: ready and liveness, NOT_SERVING
// before registration, the coordinator writing its journal on SIGTERM and a
// restarted one taking its worker back, an idle worker leaving on SIGTERM;
// and ops flags that cannot be used are refused, naming the flag. The
// fixture is in ops_fixture.h.
#include "tests/ops_fixture.h"

#include <signal.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/subprocess.h"

namespace lockstep {
namespace {

using ops_fixture::OpsTest;
using ops_fixture::WaitForMatch;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFileOrEmpty;
using testing::Runfile;
using testing::RunProcess;
using testing::RunResult;
using testing::Subprocess;

TEST_F(OpsTest, HealthFollowsRegistrationAndShutdown) {
  RunResult ready = Health(health_);
  EXPECT_EQ(ready.exit.exit_code, 0) << ready.err;
  EXPECT_EQ(ready.out, "SERVING\n");
  // The main (job and cluster) port answers the same protocol.
  EXPECT_EQ(Health(cluster_->address(), "liveness").out, "SERVING\n");
  RunResult unknown = Health(health_, "lockstep.v1.JobService");
  EXPECT_EQ(unknown.exit.exit_code, 1);
  EXPECT_THAT(unknown.err,
              HasSubstr("unknown service \"lockstep.v1.JobService\""));

  // A worker whose coordinator is not there: alive but not ready.
  Subprocess lonely(
      {Runfile("client/lockstep"), "worker", "--coordinator", "127.0.0.1:1",
       "--health-listen", "127.0.0.1:0", "--threads", "1"},
      dir_);
  const std::string lonely_health =
      WaitForMatch(lonely, R"(gRPC health \(plaintext, for probes\) on (\S+))");
  ASSERT_FALSE(lonely_health.empty()) << lonely.Stdout() << lonely.Stderr();
  RunResult not_ready = Health(lonely_health);
  EXPECT_EQ(not_ready.exit.exit_code, 1);
  EXPECT_EQ(not_ready.out, "NOT_SERVING\n");
  EXPECT_EQ(Health(lonely_health, "liveness").out, "SERVING\n");
  lonely.Signal(SIGTERM);
  const testing::ExitInfo le = lonely.Wait(15);
  ASSERT_TRUE(le.exited) << lonely.Stdout();
  EXPECT_EQ(le.exit_code, 0) << lonely.Stderr();

  // Registered: ready.
  StartWorker(0);
  const std::string worker_health = WaitForMatch(
      cluster_->worker(0),
      R"re("msg":"gRPC health \(plaintext, for probes\) on ([^"]+)")re");
  ASSERT_FALSE(worker_health.empty()) << cluster_->worker(0).Stdout();
  EXPECT_EQ(Health(worker_health).out, "SERVING\n");

  // SIGTERM to the coordinator: it writes its journal and exits 0.
  const std::string journal = cluster_->storage() + "/coordinator/journal.pb";
  unlink(journal.c_str());
  cluster_->coordinator().Signal(SIGTERM);
  const testing::ExitInfo ce = cluster_->coordinator().Wait(15);
  ASSERT_TRUE(ce.exited) << cluster_->coordinator().Stdout();
  EXPECT_EQ(ce.exit_code, 0) << cluster_->coordinator().Stderr();
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("shutting down: journal written to " + journal));
  EXPECT_FALSE(ReadFileOrEmpty(journal).empty());
  // Its worker stays registered (the journal keeps its membership), and
  // alive; a coordinator started on the same storage takes it back.
  EXPECT_EQ(Health(worker_health, "liveness").out, "SERVING\n");
  EXPECT_EQ(Health(worker_health).out, "SERVING\n");
  ASSERT_TRUE(cluster_->RestartCoordinator());
  EXPECT_THAT(cluster_->coordinator().Stdout(),
              HasSubstr("1 workers expected to heartbeat again"));
  RunResult list = cluster_->Client({"list"});
  EXPECT_THAT(list.out, HasSubstr("workers: 1\n")) << list.out << list.err;
  // SIGTERM to an idle worker: it leaves the membership at once and exits 0.
  cluster_->worker(0).Signal(SIGTERM);
  const testing::ExitInfo we = cluster_->worker(0).Wait(15);
  ASSERT_TRUE(we.exited);
  EXPECT_EQ(we.exit_code, 0);
  EXPECT_THAT(cluster_->worker(0).Stdout(), HasSubstr("left the cluster"));
  EXPECT_TRUE(cluster_->coordinator().WaitForOutput(" left", 10))
      << cluster_->coordinator().Stdout();
}

TEST_F(OpsTest, UnusableOpsFlagsAreRefusedNamingTheFlag) {
  const std::string lockstep = Runfile("client/lockstep");
  RunResult yaml =
      RunProcess({lockstep, "coordinator", "--listen", "127.0.0.1:0",
                  "--storage", dir_ + "/s2", "--log-format", "yaml"},
                 dir_, 20);
  EXPECT_EQ(yaml.exit.exit_code, 2);
  EXPECT_THAT(yaml.err, HasSubstr("lockstep coordinator: --log-format: must be "
                                  "\"text\" or \"json\", got \"yaml\""));
  // The coordinator's HTTP port is taken: a second daemon cannot have it.
  RunResult busy =
      RunProcess({lockstep, "coordinator", "--listen", "127.0.0.1:0",
                  "--storage", dir_ + "/s3", "--http", http_},
                 dir_, 20);
  EXPECT_EQ(busy.exit.exit_code, 1);
  EXPECT_THAT(busy.err, HasSubstr("--http " + http_ + ": port " +
                                  http_.substr(http_.rfind(':') + 1) +
                                  " is in use by another process"));
  RunResult worker =
      RunProcess({lockstep, "worker", "--coordinator", cluster_->address(),
                  "--health-listen", health_, "--threads", "1"},
                 dir_, 20);
  EXPECT_EQ(worker.exit.exit_code, 1);
  EXPECT_THAT(worker.err, HasSubstr("--health-listen " + health_ + ": port " +
                                    health_.substr(health_.rfind(':') + 1) +
                                    " is in use by another process"));
  // Said before gRPC tries: none of its raw log lines.
  EXPECT_THAT(worker.err, Not(HasSubstr("chttp2_server")));
}

}  // namespace
}  // namespace lockstep
